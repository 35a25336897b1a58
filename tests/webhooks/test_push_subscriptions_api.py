"""`/api/v1/push-subscriptions` and `/api/v1/notification-preferences`: each user registers their own browsers
(the browser's `PushSubscription.toJSON()`) and chooses the kinds of notification they get."""

import uuid

import pytest

from devtools.push_service import Browser, new_vapid_private_key, vapid_public_key_of
from webhooks.models import PushSubscription

pytestmark = pytest.mark.django_db

ENDPOINT = "https://push.example.com/wpush/v2/abc123"


@pytest.fixture(autouse=True)
def vapid_key(settings):
    settings.IMPO_VAPID_PRIVATE_KEY = new_vapid_private_key()
    return settings.IMPO_VAPID_PRIVATE_KEY


def browser(endpoint: str = ENDPOINT) -> Browser:
    return Browser(endpoint=endpoint, token="t")


def register(api, body: dict):
    return api.post("/api/v1/push-subscriptions", body, format="json")


def test_a_browser_registers_once_per_endpoint_and_sees_the_servers_vapid_key(api, vapid_key):
    first = browser()
    created = register(api, first.to_json())
    assert created.status_code == 201, created.content
    again = register(api, browser().to_json())  # the same endpoint, new keys (the browser resubscribed)

    assert again.status_code == 201
    assert again.json()["id"] == created.json()["id"]
    listed = api.get("/api/v1/push-subscriptions").json()
    assert listed["vapidPublicKey"] == vapid_public_key_of(vapid_key)
    assert [each["id"] for each in listed["subscriptions"]] == [created.json()["id"]]
    assert listed["subscriptions"][0]["endpoint"] == ENDPOINT
    assert "keys" not in listed["subscriptions"][0]
    stored = PushSubscription.objects.get()
    assert stored.p256dh != first.to_json()["keys"]["p256dh"]  # the later keys are kept


def test_a_subscription_is_deleted_by_its_owner_and_is_not_found_by_anyone_else(api, other_api):
    created = register(api, browser().to_json()).json()

    assert other_api.delete(f"/api/v1/push-subscriptions/{created['id']}").status_code == 404
    assert other_api.get("/api/v1/push-subscriptions").json()["subscriptions"] == []
    assert api.delete(f"/api/v1/push-subscriptions/{created['id']}").json() == {"deleted": True}
    assert api.delete(f"/api/v1/push-subscriptions/{created['id']}").status_code == 404
    assert api.delete("/api/v1/push-subscriptions/not-a-uuid").status_code == 400
    assert api.delete(f"/api/v1/push-subscriptions/{uuid.uuid4()}").status_code == 404


def test_an_endpoint_moves_to_the_account_signed_in_now_when_its_keys_come_with_it(api, other_api):
    signed_in_browser = browser()
    register(other_api, signed_in_browser.to_json())

    assert register(api, signed_in_browser.to_json()).status_code == 201

    assert other_api.get("/api/v1/push-subscriptions").json()["subscriptions"] == []
    assert len(api.get("/api/v1/push-subscriptions").json()["subscriptions"]) == 1


def test_an_endpoint_of_another_account_is_refused_with_other_keys_and_stays_with_its_owner(api, other_api, other_user):
    owners_browser = browser()
    owned = register(other_api, owners_browser.to_json()).json()

    refused = register(api, browser().to_json())  # the same endpoint URL, with keys of the caller's making

    assert refused.status_code == 409, refused.content
    assert refused.json()["error"]["code"] == "push_endpoint_taken"
    assert other_api.get("/api/v1/push-subscriptions").json()["subscriptions"] == [owned]
    assert api.get("/api/v1/push-subscriptions").json()["subscriptions"] == []
    stored = PushSubscription.objects.get()
    assert stored.owner == other_user
    assert stored.auth == owners_browser.to_json()["keys"]["auth"]  # its pushes still reach the owner's browser


def _with_keys(**keys) -> dict:
    body = browser().to_json()
    body["keys"] = {**body["keys"], **keys}
    return body


