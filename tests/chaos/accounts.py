"""The chaos run's account deletions and push subscriptions.

Accounts are deleted by users of their own (the others go on): each, in its slice of the window, subscribes a
browser to the suite's push service, opens Main Chat and a Task at the provider, uploads a file, exports its data,
and deletes itself with its password while its last message may still run. Every other user subscribes a browser
at the start, so runs that end are pushed throughout."""

import random
import time
import uuid
from typing import TYPE_CHECKING

import httpx

from devtools.push_service import PushService
from devtools.records import ChaosUser, DeletedAccount
from tests.chaos.clients import accepted, request, settled_submission
from tests.chaos.exports import export
from tests.chaos.uploads import upload
from tests.factories import PASSWORD

if TYPE_CHECKING:
    from tests.chaos.runner import ChaosRun


def subscribe(run: "ChaosRun", http: httpx.Client, push_service: PushService) -> None:
    """Registers a new browser of the push service for the client's user, as the web chat's Notify me does."""
    accepted(http, "POST", "/api/v1/push-subscriptions", push_service.subscribe().to_json(), status=201)
    run.figures.commands_by_kind["push_subscribe"] += 1


class AccountDriver:
    def __init__(self, run: "ChaosRun", doomed: list[ChaosUser], rng: random.Random):
        self.run = run
        self.doomed = doomed
        self.rng = rng
        self.errors = run.account_errors

    def drive(self) -> None:
        opened, seconds = self.run.deadline - self.run.config.seconds, self.run.config.seconds
        try:
            for number, user in enumerate(self.doomed):
                starts = opened + seconds * number / len(self.doomed)
                time.sleep(max(0.0, starts - time.monotonic()))  # the account's slice of the window, not a wait
                self._live_and_delete(user)
        except Exception as exc:  # noqa: BLE001  (a crashed driver is reported as a violation, not lost)
            self.errors.append(f"account driver crashed: {exc!r}")

    def _live_and_delete(self, user: ChaosUser) -> None:
        deleted = DeletedAccount(user=user)
        with httpx.Client(
            base_url=self.run.web_url, headers={"Authorization": f"Bearer {user.token}"}, timeout=20
        ) as http:
            subscribe(self.run, http, self.run.services.push)
            deleted.conversation_ids += self._open_conversations(http)
            upload(self.run, http, user, self.rng, "account")  # never sent: the account's deletion takes it
            export(self.run, http, user)
            # The last message may still be running: the deletion cancels it.
            self._message(http, "/api/v1/conversation/messages")
            response = request(http, "DELETE", "/api/v1/account", {"password": PASSWORD})
            # 401: an earlier attempt, whose answer a killed web process lost, deleted it (its token is gone).
            if response.status_code not in (202, 401):
                self.errors.append(f"DELETE /api/v1/account answered {response.status_code}: {response.text}")
            self.run.account_deletions.append(deleted)
            self.run.figures.commands_by_kind["account_delete"] += 1
            answer = request(http, "GET", "/api/v1/conversation").status_code
            if answer != 401:
                self.errors.append(f"user {user.id}'s token answered {answer}, not 401, after its account was deleted")

    def _open_conversations(self, http: httpx.Client) -> list[str]:
        """Main Chat and a Task, each with a settled exchange (so the provider holds the agent and two sessions)."""
        settled_submission(http, self._message(http, "/api/v1/conversation/messages")["submissionId"])
        main_chat = request(http, "GET", "/api/v1/conversation").json()["conversationId"]
        task = self._message(http, "/api/v1/tasks")
        settled_submission(http, task["submissionId"])
        return [main_chat, task["conversationId"]]

    def _message(self, http: httpx.Client, path: str) -> dict:
        body = {"clientMessageId": str(uuid.uuid4()), "text": f"doomed {self.rng.randint(0, 10**6)}"}
        receipt = accepted(http, "POST", path, body)
        self.run.figures.commands_by_kind["message"] += 1
        return receipt
