import json

import pytest
from rest_framework.test import APIClient

from runtime.models import Message, Submission

pytestmark = pytest.mark.django_db

MESSAGES = "/api/v1/conversation/messages"
CURRENT_DATE = "2026-12-03T10:00:00+01:00"
A_UUID = "0b6c1c9e-4c1a-4c57-9f53-2f2f0e6f4d1a"


def context(**fields) -> dict:
    return {"timeZone": "Europe/Paris", "currentDate": CURRENT_DATE, **fields}


def assert_invalid(response, fragment=""):
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["retryable"] is False
    assert fragment in body["error"]["message"]
    assert body["requestId"] == response["X-Request-Id"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"text": "hi"}, "clientMessageId"),
        ({"clientMessageId": "", "text": "hi"}, "clientMessageId"),
        ({"clientMessageId": "   ", "text": "hi"}, "clientMessageId"),
        ({"clientMessageId": "a" * 257, "text": "hi"}, "clientMessageId"),
        ({"clientMessageId": "a\x00b", "text": "hi"}, "clientMessageId"),
        ({"clientMessageId": 42, "text": "hi"}, "clientMessageId"),
        ({"clientMessageId": "m"}, "text"),
        ({"clientMessageId": "m", "text": ""}, "text"),
        ({"clientMessageId": "m", "text": " \n\t"}, "text"),
        ({"clientMessageId": "m", "text": "a\x00"}, "text"),
        ({"clientMessageId": "m", "text": "x" * 32_769}, "text"),
        ({"clientMessageId": "m", "text": ["hi"]}, "text"),
        ({"clientMessageId": "m", "text": "hi", "surprise": 1}, "surprise"),
        ({"clientMessageId": "m", "text": "hi", "deviceId": "not-a-uuid"}, "deviceId"),
        ({"clientMessageId": "m", "text": "hi", "clientContext": {"timeZone": "Mars/Olympus"}}, "timeZone"),
        ({"clientMessageId": "m", "text": "hi", "clientContext": {"locale": "en"}}, "locale"),
        ({"clientMessageId": "m", "text": "hi", "clientContext": {"timeZone": "Europe/Paris"}}, "currentDate"),
        ({"clientMessageId": "m", "text": "hi", "clientContext": {"currentDate": CURRENT_DATE}}, "timeZone"),
        (
            {"clientMessageId": "m", "text": "hi", "clientContext": {"timeZone": None, "currentDate": CURRENT_DATE}},
            "timeZone",
        ),
        (
            {"clientMessageId": "m", "text": "hi", "clientContext": context(currentDate="2026-12-03T10:00:00")},
            "currentDate",
        ),
        ({"clientMessageId": "m", "text": "hi", "clientContext": context(currentDate="2026-12-03")}, "currentDate"),
        ({"clientMessageId": "m", "text": "hi", "clientContext": context(currentDate="tomorrow")}, "currentDate"),
    ],
)
def test_invalid_message_bodies_are_refused_and_save_nothing(api, body, fragment):
    assert_invalid(api.post(MESSAGES, body, format="json"), fragment)
    assert Submission.objects.count() == 0
    assert Message.objects.count() == 0


def test_a_complete_client_context_is_accepted(api):
    response = api.post(MESSAGES, {"clientMessageId": "m", "text": "hi", "clientContext": context()}, format="json")

    assert response.status_code == 202


def test_another_users_device_id_is_not_found_and_saves_nothing(api, other_api):
    foreign = other_api.post(
        "/api/v1/devices/register", {"installationId": "phone", "tools": []}, format="json"
    ).json()["deviceId"]

    response = api.post(MESSAGES, {"clientMessageId": "m", "text": "hi", "deviceId": foreign}, format="json")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert Submission.objects.count() == 0


def test_a_task_is_created_without_a_device_id(api):
    response = api.post("/api/v1/tasks", {"clientMessageId": "t", "text": "hi", "deviceId": A_UUID}, format="json")

    assert_invalid(response, "deviceId")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/submissions/not-a-uuid",
        "/api/v1/submissions/0b6c1c9e4c1a4c579f532f2f0e6f4d1a",
        "/api/v1/submissions/not-a-uuid/stream",
        "/api/v1/tasks/123/conversation",
        "/api/v1/devices/x/tool-invocations",
        "/api/v1/scheduled-tasks/nope",
        "/api/v1/scheduled-tasks/nope/runs",
    ],
)
def test_a_path_id_that_is_not_a_uuid_is_an_invalid_request(api, path):
    assert_invalid(api.get(path), "must be a UUID")


