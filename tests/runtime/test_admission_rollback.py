import pytest
from django.db import connection

from runtime.models import Conversation, Event, Message, Run, Submission
from tests.client import send_message

# The trigger must be visible to the request's own transaction, so this test commits for real.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def failing_event_insert():
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION impo_test_refuse_event() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'event log unavailable'; END $$;"
            " CREATE TRIGGER impo_test_refuse_event BEFORE INSERT ON runtime_event"
            " FOR EACH ROW EXECUTE FUNCTION impo_test_refuse_event();"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER IF EXISTS impo_test_refuse_event ON runtime_event;"
            " DROP FUNCTION IF EXISTS impo_test_refuse_event();"
        )


def test_a_failure_after_the_message_insert_rolls_back_the_whole_admission(api, failing_event_insert):
    response = send_message(api, "hi", client_message_id="m-1")

    assert response.status_code == 503
    assert response.json()["error"] == {
        "code": "service_unavailable",
        "message": "The service could not save this request.",
        "retryable": True,
    }
    assert Message.objects.count() == 0
    assert Submission.objects.count() == 0
    assert Run.objects.count() == 0
    assert Event.objects.count() == 0
    assert Conversation.objects.count() == 0


def test_the_same_command_succeeds_once_the_failure_clears(api, failing_event_insert):
    body = {"clientMessageId": "m-1", "text": "hi"}
    api.post("/api/v1/conversation/messages", body, format="json")
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER impo_test_refuse_event ON runtime_event")

    response = api.post("/api/v1/conversation/messages", body, format="json")

    assert response.status_code == 202
    assert Submission.objects.count() == 1
    assert list(Message.objects.values_list("sequence", flat=True).order_by("sequence")) == [1, 2]
