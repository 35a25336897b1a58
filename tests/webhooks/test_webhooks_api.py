"""`/api/v1/webhooks`: each user manages their own endpoints; the secret is shown once."""

import uuid

import pytest

from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db

URL = "https://hooks.example.com/impo"


def create(api, **fields):
    return api.post("/api/v1/webhooks", {"url": URL, "eventTypes": ["run.completed"], **fields}, format="json")


def test_creating_an_endpoint_shows_its_secret_once(api):
    created = create(api, eventTypes=["run.failed", "tool.approval_requested"])

    assert created.status_code == 201
    body = created.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    assert (body["url"], body["eventTypes"], body["active"]) == (URL, ["run.failed", "tool.approval_requested"], True)
    listed = api.get("/api/v1/webhooks").json()["endpoints"]
    assert [endpoint["id"] for endpoint in listed] == [body["id"]]
    assert "secret" not in listed[0]
    assert "secret" not in api.get(f"/api/v1/webhooks/{body['id']}").json()


def test_each_endpoint_gets_its_own_secret(api):
    assert create(api).json()["secret"] != create(api).json()["secret"]


@pytest.mark.parametrize(
    "fields",
    [
        {"url": "ftp://hooks.example.com/impo"},
        {"url": "not a url"},
        {"url": "https://user:password@hooks.example.com/impo"},
        {"url": ""},
        {"url": 7},
        {"eventTypes": []},
        {"eventTypes": ["text.delta"]},
        {"eventTypes": "run.failed"},
        {"active": "yes"},
        {"secret": "chosen-by-me"},
    ],
)
def test_a_bad_endpoint_is_refused_with_a_clear_400(api, fields):
    response = create(api, **fields)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert not WebhookEndpoint.objects.exists()


def test_an_endpoint_can_be_changed_and_deleted_by_its_owner(api):
    endpoint_id = create(api).json()["id"]

    changed = api.patch(
        f"/api/v1/webhooks/{endpoint_id}", {"active": False, "eventTypes": ["run.cancelled"]}, format="json"
    )
    assert changed.status_code == 200
    assert (changed.json()["active"], changed.json()["eventTypes"]) == (False, ["run.cancelled"])
    assert api.patch(f"/api/v1/webhooks/{endpoint_id}", {"url": "mailto:x@y"}, format="json").status_code == 400

    assert api.delete(f"/api/v1/webhooks/{endpoint_id}").json() == {"deleted": True}
    assert api.get(f"/api/v1/webhooks/{endpoint_id}").status_code == 404


def test_another_users_endpoint_is_not_found_whatever_is_asked_of_it(api, other_api):
    endpoint_id = create(api).json()["id"]

    assert other_api.get(f"/api/v1/webhooks/{endpoint_id}").status_code == 404
    assert other_api.patch(f"/api/v1/webhooks/{endpoint_id}", {"active": False}, format="json").status_code == 404
    assert other_api.delete(f"/api/v1/webhooks/{endpoint_id}").status_code == 404
    assert other_api.get(f"/api/v1/webhooks/{endpoint_id}/deliveries").status_code == 404
    assert other_api.get("/api/v1/webhooks").json() == {"endpoints": []}
    assert WebhookEndpoint.objects.get(id=endpoint_id).active


def test_a_malformed_or_unknown_endpoint_id_is_400_or_404(api):
    assert api.get("/api/v1/webhooks/not-a-uuid").status_code == 400
    assert api.get(f"/api/v1/webhooks/{uuid.uuid4()}/deliveries").status_code == 404


def test_an_account_has_a_bounded_number_of_endpoints(api, settings):
    settings.IMPO_WEBHOOK_ENDPOINTS_PER_USER = 2
    create(api), create(api)

    refused = create(api)

    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "webhook_limit_reached"


def test_webhooks_need_authentication(client):
    assert client.get("/api/v1/webhooks").status_code == 401
