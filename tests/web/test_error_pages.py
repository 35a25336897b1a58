"""Web routes answer errors as pages for people; the API keeps answering ICA v1 JSON."""

import uuid

import pytest
from django.test import RequestFactory

from runtime.http import web

pytestmark = pytest.mark.django_db


def test_an_unknown_task_page_answers_404_as_html(client, user):
    client.force_login(user)

    response = client.get(f"/tasks/{uuid.uuid4()}/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert b"<h1>Not found</h1>" in response.content


def test_another_users_task_page_is_the_same_404_as_a_missing_one(client, user, other_user, api):
    task_id = api.post("/api/v1/tasks", {"clientMessageId": "t-1", "text": "mine"}, format="json").json()["taskId"]
    client.force_login(other_user)

    response = client.get(f"/tasks/{task_id}/")

    assert response.status_code == 404
    assert b"<h1>Not found</h1>" in response.content


def test_an_unknown_web_path_answers_404_as_html(client, user):
    client.force_login(user)

    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_unknown_api_path_still_answers_404_as_json(api):
    response = api.get("/api/v1/no-such-thing")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing", "/api/v1/no/such/thing/", "/api/v2/conversation"])
def test_an_unknown_api_path_answers_the_json_envelope_with_debug_on_too(api, settings, path):
    settings.DEBUG = True

    for response in (api.get(path), api.post(path, {}, format="json")):
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json()["error"]["code"] == "not_found"
        assert response.json()["requestId"] == response["X-Request-Id"]


def test_a_web_page_that_fails_answers_500_as_html():
    response = web.server_error(RequestFactory().get("/tasks/"))

    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    assert b"Something went wrong" in response.content


def test_an_api_request_that_fails_answers_500_as_json():
    response = web.server_error(RequestFactory().get("/api/v1/conversation"))

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"


def test_the_scheduled_tasks_page_needs_a_login(client):
    response = client.get("/schedules/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
