"""Remote agents against the double: intents, lookups after lost answers; session rotation rules."""

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.utils import timezone

from devtools.stack import wait_until
from rebyte import agents, reconciler, services
from rebyte.models import CreationIntent, IntentKind, IntentState, RemoteSession, SavedAgent, SessionState
from rebyte.sessions import usable_session
from runtime.services.commands import ensure_main_conversation
from tests.factories import CreationIntentFactory, RemoteSessionFactory, TaskConversationFactory

pytestmark = pytest.mark.django_db

# The SDK tries an idempotent read this many times (its own retries) before the lookup counts as failed.
LOOKUP_ATTEMPTS = 3


@pytest.fixture
def gateway(rebyte_double, settings):
    settings.IMPO_REBYTE_LISTING_GRACE_SECONDS = 0.5
    with rebyte_double.gateway() as gateway:
        yield gateway


def leave_the_agent_intent_pending(user, gateway, rebyte_double) -> None:
    """A create whose answer was lost, and whose lookup failed too: nobody knows if the agent exists."""
    rebyte_double.fault("create_agent", "drop_response")
    rebyte_double.fault("list_agents", "http_error", status=503, times=LOOKUP_ATTEMPTS)
    with pytest.raises(services.CreationPending):
        agents.ensure_saved_agent(user, gateway, instructions="")


def test_the_intent_is_committed_before_the_remote_agent_exists_and_names_it(user, gateway, rebyte_double):
    agents.ensure_saved_agent(user, gateway, instructions="")

    intent = CreationIntent.objects.get()
    assert (intent.kind, intent.state) == (IntentKind.AGENT, IntentState.CREATED)
    (agent,) = rebyte_double.state()["agents"]
    assert agent["metadata"] == {"impo_intent": str(intent.id), "impo_owner": str(user.id)}
    assert agent["model"] == "rebyte-echo"
    assert SavedAgent.objects.get(owner=user).remote_id == agent["id"]


def test_a_lost_agent_create_answer_is_settled_by_lookup_with_one_remote_agent(user, gateway, rebyte_double):
    rebyte_double.fault("create_agent", "drop_response")

    agents.ensure_saved_agent(user, gateway, instructions="")

    assert rebyte_double.state()["counts"]["agents"] == 1
    assert SavedAgent.objects.get().remote_id == rebyte_double.state()["agents"][0]["id"]


def test_an_ambiguous_create_whose_lookup_fails_stays_pending_reconciliation(user, gateway, rebyte_double):
    rebyte_double.fault("create_agent", "drop_response")
    rebyte_double.fault("list_agents", "http_error", status=503, times=LOOKUP_ATTEMPTS)

    with pytest.raises(services.CreationPending):
        agents.ensure_saved_agent(user, gateway, instructions="")

    intent = CreationIntent.objects.get()
    assert intent.state == IntentState.PENDING_RECONCILIATION
    assert "lookup failed" in intent.last_error


def test_the_reconciler_adopts_the_agent_that_the_lost_answer_created(user, gateway, rebyte_double):
    leave_the_agent_intent_pending(user, gateway, rebyte_double)

    assert reconciler.reconcile_open_intents(gateway) == 1

    assert rebyte_double.state()["counts"]["agents"] == 1
    assert SavedAgent.objects.get().remote_id == rebyte_double.state()["agents"][0]["id"]


def test_an_agent_in_doubt_is_replaced_deliberately_and_the_one_found_later_is_recorded_unused(
    user, gateway, rebyte_double
):
    leave_the_agent_intent_pending(user, gateway, rebyte_double)
    doubtful = CreationIntent.objects.get()

    agent = agents.ensure_saved_agent(user, gateway, instructions="")

    assert agent.intent_id != doubtful.id
    assert reconciler.reconcile_open_intents(gateway) == 1
    doubtful.refresh_from_db()
    lost_answer_agent = next(a["id"] for a in rebyte_double.state()["agents"] if a["id"] != agent.remote_id)
    assert (doubtful.state, doubtful.remote_id) == (IntentState.CREATED, lost_answer_agent)
    assert list(SavedAgent.objects.all()) == [agent]
    # Looked up only: nothing was created for it again.
    assert rebyte_double.state()["counts"]["agents"] == 2


