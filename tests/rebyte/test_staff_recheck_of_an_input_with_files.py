"""A session intent whose input names a message's files (docs/provider.md "Attachments"): staff's re-check, which has
no run driver to read them, only looks; the sweeper's pass, given the driver's `input_content`, creates it."""

import pytest

from rebyte import agents, reconciler
from rebyte.models import IntentKind, IntentState
from runtime.services.commands import ensure_main_conversation
from tests.factories import CreationIntentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway(rebyte_double, settings):
    settings.IMPO_REBYTE_LISTING_GRACE_SECONDS = 0
    with rebyte_double.gateway() as gateway:
        yield gateway


def session_intent_in_doubt(user, input_parts: list):
    """A session create counted, whose request never left (its worker died): nothing upstream carries it."""
    return CreationIntentFactory(
        owner=user,
        kind=IntentKind.SESSION,
        conversation=ensure_main_conversation(user),
        state=IntentState.PENDING_RECONCILIATION,
        attempts=1,
        request={"tools": [], "instructions": "Be brief.", "input_parts": input_parts},
    )


def test_staffs_recheck_never_creates_a_session_whose_input_names_files(user, gateway, rebyte_double):
    agents.ensure_saved_agent(user, gateway, instructions="")
    intent = session_intent_in_doubt(user, ["what is this?", {"attachment": 7}])

    # Two looks (the grace is nothing here): the second proves the session absent, which would allow a create.
    for _ in range(2):
        reconciler.reconcile_intent(intent.id, gateway)

    intent.refresh_from_db()
    assert intent.state == IntentState.PENDING_RECONCILIATION
    assert intent.attempts == 1  # nothing counted: nothing was sent
    assert rebyte_double.state()["counts"]["sessions"] == 0


def test_the_sweepers_pass_creates_it_with_the_content_its_driver_makes(user, gateway, rebyte_double):
    agents.ensure_saved_agent(user, gateway, instructions="")
    intent = session_intent_in_doubt(user, ["what is this?", {"attachment": 7}])

    def input_content(parts: list) -> list:
        return [part if isinstance(part, str) else f"the file {part['attachment']}" for part in parts]

    for _ in range(2):
        reconciler.reconcile_open_intents(gateway, input_content=input_content)

    intent.refresh_from_db()
    assert intent.state == IntentState.CREATED
    (create,) = [request for request in rebyte_double.requests() if request["op"] == "create_session"]
    assert create["body"]["input"][0]["content"] == [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_text", "text": "the file 7"},
    ]
