"""Webhook targets are never this machine or the networks behind it (docs/design.md §9): refused at creation, checked
again at send time against the address actually connected to, redirects not followed, and errors that tell
nothing about which ports are open."""

import pytest

from devtools.stack import free_port, wait_until
from runtime.models import Run
from tests.client import send_message
from tests.webhooks.receiver import Receiver
from webhooks.models import WebhookDelivery

INTERNAL_TARGETS = [
    "https://127.0.0.1/hooks",
    "http://127.0.0.1:5432/",
    "https://127.1/hooks",
    "http://2130706433/",  # 127.0.0.1 written as one decimal number
    "http://0x7f000001/",
    "https://localhost/hooks",
    "https://LOCALHOST:8443/hooks",
    "https://0.0.0.0/",
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.1.1/",
    "https://100.64.0.1/",  # shared address space (carrier NAT)
    "http://169.254.169.254/latest/meta-data/",
    "https://224.0.0.1/",
    "https://255.255.255.255/",
    "https://[::1]/hooks",
    "https://[::]/",
    "https://[fe80::1]/",
    "https://[fc00::1]/",
    "https://[ff02::1]/",
    "https://[::ffff:127.0.0.1]/",  # IPv4-mapped
    "https://[::ffff:10.0.0.1]/",
    "https://[::127.0.0.1]/",  # IPv4-compatible
    "https://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "https://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
]


def create(api, url: str):
    return api.post("/api/v1/webhooks", {"url": url, "eventTypes": ["run.completed"]}, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize("url", INTERNAL_TARGETS)
def test_an_internal_target_is_refused_at_creation(api, url):
    response = create(api, url)

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "webhook_target_forbidden"


@pytest.mark.django_db
def test_an_endpoint_cannot_be_moved_to_an_internal_target(api):
    endpoint = create(api, "https://93.184.215.14/hooks").json()

    response = api.patch(f"/api/v1/webhooks/{endpoint['id']}", {"url": "https://[::1]/hooks"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "webhook_target_forbidden"


@pytest.mark.django_db
def test_plain_http_is_refused_unless_the_explicit_setting_allows_it(api, settings):
    refused = create(api, "http://93.184.215.14/hooks")  # the default: DEBUG or not, https only
    accepted = create(api, "https://93.184.215.14/hooks")
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True
    allowed = create(api, "http://93.184.215.14/hooks")

    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "webhook_target_forbidden")
    assert (accepted.status_code, allowed.status_code) == (201, 201)


@pytest.mark.django_db
def test_a_network_listed_as_allowed_takes_local_receivers(api, settings):
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True
    settings.IMPO_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]

    assert create(api, "http://127.0.0.1:9/hooks").status_code == 201
    assert create(api, "http://10.0.0.1/hooks").status_code == 400


@pytest.fixture
def receivers():
    started: list[Receiver] = []

    def make(statuses=(204,), **options) -> Receiver:
        receiver = Receiver(free_port(), statuses, **options).start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.stop()


def complete_a_run(api) -> None:
    response = send_message(api, "hi", client_message_id="m-1")
    assert response.status_code == 202
    wait_until(
        lambda: Run.objects.filter(submission_id=response.json()["submissionId"], state="completed").exists(),
        timeout=60,
        what="the run to complete",
    )


def attempted(endpoint_id: str) -> WebhookDelivery:
    return wait_until(
        lambda: WebhookDelivery.objects.filter(endpoint_id=endpoint_id, attempts__gte=1, last_error__gt="").first(),
        timeout=60,
        what="an attempt with its outcome",
    )


def last_error_on_the_wire(api, endpoint_id: str) -> str:
    return api.get(f"/api/v1/webhooks/{endpoint_id}/deliveries").json()["deliveries"][0]["lastError"]


@pytest.mark.django_db(transaction=True)
def test_a_name_that_resolves_to_loopback_at_send_time_is_not_contacted(stack, api, settings, receivers):
    # Created while loopback was allowed; the senders allow no local network (the deployment's default).
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True
    settings.IMPO_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    del stack.env["IMPO_WEBHOOK_ALLOWED_NETWORKS"]
    receiver = receivers()
    endpoint = create(api, f"http://localhost:{receiver.port}/hooks/impo").json()
    stack.start_worker()
    stack.start_webhooks()

    complete_a_run(api)
    delivery = attempted(endpoint["id"])

    assert delivery.last_error == "target forbidden"
    assert last_error_on_the_wire(api, endpoint["id"]) == "target forbidden"
    assert receiver.requests() == []


@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed_and_errors_say_nothing_of_the_port(shared_webhooks, api, settings, receivers):
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True
    settings.IMPO_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    inner = receivers()
    redirecting = receivers((302,), location=inner.url)
    closed_port = f"http://127.0.0.1:{free_port()}/hooks/impo"
    redirected = create(api, redirecting.url).json()
    refused = create(api, closed_port).json()

    complete_a_run(api)
    redirect_attempt = attempted(redirected["id"])
    refused_attempt = attempted(refused["id"])

    assert (redirect_attempt.last_response_code, redirect_attempt.last_error) == (302, "HTTP 302")
    assert inner.requests() == []
    assert len(redirecting.requests()) >= 1
    # Sent to the address checked, still naming the URL's host.
    assert redirecting.requests()[0].headers["Host"] == f"127.0.0.1:{redirecting.port}"
    assert refused_attempt.last_error == "connection failed"
    assert last_error_on_the_wire(api, refused["id"]) == "connection failed"
