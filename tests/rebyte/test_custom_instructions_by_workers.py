"""The owner's standing instructions reach the provider through a real worker and the double: as the instructions of
a new agent (and of its sessions) from the next turn after a change, never the turn under way; the agent they
replace is deleted at the provider once nothing uses it; a change that commits while a turn is starting sends that
turn to the new agent (docs/design.md §3 "Custom instructions")."""

import json
import threading

from django.db import connection, transaction
from django.utils import timezone

from devtools.stack import wait_until
from rebyte import locks
from rebyte.instructions import AGENT_INSTRUCTIONS
from rebyte.models import AgentGoneReason, OwnerInstructions, RemoteSession, SavedAgent, SessionState
from runtime.models import RunState
from tests.client import finished_run, post_message, streamed_text
from tests.concurrency import all_at_once, waiting_for_a_lock
from tests.conftest import bearer_client

URL = "/api/v1/account/instructions"
PIRATE = 'Answer like a pirate, and "quote" nothing.'


def replied(api, text, client_message_id):
    run = finished_run(post_message(api, text, client_message_id=client_message_id)["submissionId"])
    assert run.state == RunState.COMPLETED
    return run


def creates(rebyte_double, path):
    return [r["body"] for r in rebyte_double.requests() if r["method"] == "POST" and r["path"] == path]


def carried(instructions: str, text: str) -> bool:
    return "## The user's standing instructions\n" in instructions and json.dumps(text) in instructions


def deletes(rebyte_double) -> list[str]:
    return [r["path"] for r in rebyte_double.requests() if r["method"] == "DELETE"]


def test_the_next_message_after_a_change_runs_on_a_new_agent_and_session_carrying_it(workers, api, rebyte_double):
    replied(api, "hello", "m-1")
    [first_agent] = creates(rebyte_double, "/v1/agents")
    assert first_agent["instructions"] == AGENT_INSTRUCTIONS

    assert api.put(URL, {"text": PIRATE}, format="json").status_code == 200
    replied(api, "again", "m-2")

    agents, sessions = creates(rebyte_double, "/v1/agents"), creates(rebyte_double, "/v1/agents/sessions")
    assert len(agents) == 2 and carried(agents[1]["instructions"], PIRATE)
    assert len(sessions) == 2 and carried(sessions[1]["agent"]["instructions"], PIRATE)
    assert not carried(sessions[0]["agent"]["instructions"], PIRATE)
    old, new = SavedAgent.objects.order_by("created_at")
    assert (old.gone_reason, new.gone_at) == (AgentGoneReason.INSTRUCTIONS, None)
    assert sessions[1]["agent_id"] == new.remote_id
    # The new session starts with the conversation so far, as any rotated one does.
    assert "User: hello" in json.dumps(sessions[1]["input"])
    old_session = RemoteSession.objects.get(saved_agent=old)
    assert (old_session.state, old_session.rotation_reason) == (SessionState.HISTORICAL, "instructions")
    # Nothing uses the old agent any more: its session, then itself, are deleted at the provider.
    agent_deleted = f"/v1/agents/{old.remote_id}"
    wait_until(lambda: agent_deleted in deletes(rebyte_double), timeout=90, what="the old agent's delete")
    deleted = deletes(rebyte_double)
    assert deleted.index(f"/v1/agents/sessions/{old_session.remote_id}") < deleted.index(agent_deleted)
    assert [agent["id"] for agent in rebyte_double.state()["agents"]] == [new.remote_id]


def test_the_same_instructions_again_keep_the_agent_and_the_session(workers, api, rebyte_double):
    api.put(URL, {"text": PIRATE}, format="json")
    replied(api, "hello", "m-1")

    api.put(URL, {"text": f"  {PIRATE}  "}, format="json")
    replied(api, "again", "m-2")

    assert len(creates(rebyte_double, "/v1/agents")) == 1
    assert len(creates(rebyte_double, "/v1/agents/sessions")) == 1


def test_a_change_while_a_reply_streams_leaves_that_reply_on_its_own_session(workers, api, rebyte_double):
    rebyte_double.configure(delta_delay_ms=50, delta_chunks=4)
    receipt = post_message(api, "/slow a long answer", client_message_id="m-1")
    # Its turn started: the reply is streaming.
    wait_until(lambda: streamed_text(receipt["submissionId"]), timeout=30, what="the reply to start streaming")

    assert api.put(URL, {"text": PIRATE}, format="json").status_code == 200

    run = finished_run(receipt["submissionId"])
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text == "Echo: a long answer"
    assert len(creates(rebyte_double, "/v1/agents")) == 1  # no new agent for the turn under way
    assert len(creates(rebyte_double, "/v1/agents/sessions")) == 1
    assert SavedAgent.objects.get().gone_at is None  # nor the old one retired under it
    replied(api, "next", "m-2")
    agents = creates(rebyte_double, "/v1/agents")
    assert len(agents) == 2 and carried(agents[1]["instructions"], PIRATE)


def test_a_change_committed_while_a_turn_is_starting_sends_that_turn_to_the_new_agent(
    workers, api, user, rebyte_double
):
    replied(api, "hello", "m-1")
    held, release = threading.Event(), threading.Event()

    def change_held_open():
        try:
            with transaction.atomic():
                locks.lock_owner_instructions(user.pk)
                OwnerInstructions.objects.create(owner=user, text=PIRATE, updated_at=timezone.now())
                held.set()
                release.wait(60)
        finally:
            connection.close()

    changer = threading.Thread(target=change_held_open)
    changer.start()
    try:
        assert held.wait(30)
        receipt = post_message(api, "again", client_message_id="m-2")
        # The worker chose the old session at its claim (the change is not committed): its turn waits to start.
        wait_until(lambda: waiting_for_a_lock("%pg_advisory_xact_lock_shared%"), timeout=30, what="the turn to wait")
    finally:
        release.set()
        changer.join()

    assert finished_run(receipt["submissionId"]).state == RunState.COMPLETED
    sessions = creates(rebyte_double, "/v1/agents/sessions")
    assert len(sessions) == 2 and carried(sessions[1]["agent"]["instructions"], PIRATE)
    inputs = [r for r in rebyte_double.requests() if r["path"].endswith("/events") and r["method"] == "POST"]
    assert inputs == []  # nothing went to the old session
    assert SavedAgent.objects.filter(gone_at__isnull=True).count() == 1


def test_changes_racing_each_other_leave_one_current_agent_with_the_last_committed(workers, user, rebyte_double):
    api = bearer_client(user)
    replied(api, "hello", "m-1")
    clients = [bearer_client(user) for _ in range(4)]

    answers = all_at_once(4, lambda i: clients[i].put(URL, {"text": f"take {i}"}, format="json").status_code)
    replied(api, "again", "m-2")

    assert answers == [200] * 4
    final = OwnerInstructions.objects.get(owner=user).text
    [current] = SavedAgent.objects.filter(gone_at__isnull=True)
    assert current.owner_instructions == final
    assert carried(creates(rebyte_double, "/v1/agents/sessions")[-1]["agent"]["instructions"], final)
