"""The double's deletes, judged by the official `openai` SDK with strict response validation (`sessions.delete`,
`agents.delete`): a confirmation object, 404 afterwards, a running turn refused until cancelled, and the faults a
deletion intent must survive (a 5xx that deleted nothing, an answer lost after the deletion happened)."""

import openai
import pytest
from openai.types.beta import AgentDeleted, AgentSessionDeleted

from tests.rebyte.double_sessions import new_session, settled_turns


def test_deleting_a_settled_session_confirms_it_and_it_is_not_found_afterwards(sdk):
    session = new_session(sdk, "hello")
    [turn] = settled_turns(sdk, session.id)

    deleted = sdk.beta.agents.sessions.delete(session.id)

    assert isinstance(deleted, AgentSessionDeleted)
    assert (deleted.id, deleted.deleted, deleted.object) == (session.id, True, "agent.session.deleted")
    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.sessions.retrieve(session.id)
    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.sessions.delete(session.id)  # a second delete is told it is gone, not confirmed again
    assert session.id not in [listed.id for listed in sdk.beta.agents.sessions.list(limit=100)]


def test_a_session_with_a_running_turn_is_refused_until_the_turn_is_cancelled(sdk):
    session = new_session(sdk, "/slow a long, slow reply")

    with pytest.raises(openai.ConflictError):
        sdk.beta.agents.sessions.delete(session.id)
    sdk.beta.agents.sessions.retrieve(session.id)  # still there

    sdk.beta.agents.sessions.events.create(
        session.id, events=[{"type": "agent.session.input.cancel"}], idempotency_key="cancel-before-delete"
    )
    settled_turns(sdk, session.id)
    assert sdk.beta.agents.sessions.delete(session.id).deleted is True


def test_an_agent_is_deleted_once_its_sessions_are(sdk):
    session = new_session(sdk, "hello")
    settled_turns(sdk, session.id)
    agent_id = session.agent.id

    with pytest.raises(openai.ConflictError):
        sdk.beta.agents.delete(agent_id)
    sdk.beta.agents.sessions.delete(session.id)
    deleted = sdk.beta.agents.delete(agent_id)

    assert isinstance(deleted, AgentDeleted)
    assert (deleted.id, deleted.deleted, deleted.object) == (agent_id, True, "agent.deleted")
    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.retrieve(agent_id)
    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.delete(agent_id)


def test_a_5xx_on_delete_deletes_nothing(rebyte_double, sdk):
    session = new_session(sdk, "hello")
    settled_turns(sdk, session.id)
    rebyte_double.fault("delete_session", "http_error", status=503)

    with pytest.raises(openai.InternalServerError):
        sdk.beta.agents.sessions.delete(session.id)

    assert sdk.beta.agents.sessions.retrieve(session.id).id == session.id


def test_a_delete_whose_answer_is_lost_happened_and_reading_proves_it(rebyte_double, sdk):
    session = new_session(sdk, "hello")
    settled_turns(sdk, session.id)
    rebyte_double.fault("delete_session", "drop_response")

    with pytest.raises(openai.APIConnectionError):
        sdk.beta.agents.sessions.delete(session.id)

    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.sessions.retrieve(session.id)
    assert rebyte_double.state()["requests"]["delete_session"] == 1
