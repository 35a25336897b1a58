"""`GET /api/v1/export`: one streamed JSON document of everything the account holds, served by the real web server
(ASGI) to a real client; replies and tool receipts made by a real worker with the double."""

import json

import httpx
import pytest

from devtools.stack import long_task_conversation
from tests.client import bearer, finished_run, token_of
from tools.models import ToolPermission
from webhooks import services as webhook_services

pytestmark = pytest.mark.django_db(transaction=True)

LARGE = 2_400  # messages in one task conversation: several pages of the export's reads


def export(web, user) -> tuple[httpx.Headers, int, dict]:
    """The response's headers, how many chunks it arrived in, and the document."""
    chunks = []
    with httpx.stream("GET", f"{web}/api/v1/export", headers=bearer(token_of(user)), timeout=60) as r:
        assert r.status_code == 200
        chunks = list(r.iter_raw())
    return r.headers, len(chunks), json.loads(b"".join(chunks))


def test_the_export_streams_every_conversation_message_tool_receipt_and_webhook_without_secrets(
    shared_web, api, user, other_user, other_api
):
    endpoint = webhook_services.create_endpoint(
        owner=user, url="https://hooks.example.com/x", event_types=["run.completed"]
    )
    noted = api.post(
        "/api/v1/conversation/messages",
        {"clientMessageId": "m-1", "text": '/tool save_note {"text": "remember the milk"}'},
        format="json",
    ).json()
    other = other_api.post(
        "/api/v1/conversation/messages", {"clientMessageId": "m-1", "text": "not yours"}, format="json"
    ).json()
    finished_run(noted["submissionId"])
    finished_run(other["submissionId"])
    long_conversation_id = long_task_conversation(user, LARGE, "a message " + "x" * 200)
    ToolPermission.objects.create(owner=user, tool_name="save_note")  # as "Always allow for this tool" writes it
    ToolPermission.objects.create(owner=other_user, tool_name="save_note")

    headers, chunks, document = export(shared_web, user)

    assert headers["content-type"] == "application/json"
    assert headers["content-disposition"].startswith('attachment; filename="impo-export-')
    assert chunks > 1  # written as it is read, not assembled first
    assert document["format"] == "impo.export.v1"
    assert document["account"]["username"] == user.username
    conversations = {c["conversationId"]: c for c in document["conversations"]}
    assert len(conversations) == 2  # Main Chat and the task; none of the other user's
    [main] = [c for c in conversations.values() if c["kind"] == "main_chat"]
    reply = [m for m in main["messages"] if m["role"] == "assistant"][-1]
    assert [tool["toolName"] for tool in reply["tools"]] == ["save_note"]
    assert [receipt["toolCallId"] for receipt in reply["receipts"]] == [reply["tools"][0]["toolCallId"]]
    assert "result" in reply["receipts"][0]
    long = conversations[str(long_conversation_id)]
    assert len(long["messages"]) == LARGE + 2  # the task's first exchange and the bulk history
    sequences = [m["sequence"] for m in long["messages"]]
    assert sequences == sorted(sequences)
    assert document["webhooks"] == [
        {
            "id": str(endpoint.id),
            "url": endpoint.url,
            "eventTypes": ["run.completed"],
            "active": True,
            "createdAt": endpoint.created_at.isoformat(),
            "updatedAt": endpoint.updated_at.isoformat(),
        }
    ]
    assert endpoint.secret not in json.dumps(document)
    assert token_of(user) not in json.dumps(document)
    assert "not yours" not in json.dumps(document)
    assert document["schedules"] == []
    assert [(item["toolName"], item["title"]) for item in document["toolPermissions"]] == [("save_note", "Save a note")]


def test_an_export_without_credentials_is_unauthorized(shared_web):
    response = httpx.get(f"{shared_web}/api/v1/export", timeout=60)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_a_deleted_conversation_is_not_exported(shared_web, api, user):
    kept = api.post("/api/v1/tasks", {"clientMessageId": "t-1", "text": "keep this task"}, format="json").json()
    gone = api.post("/api/v1/tasks", {"clientMessageId": "t-2", "text": "delete this task"}, format="json").json()

    assert api.delete(f"/api/v1/tasks/{gone['taskId']}").status_code == 202
    _, _, document = export(shared_web, user)

    assert [conversation["taskId"] for conversation in document["conversations"]] == [kept["taskId"]]


def test_the_export_carries_the_accounts_custom_instructions_and_no_one_elses(shared_web, api, user, other_api):
    api.put("/api/v1/account/instructions", {"text": "Answer in French."}, format="json")
    other_api.put("/api/v1/account/instructions", {"text": "Not yours."}, format="json")

    _, _, document = export(shared_web, user)

    instructions = document["account"]["instructions"]
    assert (instructions["text"], instructions["maxLength"]) == ("Answer in French.", 1500)
    assert instructions["updatedAt"] is not None
