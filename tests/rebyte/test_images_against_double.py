"""The double takes `input_image` parts as the SDK types them, through the SDK with strict validation: it refuses a
`data:` URL that is not an image, records what it was sent, and its echo agent acknowledges each image."""

import uuid

import openai
import pytest

from attachments.provider_parts import document_part, image_part
from devtools.stack import wait_until
from tests.attachments.files import jpeg_with_gps_rotated, png

# Room enough that no test image here is made smaller: what is checked is how the double takes a part.
SHARE = 256 * 1024


def _session(sdk, content: list[dict]):
    agent = sdk.beta.agents.create(model="rebyte-echo", metadata={"k": uuid.uuid4().hex})
    return sdk.beta.agents.sessions.create(
        environment={"type": "none"}, agent_id=agent.id, input=[{"role": "user", "content": content}]
    )


def _reply(sdk, session_id) -> str:
    def replied():
        # The turn first: once it has completed, the items read after it hold the whole reply.
        turns = list(sdk.beta.agents.sessions.turns.list(session_id, limit=10))
        if turns[0].status != "completed":
            return None
        items = sdk.beta.agents.sessions.items.list(session_id, order="asc", limit=100)
        return [item.output_text for item in items if item.type == "message" and item.role == "assistant"][-1]

    return wait_until(replied, timeout=20, what=f"the reply of {session_id}")


def test_the_echo_agent_acknowledges_each_image_it_was_shown(sdk):
    session = _session(
        sdk,
        [
            {"type": "input_text", "text": "what is this?"},
            image_part(png(640, 480), max_bytes=SHARE),
            image_part(png(10, 20), max_bytes=SHARE),
        ],
    )

    assert _reply(sdk, session.id) == "Echo: what is this? [image 640x480 png] [image 10x20 png]"


def test_an_image_in_an_input_event_is_acknowledged_and_shown_in_the_users_item(sdk):
    session = _session(sdk, [{"type": "input_text", "text": "first"}])
    _reply(sdk, session.id)
    part = image_part(jpeg_with_gps_rotated(300, 100), max_bytes=SHARE)

    sdk.beta.agents.sessions.events.create(
        session.id,
        events=[{"type": "agent.session.input.message", "input": [{"role": "user", "content": [part]}]}],
        idempotency_key="image-1",
    )

    wait_until(lambda: len(list(sdk.beta.agents.sessions.turns.list(session.id))) == 2, timeout=20, what="2 turns")
    assert _reply(sdk, session.id) == "Echo: [image 100x300 jpeg]"
    items = sdk.beta.agents.sessions.items.list(session.id, order="asc", limit=100)
    shown = [content for item in items if item.type == "message" and item.role == "user" for content in item.content]
    assert shown[-1].type == "input_image" and shown[-1].image_url == part["image_url"]


def test_a_data_url_that_is_not_an_image_is_invalid_input(sdk):
    with pytest.raises(openai.BadRequestError) as refused:
        _session(sdk, [{"type": "input_image", "image_url": "data:image/png;base64,bm90IGFuIGltYWdl"}])

    assert refused.value.code == "invalid_input"


def test_what_reached_the_double_is_recorded_with_no_gps_in_it(sdk, rebyte_double):
    part = image_part(jpeg_with_gps_rotated(), max_bytes=SHARE)
    document = document_part(name="talk.pdf", pages=1, text="hello", text_cut=False, limit=100)
    session = _session(sdk, [{"type": "input_text", "text": "see"}, document, part])
    _reply(sdk, session.id)

    (create,) = [entry for entry in rebyte_double.requests() if entry["path"] == "/v1/agents/sessions"]
    assert create["body"]["input"][0]["content"] == [{"type": "input_text", "text": "see"}, document, part]
    assert b"GPS" not in part["image_url"].encode() and b"PhoneMaker" not in _raw(part)


def _raw(part) -> bytes:
    import base64

    return base64.b64decode(part["image_url"].partition(";base64,")[2])
