"""Remote agents and sessions against the double: intents, lookups after lost answers, rotation."""

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.utils import timezone

from rebyte import services
from rebyte.models import CreationIntent, IntentState, RemoteSession, SavedAgent, SessionState
from runtime.models import Conversation, ConversationKind
from runtime.services import ensure_main_conversation
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# The client tries an idempotent read this many times before reporting the lookup as failed.
LOOKUP_ATTEMPTS = 3


@pytest.fixture
def client(rebyte_double):
    with rebyte_double.client() as client:
        yield client


@pytest.fixture
def main_chat(user):
    return ensure_main_conversation(user)


def spend(session: RemoteSession, *, turns: int = 0, tokens: int = 0, idle: timedelta = timedelta(0)):
    RemoteSession.objects.filter(id=session.id).update(
        turn_count=turns, context_estimate=tokens, last_activity_at=timezone.now() - idle
    )


def test_the_intent_is_committed_before_the_remote_agent_exists(main_chat, client, rebyte_double):
    services.ensure_current_session(main_chat, client, now=timezone.now())

    intents = CreationIntent.objects.order_by("created_at")
    assert [(intent.kind, intent.state) for intent in intents] == [("agent", "created"), ("session", "created")]
    [agent] = rebyte_double.state()["agents"]
    assert agent["metadata"]["impo_intent"] == str(intents[0].id)
    assert agent["idempotency_key"] == intents[0].idempotency_key


def test_a_lost_agent_create_answer_is_settled_by_lookup_with_one_remote_agent(main_chat, client, rebyte_double):
    rebyte_double.fault("create_agent", "drop_response")

    services.ensure_current_session(main_chat, client, now=timezone.now())

    assert rebyte_double.state()["counts"]["agents"] == 1
    assert SavedAgent.objects.get().remote_id == rebyte_double.state()["agents"][0]["id"]


def test_an_ambiguous_create_whose_lookup_fails_stays_pending_reconciliation(main_chat, client, rebyte_double):
    rebyte_double.fault("create_session", "drop_response")
    rebyte_double.fault("list_sessions", "http_error", status=503, times=LOOKUP_ATTEMPTS)

    with pytest.raises(services.RemoteCreationPending):
        services.ensure_current_session(main_chat, client, now=timezone.now())

    intent = CreationIntent.objects.get(kind="session")
    assert intent.state == IntentState.PENDING_RECONCILIATION
    assert "lookup failed" in intent.last_error


def test_the_reconciler_adopts_the_session_that_the_lost_answer_created(main_chat, client, rebyte_double):
    rebyte_double.fault("create_session", "drop_response")
    rebyte_double.fault("list_sessions", "http_error", status=503, times=LOOKUP_ATTEMPTS)
    with pytest.raises(services.RemoteCreationPending):
        services.ensure_current_session(main_chat, client, now=timezone.now())

    assert services.reconcile_open_intents(client) == 1

    assert rebyte_double.state()["counts"]["sessions"] == 1
    session = RemoteSession.objects.get()
    assert session.remote_id == rebyte_double.state()["sessions"][0]["id"]
    assert CreationIntent.objects.get(kind="session").state == IntentState.CREATED


@pytest.mark.parametrize(
    ("spent", "reason"),
    [
        ({"turns": 8}, "turns"),
        ({"idle": timedelta(hours=6)}, "idle"),
        ({"tokens": 32_000}, "context"),
    ],
)
def test_main_chat_rotates_its_session_at_each_limit(main_chat, client, rebyte_double, spent, reason):
    first = services.ensure_current_session(main_chat, client, now=timezone.now())
    spend(first, **spent)

    second = services.ensure_current_session(main_chat, client, now=timezone.now())

    assert second.id != first.id
    first.refresh_from_db()
    assert (first.state, first.rotation_reason) == (SessionState.HISTORICAL, reason)
    assert second.state == SessionState.CURRENT
    assert rebyte_double.state()["counts"]["sessions"] == 2
    assert rebyte_double.state()["counts"]["agents"] == 1


def test_a_session_under_every_limit_is_kept(main_chat, client):
    first = services.ensure_current_session(main_chat, client, now=timezone.now())
    spend(first, turns=7, tokens=31_999, idle=timedelta(hours=5, minutes=59))

    assert services.ensure_current_session(main_chat, client, now=timezone.now()).id == first.id


def test_a_task_gets_its_own_session_and_shares_the_owners_agent(main_chat, client, user, rebyte_double):
    task_conversation = Conversation.objects.create(owner=user, kind=ConversationKind.TASK, title="t")

    main_session = services.ensure_current_session(main_chat, client, now=timezone.now())
    task_session = services.ensure_current_session(task_conversation, client, now=timezone.now())

    assert main_session.remote_id != task_session.remote_id
    assert main_session.saved_agent_id == task_session.saved_agent_id


@pytest.fixture
def staff_client():
    staff = UserFactory(is_staff=True, is_superuser=True)
    browser = Client()
    browser.force_login(staff)
    return browser, staff


def test_staff_can_fail_a_pending_intent_and_the_decision_is_logged(main_chat, client, rebyte_double, staff_client):
    rebyte_double.fault("create_session", "drop_response")
    rebyte_double.fault("list_sessions", "http_error", status=503, times=LOOKUP_ATTEMPTS)
    with pytest.raises(services.RemoteCreationPending):
        services.ensure_current_session(main_chat, client, now=timezone.now())
    intent = CreationIntent.objects.get(kind="session")
    browser, staff = staff_client

    response = browser.post(
        "/admin/rebyte/creationintent/",
        {"action": "mark_failed", "_selected_action": [str(intent.id)]},
    )

    assert response.status_code == 302
    intent.refresh_from_db()
    assert intent.state == IntentState.FAILED
    assert intent.resolved_by == staff
    assert LogEntry.objects.filter(user=staff, object_id=str(intent.id), change_message="marked failed").exists()
