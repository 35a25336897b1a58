import pytest

from tests.client import post_message

pytestmark = pytest.mark.django_db


def test_an_empty_main_chat_has_a_conversation_and_no_messages(api):
    body = api.get("/api/v1/conversation").json()

    assert body["messages"] == []
    assert body["activeSubmissions"] == []
    assert body["hasMore"] is False
    assert body["nextAfterSequence"] == 0
    assert body["conversationId"]


def test_history_lists_messages_in_order_with_the_active_submission(api):
    receipt = post_message(api, "first", client_message_id="m-1")

    body = api.get("/api/v1/conversation").json()

    assert [(m["role"], m["sequence"], m["text"], m["status"]) for m in body["messages"]] == [
        ("user", 1, "first", "completed"),
        ("assistant", 2, "", "pending"),
    ]
    assert body["messages"][0]["id"] == receipt["messageId"]
    assert body["activeSubmissions"] == [
        {
            "submissionId": receipt["submissionId"],
            "messageId": body["messages"][1]["id"],
            "status": "queued",
            "reconnecting": False,
            "needsStaff": False,
        }
    ]


def test_history_pages_forward_from_after_sequence(api):
    for index in range(3):
        post_message(api, f"text {index}", client_message_id=f"m-{index}")

    first = api.get("/api/v1/conversation?afterSequence=0&limit=4").json()
    rest = api.get(f"/api/v1/conversation?afterSequence={first['nextAfterSequence']}&limit=4").json()

    assert [m["sequence"] for m in first["messages"]] == [1, 2, 3, 4]
    assert first["hasMore"] is True
    assert [m["sequence"] for m in rest["messages"]] == [5, 6]
    assert rest["hasMore"] is False
    assert rest["nextAfterSequence"] == 6


def test_a_submission_reports_the_ica_shape(api):
    receipt = post_message(api, client_message_id="m-1")

    body = api.get(f"/api/v1/submissions/{receipt['submissionId']}").json()

    assert body["submissionId"] == receipt["submissionId"]
    assert body["messageId"] != receipt["messageId"]
    assert body["userMessageId"] == receipt["messageId"]
    assert body["status"] == "queued"
    assert body["resultCount"] == 0
    assert body["subscriberCount"] == 0
    assert body["version"] == 1
    assert body["cancelRequested"] is False
    assert body["error"] is None


def test_the_receipt_and_the_submission_name_the_users_message_and_the_reply_alike(api):
    receipt = post_message(api, client_message_id="m-1")

    body = api.get(f"/api/v1/submissions/{receipt['submissionId']}").json()

    user, reply = (m["id"] for m in api.get("/api/v1/conversation").json()["messages"])
    assert (receipt["userMessageId"], receipt["replyMessageId"]) == (user, reply)
    assert (body["userMessageId"], body["replyMessageId"]) == (user, reply)
    # The first names, kept for the clients that read them, say different things: the receipt's is the user's.
    assert (receipt["messageId"], body["messageId"]) == (user, reply)
    assert post_message(api, client_message_id="m-1") == receipt  # a replay's receipt names them too


def test_the_openapi_schema_describes_the_command_routes(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/conversation/messages" in paths
    assert "/api/v1/tasks/{task_id}/messages" in paths