@pytest.mark.parametrize(
    "body",
    [
        _with_keys(p256dh="BAAA"),  # too short
        _with_keys(p256dh="B" + "A" * 86),  # 65 bytes, but no point on P-256
        _with_keys(p256dh="not base64url!"),
        _with_keys(auth="AAAA"),  # not 16 bytes
        _with_keys(auth=123),
        {**browser().to_json(), "keys": {"p256dh": browser().to_json()["keys"]["p256dh"]}},
        {**browser().to_json(), "keys": None},
        {**browser().to_json(), "expirationTime": "tomorrow"},
        {**browser().to_json(), "expirationTime": True},
        {**browser().to_json(), "extra": 1},
        {**browser().to_json(), "endpoint": "ftp://push.example.com/x"},
        {**browser().to_json(), "endpoint": "https://user:pw@push.example.com/x"},
        {**browser().to_json(), "endpoint": "https://push.example.com/" + "x" * 2100},
        {"endpoint": ENDPOINT},
        [],
    ],
)
def test_a_malformed_subscription_is_a_400_in_the_ica_body(api, body):
    response = register(api, body)

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_request"
    assert not PushSubscription.objects.exists()


@pytest.mark.parametrize(
    "endpoint",
    ["https://127.0.0.1/push", "https://10.0.0.7/push", "https://[::1]/push", "https://169.254.169.254/push"],
)
def test_an_endpoint_on_an_internal_address_is_refused_at_registration(api, endpoint):
    response = register(api, browser(endpoint).to_json())

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "webhook_target_forbidden"
    assert not PushSubscription.objects.exists()


def test_plain_http_is_refused_where_webhooks_refuse_it(api):
    response = register(api, browser("http://push.example.com/x").to_json())

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "webhook_target_forbidden"


def test_the_subscriptions_of_one_account_are_capped(api, settings):
    settings.IMPO_PUSH_SUBSCRIPTIONS_PER_USER = 2
    for number in range(2):
        assert register(api, browser(f"{ENDPOINT}/{number}").to_json()).status_code == 201

    refused = register(api, browser(f"{ENDPOINT}/3").to_json())

    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "push_subscription_limit_reached"
    assert register(api, browser(f"{ENDPOINT}/0").to_json()).status_code == 201  # re-registering is not a new one


def test_without_a_vapid_key_the_page_is_told_push_is_off(api, settings):
    settings.IMPO_VAPID_PRIVATE_KEY = ""

    assert api.get("/api/v1/push-subscriptions").json() == {"vapidPublicKey": None, "subscriptions": []}


def test_every_kind_is_on_until_its_owner_turns_it_off(api, other_api):
    every = {"completed": True, "failed": True, "cancelled": True, "approval": True, "reconciliation": True}
    assert api.get("/api/v1/notification-preferences").json() == {"kinds": every}

    updated = api.put("/api/v1/notification-preferences", {"kinds": {"completed": False}}, format="json")

    assert updated.status_code == 200
    assert updated.json() == {"kinds": {**every, "completed": False}}
    assert api.get("/api/v1/notification-preferences").json() == {"kinds": {**every, "completed": False}}
    assert other_api.get("/api/v1/notification-preferences").json() == {"kinds": every}
    turned_back = api.put("/api/v1/notification-preferences", {"kinds": {"completed": True}}, format="json")
    assert turned_back.json() == {"kinds": every}


@pytest.mark.parametrize(
    "body", [{"kinds": {"everything": False}}, {"kinds": {"completed": "no"}}, {"kinds": []}, {}, {"other": 1}]
)
def test_a_malformed_preference_is_a_400(api, body):
    response = api.put("/api/v1/notification-preferences", body, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_push_routes_are_in_the_openapi_schema(api):
    schema = api.get("/api/schema/").content.decode()

    for path in ("/api/v1/push-subscriptions", "/api/v1/push-subscriptions/{subscription_id}"):
        assert f"{path}/:" in schema
    assert "/api/v1/notification-preferences/:" in schema
    assert "vapidPublicKey" in schema
