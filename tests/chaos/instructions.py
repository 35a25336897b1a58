"""The chaos run's standing instructions (docs/api.md "Custom instructions"): now and then a client rewrites its
user's instructions on the account page, blank now and then (none), sent again through an outage as a client would.
The user's other conversations go on meanwhile, so a change lands between their turns, and while some stream."""

import random
import time
import uuid
from typing import TYPE_CHECKING

import httpx

from devtools.records import ChaosUser, InstructionsChange
from tests.chaos.clients import request

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun

BLANK = 0.2  # how often a rewrite clears the instructions


def rewrite(run: "ChaosRun", http: httpx.Client, rng: random.Random, user: ChaosUser) -> None:
    text = "" if rng.random() < BLANK else f"Answer as chaos {uuid.uuid4().hex[:8]} would."
    change = InstructionsChange(user, text, sent_at=time.time())
    run.instruction_changes.append(change)
    response = request(http, "PUT", "/api/v1/account/instructions", {"text": text})
    if response.status_code != 200 or response.json().get("text") != text:
        run.account_errors.append(f"PUT instructions {text!r} answered {response.status_code}: {response.text[:300]}")
        return
    change.acknowledged_at = time.time()
    run.figures.commands_by_kind["instructions"] += 1
