"""The live push of an admission carries the accepted event exactly as the event log holds it."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from runtime.models import Event
from runtime.outbound import conversation_group
from runtime.wire import event_to_wire
from tests.client import send_message

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_pushed_accepted_event_equals_the_logged_one(api):
    conversation_id = api.get("/api/v1/conversation").json()["conversationId"]
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(conversation_id), channel)

    send_message(api, "hi", client_message_id="m-1")

    [pushed] = async_to_sync(layer.receive)(channel)["events"]  # the admission's one event, as one push
    assert pushed == event_to_wire(Event.objects.get())
    assert pushed["payload"]["userMessage"]["text"] == "hi"
