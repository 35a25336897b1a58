"""A run parked `pending_reconciliation` does not hold its conversation (docs/design.md §1.4, §5): the next message goes
to a new session at once, the owner's cancel ends the parked run for the owner, and staff still settle its intent."""

import time

import pytest
from django.test import Client

from devtools.stack import wait_until
from rebyte.models import CreationIntent, IntentKind, IntentState, RemoteSession, SessionState
from runtime.models import Event, EventType, MessagePolicy, RunState
from tests.client import post_message, run_in_state
from tests.factories import UserFactory

pytestmark = pytest.mark.slow

CARRY = "Earlier in this conversation (context, not a new request):\n"
LISTING_OUTAGE_SECONDS = 30


@pytest.fixture
def parked(stack, api, rebyte_double):
    """A Main Chat with one completed turn whose next message is parked: its new session's create lost its answer
    and the provider's session listing fails for a while, so nothing can tell meanwhile whether the session exists."""
    stack.env["IMPO_SESSION_MAX_TURNS"] = "1"  # every message after the first needs a new session
    stack.start_worker("one")
    stack.start_worker("two")
    stack.start_sweeper()
    run_in_state(post_message(api, "first question", client_message_id="m-1")["submissionId"])
    rebyte_double.fault("create_session", "drop_response")
    rebyte_double.fault("list_sessions", "http_error", status=503, seconds=LISTING_OUTAGE_SECONDS)
    return run_in_state(
        post_message(api, "the doubtful one", client_message_id="m-2")["submissionId"], RunState.PENDING_RECONCILIATION
    )


def test_the_next_message_after_a_parked_run_completes_at_once_in_a_new_session_with_the_carry(
    parked, api, rebyte_double
):
    started = time.monotonic()
    run = run_in_state(post_message(api, "the next one", client_message_id="m-3")["submissionId"], timeout=30)
    print(f"\nnext message after a parked run completed in {time.monotonic() - started:.2f} s")

    assert run.submission.assistant_message.text == "Echo: the next one"
    parked.refresh_from_db()
    assert parked.state == RunState.PENDING_RECONCILIATION  # it did not wait for the doubt to be settled
    current = RemoteSession.objects.get(conversation=run.submission.conversation, state=SessionState.CURRENT)
    assert current.intent.run_id == run.id  # created deliberately, under an intent of its own
    state = rebyte_double.state()
    (session,) = [s for s in state["sessions"] if s["id"] == current.remote_id]
    first = next(item for item in session["items"] if item.get("role") == "user")
    carry, text = (part["text"] for part in first["content"])
    assert carry == f"{CARRY}User: first question\nAssistant: Echo: first question"
    assert text == "the next one"
    # The doubtful input went out once, with the lost create, and never again.
    creates = [r for r in rebyte_double.requests() if r["op"] == "create_session"]
    doubtful = [r for r in creates if "the doubtful one" in str(r["body"]["input"])]
    assert len(doubtful) == 1
    assert state["steering"] == []


def test_the_owners_cancel_ends_a_parked_run_and_staff_still_settle_its_intent(parked, api, rebyte_double):
    response = api.post(f"/api/v1/submissions/{parked.submission_id}/cancel", {}, format="json")

    assert response.status_code == 200
    assert response.json()["status"] == RunState.CANCELLED
    parked.refresh_from_db()
    assert parked.state == RunState.CANCELLED
    assert api.get("/api/v1/conversation").json()["activeSubmissions"] == []
    intent = CreationIntent.objects.get(run=parked, kind=IntentKind.SESSION)
    assert intent.state == IntentState.PENDING_RECONCILIATION
    desk = Client()
    desk.force_login(UserFactory(is_staff=True, is_superuser=True))
    assert str(intent.id) in desk.get("/admin/rebyte/creationintent/?open=pending").content.decode()

    # Once the provider lists again, a re-check finds the session the lost answer created and records it.
    wait_until(
        lambda: (
            desk.post(f"/admin/rebyte/creationintent/{intent.id}/desk/recheck/")
            and CreationIntent.objects.get(id=intent.id).state == IntentState.CREATED
        ),
        timeout=LISTING_OUTAGE_SECONDS + 60,
        interval=2,
        what="the re-check to find the session",
    )
    found = RemoteSession.objects.get(intent=intent)
    assert (found.state, found.rotation_reason) == (SessionState.HISTORICAL, "abandoned")
    # Recorded, never projected into the chat: the cancelled reply stays empty.
    parked.refresh_from_db()
    assert parked.state == RunState.CANCELLED
    assert parked.submission.assistant_message.text == ""
    assert not Event.objects.filter(submission_id=parked.submission_id, type=EventType.TEXT_DELTA).exists()


def test_a_message_sent_with_reject_is_not_refused_because_of_a_parked_run(parked, api):
    # The parked run holds nothing: there is no reply running to refuse the message for.
    run = run_in_state(
        post_message(api, "meanwhile", client_message_id="m-3", messagePolicy=MessagePolicy.REJECT)["submissionId"],
        timeout=30,
    )

    assert run.submission.assistant_message.text == "Echo: meanwhile"
    parked.refresh_from_db()
    assert parked.state == RunState.PENDING_RECONCILIATION