def test_a_write_to_a_path_id_that_is_not_a_uuid_is_an_invalid_request(api):
    assert_invalid(api.post("/api/v1/submissions/42/cancel", {}, format="json"), "submission_id")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/tasks?page=2",
        "/api/v1/conversation?after=3",
        f"/api/v1/submissions/{A_UUID}?verbose=1",
        f"/api/v1/submissions/{A_UUID}/stream?after=3",
        "/api/v1/scheduled-tasks?all=1",
        f"/api/v1/scheduled-tasks/{A_UUID}/runs?after=x",
    ],
)
def test_an_unknown_query_parameter_is_an_invalid_request(api, path):
    assert_invalid(api.get(path))


def test_a_repeated_query_parameter_is_an_invalid_request(api):
    assert_invalid(api.get("/api/v1/conversation?limit=1&limit=2"), "limit")


def test_text_at_the_limit_is_accepted(api):
    response = api.post(MESSAGES, {"clientMessageId": "m", "text": "x" * 32_768}, format="json")

    assert response.status_code == 202


def test_a_task_first_message_over_4000_characters_is_refused(api):
    assert_invalid(api.post("/api/v1/tasks", {"clientMessageId": "t", "text": "x" * 4001}, format="json"), "text")


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"[1, 2]", b'"text"', b'{"clientMessageId": "m", "text": NaN}', b"\xff\xfe"],
)
def test_malformed_json_is_an_invalid_request(api, raw):
    assert_invalid(api.generic("POST", MESSAGES, raw, content_type="application/json"))


def test_a_body_over_64_kib_is_refused_as_too_large(api):
    raw = json.dumps({"clientMessageId": "m", "text": "x" * 70_000}).encode()

    response = api.generic("POST", MESSAGES, raw, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert Submission.objects.count() == 0


def test_a_non_json_content_type_is_refused_with_an_ica_error(api):
    response = api.generic(
        "POST", MESSAGES, b"clientMessageId=m&text=hi", content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "limit=abc", "afterSequence=-1", "afterSequence=x"])
def test_out_of_range_history_parameters_are_refused(api, query):
    assert_invalid(api.get(f"/api/v1/conversation?{query}"))


def test_a_request_without_a_token_is_unauthorized():
    response = APIClient().post(MESSAGES, {"clientMessageId": "m", "text": "hi"}, format="json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert Submission.objects.count() == 0


def test_a_request_with_an_unknown_token_is_unauthorized():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer 0123456789abcdef")

    response = client.get("/api/v1/conversation")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_every_response_carries_a_request_id_and_echoes_a_sane_one(api):
    fresh = api.get("/api/v1/tasks")
    echoed = api.get("/api/v1/tasks", HTTP_X_REQUEST_ID="client-req-1")
    hostile = api.get("/api/v1/tasks", HTTP_X_REQUEST_ID="bad id\r\nx")

    assert len(fresh["X-Request-Id"]) == 36
    assert echoed["X-Request-Id"] == "client-req-1"
    assert hostile["X-Request-Id"] != "bad id\r\nx"


def test_an_unknown_api_path_is_a_not_found_error_body(api):
    response = api.get("/api/v1/nothing-here")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_wrong_method_is_refused_with_an_ica_error(api):
    response = api.delete(MESSAGES)

    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_deeply_nested_body_within_64_kib_is_an_invalid_request_not_a_crash(api):
    depth = 30_000
    raw = b'{"clientMessageId": "m", "text": "hi", "clientContext": ' + b"[" * depth + b"]" * depth + b"}"
    assert len(raw) < 64 * 1024

    assert_invalid(api.generic("POST", MESSAGES, raw, content_type="application/json"), "nested")
    assert Submission.objects.count() == 0


def test_brackets_inside_strings_do_not_count_as_nesting(api):
    response = api.post(MESSAGES, {"clientMessageId": "m", "text": "[" * 5000 + '{"' * 100}, format="json")

    assert response.status_code == 202


@pytest.mark.parametrize("device_id", [False, 0, 12345])
def test_a_device_id_that_is_not_a_uuid_string_is_an_invalid_request(api, device_id):
    assert_invalid(api.post(MESSAGES, {"clientMessageId": "m", "text": "hi", "deviceId": device_id}, format="json"))


def test_a_new_task_names_no_device(api):
    body = {"clientMessageId": "t", "text": "plan", "deviceId": "00000000-0000-0000-0000-000000000000"}

    assert_invalid(api.post("/api/v1/tasks", body, format="json"), "deviceId")


def test_a_current_date_that_is_not_a_string_is_an_invalid_request(api):
    body = {"clientMessageId": "m", "text": "hi", "clientContext": {"timeZone": "Europe/Berlin", "currentDate": 0}}

    assert_invalid(api.post(MESSAGES, body, format="json"), "currentDate")
