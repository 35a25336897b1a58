"""The chaos run's checks of what an owner sets for every later turn (devtools/standing_invariants.py) find what they
are for: a turn admitted after an instructions change was acknowledged that ran under instructions the change
replaced; a call asked although its owner always allowed the tool, or not asked though never allowed. No process: the
rows are made through the API, services and factories, the double's state written as the double keeps it."""

import pytest

from devtools.records import ChaosUser, Command, InstructionsChange, PermissionChange
from devtools.standing_invariants import (
    always_allowed_at,
    check_instructions,
    check_permissions,
    instructions_a_turn_may_have,
)
from rebyte.instructions import agent_instructions
from rebyte.models import IntentState, SavedAgent
from runtime.models import Run
from tests.chaos.test_decision_invariants import a_reply, chaos_of
from tests.factories import CreationIntentFactory, RemoteSessionFactory, RemoteTurnFactory
from tests.tools.test_tool_approval import parked_call
from tools.models import ToolApproval

USER = ChaosUser(id=1, token="")


def change(text: str, sent_at: float, acknowledged_at: float | None) -> InstructionsChange:
    return InstructionsChange(USER, text, sent_at, acknowledged_at)


def test_nothing_is_known_of_a_turn_admitted_before_any_change_was_acknowledged():
    assert instructions_a_turn_may_have([change("a", 10, 12)], admitted_at=11) is None


def test_a_change_acknowledged_before_the_admission_replaces_the_ones_before_it():
    changes = [change("a", 1, 2), change("b", 3, 4)]

    assert instructions_a_turn_may_have(changes, admitted_at=5) == {"b"}
    assert instructions_a_turn_may_have(changes, admitted_at=3.5) == {"a", "b"}  # b sent, not yet acknowledged


def test_changes_sent_at_once_may_land_in_either_order():
    changes = [change("a", 1, 4), change("b", 2, 3)]

    assert instructions_a_turn_may_have(changes, admitted_at=5) == {"a", "b"}


@pytest.mark.django_db
def test_a_turn_under_instructions_a_change_replaced_is_a_violation(api, user):
    submission = a_reply(api)
    admitted = submission.created_at.timestamp()
    intent = CreationIntentFactory(owner=user, state=IntentState.CREATED, remote_id="agent_1")
    agent = SavedAgent.objects.create(owner=user, remote_id="agent_1", intent=intent)
    session = RemoteSessionFactory(conversation=submission.conversation, saved_agent=agent)
    RemoteTurnFactory(run=Run.objects.get(submission=submission), session=session)
    chaos = chaos_of(user, submission.conversation_id, [Command("m-1", "hi", str(submission.id))])
    owner = ChaosUser(id=user.id, token="")
    changes = [InstructionsChange(owner, "old", admitted - 9, admitted - 8)]
    changes.append(InstructionsChange(owner, "new", admitted - 7, admitted - 6))

    def ran_under(text: str) -> list[str]:
        words = agent_instructions(text)
        state = {
            "sessions": [
                {
                    "id": session.remote_id,
                    "agent": {"id": "agent_1", "instructions": f"{words}\n\n## Session context\n{{}}"},
                }
            ],
            "agents": [{"id": "agent_1", "instructions": words}],
        }
        return check_instructions(chaos, changes, state)

    assert ran_under("new") == []
    assert len(ran_under("old")) == 1
    assert len(ran_under("")) == 1


def permission(kind: str, sent_at: float, acknowledged_at: float | None) -> PermissionChange:
    return PermissionChange(USER, kind, sent_at, acknowledged_at)


def test_a_call_is_asked_until_a_grant_is_acknowledged_and_again_once_a_revocation_is():
    grant, revocation = permission("grant", 2, 3), permission("revoke", 6, 7)

    assert always_allowed_at([], recorded_at=1) is False
    assert always_allowed_at([grant, revocation], recorded_at=2.5) is None  # the grant in flight
    assert always_allowed_at([grant, revocation], recorded_at=4) is True
    assert always_allowed_at([grant, revocation], recorded_at=5.5) is None  # the revocation sent just after the read
    assert always_allowed_at([grant, revocation], recorded_at=8) is False


@pytest.mark.django_db
def test_a_call_asked_against_its_owners_permission_is_a_violation(api, user, settings):
    settings.IMPO_TOOL_APPROVAL = {"save_note": "always"}
    call = parked_call(api)
    chaos = chaos_of(user, call.run.submission.conversation_id, [Command("m-1", "note", str(call.run.submission_id))])
    recorded = call.created_at.timestamp()
    granted = [PermissionChange(ChaosUser(id=user.id, token=""), "grant", recorded - 5, recorded - 4)]

    assert check_permissions(chaos, [], "save_note") == []
    assert check_permissions(chaos, granted, "save_note") == [
        f"save_note call {call.id} (run {call.run_id}): asked although its owner always allowed it"
    ]
    ToolApproval.objects.filter(tool_call=call).delete()
    assert check_permissions(chaos, [], "save_note") == [
        f"save_note call {call.id} (run {call.run_id}): not asked, never allowed"
    ]
    assert check_permissions(chaos, granted, "save_note") == []
