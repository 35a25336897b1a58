"""GET /api/v1/conversations: Main Chat and every Task as chats, newest activity first, searched by title and message
text (full-text, owner only, paginated); PATCH /api/v1/conversations/<id> renames one."""

import uuid

import pytest
from django.db import connection

from runtime import search
from runtime.models import Message, Task
from tests.client import post_message, start_task

pytestmark = pytest.mark.django_db


def titles(response):
    assert response.status_code == 200, response.json()
    return [conversation["title"] for conversation in response.json()["conversations"]]


def test_main_chat_and_tasks_are_listed_newest_activity_first_with_their_titles(api):
    start_task(api, "Water the plants\nand the lawn", client_message_id="t-1")
    post_message(api, "hello", client_message_id="m-1")
    start_task(api, "Sort the photos", client_message_id="t-2")

    body = api.get("/api/v1/conversations").json()

    assert [c["title"] for c in body["conversations"]] == ["Sort the photos", "Main Chat", "Water the plants"]
    main = body["conversations"][1]
    assert main["kind"] == "main_chat" and main["taskId"] is None and main["status"] == "queued"
    task = body["conversations"][0]
    assert task["kind"] == "task" and Task.objects.get(id=task["taskId"]).conversation_id == uuid.UUID(
        task["conversationId"]
    )
    assert body["nextOffset"] is None

    post_message(api, "again", client_message_id="m-2")  # a new message moves its chat to the top
    assert titles(api.get("/api/v1/conversations"))[0] == "Main Chat"


def test_search_finds_titles_and_message_text_by_words_and_their_beginnings(api):
    start_task(api, "Water the plants", client_message_id="t-1")
    start_task(api, "Sort the photos", client_message_id="t-2", title="Holiday album")
    post_message(api, "Remind me about the dentist on Tuesday", client_message_id="m-1")

    assert titles(api.get("/api/v1/conversations", {"query": "holiday"})) == ["Holiday album"]
    assert titles(api.get("/api/v1/conversations", {"query": "photos"})) == ["Holiday album"]  # its message
    assert titles(api.get("/api/v1/conversations", {"query": "plan"})) == ["Water the plants"]  # a word's start
    assert titles(api.get("/api/v1/conversations", {"query": "DENTIST tues"})) == ["Main Chat"]
    assert titles(api.get("/api/v1/conversations", {"query": "dentist photos"})) == []  # every word must match
    assert titles(api.get("/api/v1/conversations", {"query": "!&|:*()'"})) == []  # operators are not words


def test_search_never_finds_another_users_conversations(api, other_api):
    start_task(other_api, "secret plans of the other user", client_message_id="t-1")
    start_task(api, "my plans", client_message_id="t-2")

    assert titles(api.get("/api/v1/conversations", {"query": "plans"})) == ["my plans"]
    assert titles(other_api.get("/api/v1/conversations", {"query": "my"})) == []


def test_the_list_is_paginated_by_offset(api):
    for n in range(5):
        start_task(api, f"task number {n}", client_message_id=f"t-{n}")

    first = api.get("/api/v1/conversations", {"query": "task", "limit": 2}).json()
    second = api.get("/api/v1/conversations", {"query": "task", "limit": 2, "offset": first["nextOffset"]}).json()
    third = api.get("/api/v1/conversations", {"query": "task", "limit": 2, "offset": second["nextOffset"]}).json()

    seen = [c["title"] for page in (first, second, third) for c in page["conversations"]]
    assert seen == [f"task number {n}" for n in (4, 3, 2, 1, 0)]
    assert third["nextOffset"] is None


def test_bad_list_parameters_are_a_clear_400(api):
    for params in ({"limit": 0}, {"offset": -1}, {"limit": "many"}, {"query": "x" * 201}, {"sort": "title"}):
        response = api.get("/api/v1/conversations", params)
        assert response.status_code == 400, params
        assert response.json()["error"]["code"] == "invalid_request"


def test_renaming_a_task_conversation_renames_the_task_and_is_found_by_its_new_title(api):
    task = start_task(api, "Water the plants", client_message_id="t-1")

    response = api.patch(f"/api/v1/conversations/{task['conversationId']}", {"title": "  Garden  "}, format="json")

    assert response.status_code == 200
    assert response.json()["title"] == "Garden"
    assert Task.objects.get(id=task["taskId"]).title == "Garden"
    assert titles(api.get("/api/v1/conversations", {"query": "garden"})) == ["Garden"]
    assert api.get(f"/api/v1/tasks/{task['taskId']}/conversation").json()["title"] == "Garden"


def test_main_chat_can_be_renamed_too(api):
    conversation_id = api.get("/api/v1/conversation").json()["conversationId"]

    response = api.patch(f"/api/v1/conversations/{conversation_id}", {"title": "Daily life"}, format="json")

    assert response.status_code == 200 and response.json()["kind"] == "main_chat"
    assert titles(api.get("/api/v1/conversations")) == ["Daily life"]


def test_a_blank_or_long_title_is_refused_and_another_users_conversation_is_not_found(api, other_api):
    task = start_task(api, "Water the plants", client_message_id="t-1")
    url = f"/api/v1/conversations/{task['conversationId']}"

    for body in ({"title": "   "}, {"title": "x" * 121}, {"title": 5}, {}, {"title": "ok", "extra": 1}):
        response = api.patch(url, body, format="json")
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "invalid_request"
    assert other_api.patch(url, {"title": "mine now"}, format="json").status_code == 404
    assert other_api.get(url).status_code == 404
    assert api.get(url).json()["title"] == "Water the plants"


def test_the_search_is_served_by_the_gin_indexes():
    words = search.search_query("plants")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    by_text = Message.objects.annotate(vector=search.message_text_vector()).filter(vector=words).explain()
    assert "runtime_message_text_fts" in by_text
