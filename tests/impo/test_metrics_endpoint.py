"""`/metrics`, scraped from the real web process and read with Prometheus's own text parser: the figures are what
the database and the other processes (a worker meeting provider faults) made them, and only staff or the scraper's
token may read them."""

import secrets

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from devtools.stack import wait_until
from runtime.models import Run, RunState
from tests.client import bearer, post_message, token_of, web_client
from tests.factories import UserFactory
from tests.security.handshake import session_cookie

# The SDK tries an idempotent read this many times (its own retries) before the listing counts as failed.
LISTING_ATTEMPTS = 3
MESSAGES = 3


@pytest.fixture(autouse=True)
def metrics_token(stack):
    """The scraper's token, in the stack's environment before any of its web servers starts (autouse)."""
    token = secrets.token_urlsafe(32)
    stack.env["IMPO_METRICS_TOKEN"] = token
    return token


def metrics_answer(web: str, headers: dict | None = None) -> httpx.Response:
    # 30 s: a web process just started may take a while to answer its first requests on a loaded machine.
    return httpx.get(f"{web}/metrics", headers=headers, timeout=30)


def scrape(web: str, headers: dict) -> dict[str, dict[tuple, float]]:
    """{family name: {sorted label items: value}} of one scrape."""
    response = metrics_answer(web, headers)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain")
    return {
        family.name: {tuple(sorted(sample.labels.items())): sample.value for sample in family.samples}
        for family in text_string_to_metric_families(response.text)
    }


def provider_errors(figures, operation: str, kind: str) -> float:
    return figures.get("impo_provider_errors", {}).get((("kind", kind), ("operation", operation)), 0)


def post_messages(web: str, key: str, count: int) -> None:
    with web_client(web, key) as client:
        for number in range(count):
            post_message(client, f"message {number}", client_message_id=f"m-{number}")


def test_metrics_count_queued_runs_a_parked_run_its_pending_creation_and_the_provider_failures(
    stack, web, metrics_token, rebyte_double
):
    owner_key = token_of(UserFactory())
    before = scrape(web, bearer(metrics_token))
    post_messages(web, owner_key, MESSAGES)

    queued = scrape(web, bearer(metrics_token))
    assert queued["impo_queue_depth"][()] == MESSAGES
    assert queued["impo_runs"][(("state", "queued"),)] == MESSAGES
    assert sum(queued["impo_runs"].values()) == MESSAGES
    assert queued["impo_run_claims_recent"][()] == 0

    # The agent's create loses its answer and the listing that would settle it fails (5xx): the first run parks.
    # A parked run does not hold its conversation: the two behind it go on with a new agent, created deliberately.
    rebyte_double.fault("create_agent", "drop_response")
    rebyte_double.fault("list_agents", "http_error", status=503, times=LISTING_ATTEMPTS)
    stack.start_worker()
    wait_until(
        lambda: (
            Run.objects.filter(state=RunState.PENDING_RECONCILIATION).count() == 1
            and Run.objects.filter(state=RunState.COMPLETED).count() == MESSAGES - 1
        ),
        timeout=90,
        what="a parked run and the others completed",
    )

    after = scrape(web, bearer(metrics_token))
    assert after["impo_runs"][(("state", "pending_reconciliation"),)] == 1
    assert after["impo_runs"][(("state", "completed"),)] == MESSAGES - 1
    assert after["impo_runs"].get((("state", "queued"),), 0) == 0
    assert after["impo_queue_depth"][()] == 0
    assert after["impo_pending_reconciliations"][(("kind", "run"),)] == 1
    assert after["impo_pending_reconciliations"][(("kind", "creation_intent"),)] == 1
    assert after["impo_pending_reconciliations"][(("kind", "tool_call"),)] == 0
    assert after["impo_run_claims_recent"][()] >= MESSAGES
    latencies = after["impo_run_claim_latency_seconds"]
    assert set(latencies) == {(("quantile", q),) for q in ("0.5", "0.9", "0.99", "1")}
    assert all(value >= 0 for value in latencies.values())
    assert (
        provider_errors(after, "create_agent", "unknown_outcome")
        - provider_errors(before, "create_agent", "unknown_outcome")
        == 1
    )
    assert (
        provider_errors(after, "list_agents", "unavailable") - provider_errors(before, "list_agents", "unavailable")
        == 1
    )


def test_metrics_are_refused_to_anonymous_callers_wrong_tokens_and_users_who_are_not_staff(stack, web):
    anonymous = metrics_answer(web)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")

    assert metrics_answer(web, bearer("not-the-metrics-token")).status_code == 401

    user = UserFactory()
    by_token = metrics_answer(web, bearer(token_of(user)))
    assert by_token.status_code == 403
    assert by_token.json()["error"]["code"] == "forbidden"
    assert "requestId" in by_token.json()
    by_session = metrics_answer(web, {"Cookie": session_cookie(web, user)})
    assert by_session.status_code == 403


def test_staff_read_metrics_with_their_session_or_their_token(stack, web):
    staff = UserFactory(is_staff=True)

    assert "impo_queue_depth" in scrape(web, bearer(token_of(staff)))
    assert "impo_queue_depth" in scrape(web, {"Cookie": session_cookie(web, staff)})
