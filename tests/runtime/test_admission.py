import uuid

import pytest

from runtime.models import Conversation, Event, EventType, Message, Run, RunState, Submission
from tests.client import send_message
from tests.concurrency import all_at_once

pytestmark = pytest.mark.django_db


def test_message_is_accepted_with_ids_of_the_user_message_and_the_submission(api, user):
    response = send_message(api, "What is the weather?", client_message_id="m-1")

    assert response.status_code == 202
    submission = Submission.objects.get(id=response.json()["submissionId"])
    assert str(submission.user_message_id) == response.json()["messageId"]
    assert submission.owner == user
    assert submission.user_message.text == "What is the weather?"
    assert submission.run.state == RunState.QUEUED


def test_admission_saves_message_submission_run_and_accepted_event_together(api):
    response = send_message(api, client_message_id="m-1")

    submission = Submission.objects.get(id=response.json()["submissionId"])
    assert list(Message.objects.filter(conversation=submission.conversation).values_list("role", "sequence")) == [
        ("user", 1),
        ("assistant", 2),
    ]
    assert Run.objects.filter(submission=submission).count() == 1
    event = Event.objects.get(submission=submission)
    assert (event.seq, event.type) == (1, EventType.SUBMISSION_ACCEPTED)
    assert event.payload["userMessage"]["text"] == "hello"


def test_wake_up_is_sent_only_after_the_admission_commits(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        send_message(api, client_message_id="m-1")

    # One wake-up for the run, one live push of the accepted event; neither ran before commit.
    assert len(callbacks) == 2


def test_duplicate_client_message_id_returns_the_same_receipt(api):
    first = send_message(api, "same text", client_message_id="m-1")
    second = send_message(api, "same text", client_message_id="m-1")

    assert second.status_code == 202
    assert second.json() == first.json()
    assert Submission.objects.count() == 1
    assert Message.objects.count() == 2


def test_same_client_message_id_with_different_text_is_an_idempotency_conflict(api):
    send_message(api, "first text", client_message_id="m-1")

    response = send_message(api, "other text", client_message_id="m-1")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"
    assert Submission.objects.count() == 1


def test_reusing_a_main_chat_client_message_id_for_a_task_is_a_conflict(api):
    send_message(api, "same text", client_message_id="m-1")

    response = api.post("/api/v1/tasks", {"clientMessageId": "m-1", "text": "same text"}, format="json")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"


def test_client_message_ids_are_scoped_per_user(api, other_api):
    mine = send_message(api, client_message_id="shared-id")
    theirs = send_message(other_api, client_message_id="shared-id")

    assert theirs.status_code == 202
    assert theirs.json()["submissionId"] != mine.json()["submissionId"]


def test_messages_get_consecutive_sequences_and_events_consecutive_seqs(api):
    for index in range(3):
        send_message(api, client_message_id=f"m-{index}")

    assert list(Message.objects.order_by("sequence").values_list("sequence", flat=True)) == [1, 2, 3, 4, 5, 6]
    assert list(Event.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3]


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_with_the_same_client_message_id_create_one_submission(user):
    from tests.conftest import bearer_client

    contenders = 6
    client_message_id = str(uuid.uuid4())
    clients = [bearer_client(user) for _ in range(contenders)]

    responses = all_at_once(
        contenders, lambda index: send_message(clients[index], "race", client_message_id=client_message_id)
    )

    assert [response.status_code for response in responses] == [202] * contenders
    assert len({response.json()["submissionId"] for response in responses}) == 1
    assert Submission.objects.count() == 1
    assert Message.objects.count() == 2
    assert Event.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_to_one_conversation_keep_event_seqs_gapless(user):
    from tests.conftest import bearer_client

    senders = 6
    clients = [bearer_client(user) for _ in range(senders)]

    statuses = all_at_once(
        senders, lambda index: send_message(clients[index], client_message_id=f"parallel-{index}").status_code
    )

    assert statuses == [202] * senders
    # The owner's first messages: one of them created the Main Chat, and the others were admitted into it.
    assert Conversation.objects.filter(owner=user).count() == 1
    assert sorted(Event.objects.values_list("seq", flat=True)) == list(range(1, senders + 1))
    assert sorted(Message.objects.values_list("sequence", flat=True)) == list(range(1, 2 * senders + 1))