def test_two_remote_agents_carrying_the_intent_are_never_guessed_between(user, gateway, rebyte_double):
    leave_the_agent_intent_pending(user, gateway, rebyte_double)
    intent = CreationIntent.objects.get()
    gateway.create_agent(model="rebyte-echo", name="twin", instructions="", metadata=intent.metadata)

    reconciler.reconcile_open_intents(gateway)

    intent.refresh_from_db()
    assert intent.state == IntentState.PENDING_RECONCILIATION
    assert "2 remote agents carry this intent" in intent.last_error
    assert not SavedAgent.objects.exists()


def test_nothing_found_twice_after_the_grace_period_allows_one_new_create(user, gateway, rebyte_double):
    # A worker counted its create attempt and died before the request left: the outcome is unknown to us.
    CreationIntentFactory(owner=user, kind=IntentKind.AGENT, state=IntentState.PENDING_RECONCILIATION, attempts=1)

    # Nobody sleeps through the grace period: the first empty listing is recorded, and a pass after it looks again.
    assert reconciler.reconcile_open_intents(gateway) == 0
    wait_until(lambda: reconciler.reconcile_open_intents(gateway), timeout=30, what="the second look to settle it")

    assert rebyte_double.state()["counts"]["agents"] == 1
    assert rebyte_double.state()["requests"]["list_agents"] == 2  # a listing, the grace period, a second listing


# --- rotation -----------------------------------------------------------------------------------------


@pytest.fixture
def session(user, gateway):
    agent = agents.ensure_saved_agent(user, gateway, instructions="")
    conversation = ensure_main_conversation(user)
    return RemoteSessionFactory(
        conversation=conversation,
        saved_agent=agent,
        remote_id="sess_x",
        tools_fingerprint="tools-a",
        context_estimate=100,
    )


def spend(session: RemoteSession, *, turns: int = 0, tokens: int | None = 100, idle: timedelta = timedelta(0)):
    RemoteSession.objects.filter(id=session.id).update(
        turn_count=turns, context_estimate=tokens, last_activity_at=timezone.now() - idle
    )
    session.refresh_from_db()


@pytest.mark.parametrize(
    ("spent", "reason"),
    [
        ({"turns": 8}, "turns"),
        ({"idle": timedelta(hours=6)}, "idle"),
        ({"tokens": 12_000}, "context"),
        ({"tokens": None}, "context"),
    ],
)
def test_main_chat_rotates_its_session_at_each_limit(session, spent, reason):
    spend(session, **spent)

    assert usable_session(session.conversation, fingerprint="tools-a", instructions="", now=timezone.now()) == (
        None,
        True,
    )

    session.refresh_from_db()
    assert (session.state, session.rotation_reason) == (SessionState.HISTORICAL, reason)


def test_a_session_under_every_limit_is_kept(session):
    spend(session, turns=7, tokens=11_999, idle=timedelta(hours=5, minutes=59))

    assert usable_session(session.conversation, fingerprint="tools-a", instructions="", now=timezone.now()) == (
        session,
        True,
    )


def test_another_tool_catalogue_needs_another_session_even_for_a_task(session, user):
    task = TaskConversationFactory(owner=user)
    RemoteSession.objects.filter(id=session.id).update(conversation=task, turn_count=50)

    assert usable_session(task, fingerprint="tools-a", instructions="", now=timezone.now()) == (session, True)
    assert usable_session(task, fingerprint="tools-b", instructions="", now=timezone.now()) == (None, True)
    session.refresh_from_db()
    assert session.rotation_reason == "tools"


# --- staff ---------------------------------------------------------------------------------------------


def test_staff_can_fail_a_pending_intent_and_the_decision_is_logged(user, gateway, rebyte_double, staff, desk):
    leave_the_agent_intent_pending(user, gateway, rebyte_double)
    intent = CreationIntent.objects.get()
    response = desk.post(
        "/admin/rebyte/creationintent/", {"action": "mark_failed", "_selected_action": [str(intent.id)]}
    )

    assert response.status_code == 302
    intent.refresh_from_db()
    assert intent.state == IntentState.FAILED
    assert intent.resolved_by == staff
    assert LogEntry.objects.filter(user=staff, object_id=str(intent.id), change_message="marked failed").exists()
