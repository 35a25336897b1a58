"""The chaos run's checks of what a person decides (devtools/decision_invariants.py) find what they are for: a rating
other than the last acknowledged, an approval decided otherwise than its capability said or by two capabilities, and
edited-over words in a session opened after the edit. No process: the rows are made through the API and services."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from rest_framework.test import APIClient

from devtools.decision_invariants import check_capability_answers, check_edited_words_never_carried, check_ratings
from devtools.records import CapabilityAnswer, ChaosUser, Command, ConversationRecord, Rating
from rebyte.models import IntentState, SavedAgent
from runtime.models import Submission
from tests.factories import CreationIntentFactory, RemoteSessionFactory
from tests.tools.test_tool_approval import parked_call
from tools.capabilities import mint_for_call
from tools.models import ApprovalCapability

pytestmark = [pytest.mark.django_db]


def chaos_of(user, conversation_id, commands=()) -> SimpleNamespace:
    record = ConversationRecord(index=0, user=ChaosUser(id=user.id, token=""), kind="main_chat")
    record.conversation_id, record.commands = str(conversation_id), list(commands)
    return SimpleNamespace(users=[record.user], records=[record])


def a_reply(api) -> Submission:
    receipt = api.post("/api/v1/conversation/messages", {"clientMessageId": "m-1", "text": "hi"}, format="json")
    return Submission.objects.get(id=receipt.json()["submissionId"])


def test_a_stored_rating_other_than_the_last_acknowledged_is_a_violation(api, user):
    submission = a_reply(api)
    reply_id = str(submission.assistant_message_id)
    assert api.put(f"/api/v1/messages/{reply_id}/feedback", {"rating": "up"}, format="json").status_code == 200
    chaos = chaos_of(user, submission.conversation_id)

    def rated(rating):
        return check_ratings(chaos, [Rating(chaos.users[0], reply_id, str(submission.conversation_id), rating)])

    assert rated("up") == []
    assert rated("down") == [f"reply {reply_id}: rated 'up', the last acknowledged 'down'"]
    assert len(rated(None)) == 1


def test_an_approval_decided_otherwise_or_by_two_capabilities_is_a_violation(api, user, settings):
    settings.IMPO_TOOL_APPROVAL = {"save_note": "always"}
    call = parked_call(api)
    tokens = mint_for_call(call.id)
    body = {"approvalId": str(call.id), "decision": "approve", "capability": tokens["approve"]}
    assert APIClient().post("/api/v1/approvals/decide", body, format="json").status_code == 200
    chaos = chaos_of(user, call.run.submission.conversation_id)

    def answered(decision):
        answer = CapabilityAnswer(chaos.users[0], str(call.id), chaos.records[0].conversation_id, decision, True)
        return check_capability_answers(chaos, [answer])

    assert answered("approve") == []
    assert len(answered("deny")) == 1
    ApprovalCapability.objects.filter(decision="deny").update(used_at=call.created_at)
    assert f"approval {call.id}: 2 capabilities used" in answered("approve")


def test_edited_over_words_in_a_session_opened_after_the_edit_are_a_violation(api, user):
    edit = a_reply(api)  # stands for the edit's own submission: only its admission time is read
    intent = CreationIntentFactory(owner=user, state=IntentState.CREATED, remote_id="agent_1")
    agent = SavedAgent.objects.create(owner=user, remote_id="agent_1", intent=intent)
    session = RemoteSessionFactory(conversation=edit.conversation, saved_agent=agent)
    command = Command("e-1", "new words", str(edit.id), edits="m", edited_text="old words")
    chaos = chaos_of(user, edit.conversation_id, [command])

    def carried(text, *, opened_after=True):
        session.created_at = edit.created_at + timedelta(seconds=1 if opened_after else -1)
        session.save(update_fields=["created_at"])
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        return check_edited_words_never_carried(chaos, {"sessions": [{"id": session.remote_id, "items": [item]}]})

    assert carried("User: earlier\nAssistant: Echo: earlier\n\nnew words") == []
    assert carried("User: old words\nAssistant: Echo: old words\n\nnew words", opened_after=False) == []
    assert len(carried("User: old words\nAssistant: Echo: old words\n\nnew words")) == 1
