"""`/metrics`: Prometheus text exposition, computed from the shared state at each scrape.

Several web and worker processes run at once, so nothing process-local is a source: runs, reconciliations and claim
latency are read from PostgreSQL when scraped, and provider failures from the counts all processes add to in Redis
(`rebyte.provider_errors`). Staff (session or their token) or the `IMPO_METRICS_TOKEN` bearer token may read it.
"""

import hmac
import logging
from datetime import timedelta

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Count
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from core.authentication import bearer_key, request_user
from core.error_codes import ErrorCode
from core.errors import error_response, unauthorized
from rebyte import provider_errors
from rebyte.models import CreationIntent, IntentState
from runtime.models import Run, RunState
from runtime.services import claims
from tools.models import ToolCall, ToolCallState

logger = logging.getLogger(__name__)

CLAIM_LATENCY_QUANTILES = (0.5, 0.9, 0.99)


class ImpoCollector(Collector):
    def collect(self):
        now = timezone.now()
        yield from self._runs(now)
        yield self._pending_reconciliations()
        yield from self._claim_latency()
        provider_failures = self._provider_errors()
        if provider_failures is not None:
            yield provider_failures

    def _runs(self, now):
        by_state = dict(Run.objects.values_list("state").annotate(count=Count("*")).order_by())
        runs = GaugeMetricFamily("impo_runs", "Runs by state.", labels=["state"])
        for state in RunState.values:
            runs.add_metric([state], by_state.get(state, 0))
        yield runs
        queued = Run.objects.aggregate(
            ready=Count("id", filter=claims.queued_and_ready()),
            backing_off=Count("id", filter=claims.backing_off()),
        )
        yield GaugeMetricFamily(
            "impo_queue_depth",
            "Queued runs a worker may claim now (not backing off from a provider outage).",
            value=queued["ready"],
        )
        yield GaugeMetricFamily(
            "impo_runs_backing_off", "Queued runs waiting out a provider outage's backoff.", value=queued["backing_off"]
        )

    def _pending_reconciliations(self):
        pending = GaugeMetricFamily(
            "impo_pending_reconciliations",
            "What waits for reconciliation: parked runs, remote creations of unknown outcome, uncertain tool calls.",
            labels=["kind"],
        )
        pending.add_metric(["run"], Run.objects.filter(state=RunState.PENDING_RECONCILIATION).count())
        pending.add_metric(
            ["creation_intent"], CreationIntent.objects.filter(state=IntentState.PENDING_RECONCILIATION).count()
        )
        pending.add_metric(["tool_call"], ToolCall.objects.filter(state=ToolCallState.UNCERTAIN).count())
        return pending

    def _claim_latency(self):
        """Admission to first claim, over the runs first claimed within the window (a rolling view, not a counter)."""
        window = settings.IMPO_METRICS_WINDOW_SECONDS
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*), percentile_cont(%s::float8[]) WITHIN GROUP (ORDER BY latency), max(latency)"
                f" FROM (SELECT extract(epoch FROM started_at - created_at)::float8 AS latency"
                f"       FROM {Run._meta.db_table} WHERE started_at >= %s) AS claimed",
                [list(CLAIM_LATENCY_QUANTILES), timezone.now() - timedelta(seconds=window)],
            )
            claimed, quantiles, longest = cursor.fetchone()
        yield GaugeMetricFamily(
            "impo_run_claims_recent", f"Runs first claimed in the last {window:g} seconds.", value=claimed
        )
        latency = GaugeMetricFamily(
            "impo_run_claim_latency_seconds",
            f"Admission to first claim of the runs first claimed in the last {window:g} seconds, by quantile.",
            labels=["quantile"],
        )
        if claimed:
            for quantile, value in zip(CLAIM_LATENCY_QUANTILES, quantiles, strict=True):
                latency.add_metric([str(quantile)], value)
            latency.add_metric(["1"], longest)
        yield latency

    def _provider_errors(self):
        try:
            counts = provider_errors.counts()
        except redis.RedisError as exc:
            logger.warning("provider error counts unavailable: %s", exc)
            return None
        failures = CounterMetricFamily(
            "impo_provider_errors",
            "Failed provider calls by operation and kind (refused, unavailable, unknown_outcome), all processes.",
            labels=["operation", "kind"],
        )
        for (operation, kind), count in sorted(counts.items()):
            failures.add_metric([operation, kind], count)
        return failures


registry = CollectorRegistry(auto_describe=False)
registry.register(ImpoCollector())


def _refusal(request) -> JsonResponse | None:
    """None for the metrics token or a staff member (session or token); else 401, or 403 for other users."""
    key = bearer_key(request.headers.get("Authorization", ""))
    token = settings.IMPO_METRICS_TOKEN
    if key and token and hmac.compare_digest(key.encode(), token.encode()):
        return None
    user = request_user(request)
    if user is None:
        return unauthorized(request)
    if not user.is_staff:
        return error_response(request, ErrorCode.FORBIDDEN, "Metrics are for staff.")
    return None


def metrics(request):
    if request.method not in ("GET", "HEAD"):
        return error_response(request, ErrorCode.METHOD_NOT_ALLOWED, "Use GET.")
    try:
        refusal = _refusal(request)
        if refusal is not None:
            return refusal
        exposition = generate_latest(registry)
    except DatabaseError:
        logger.exception("metrics could not be read")
        return error_response(request, ErrorCode.SERVICE_UNAVAILABLE, "The metrics could not be read.")
    return HttpResponse(exposition, content_type=CONTENT_TYPE_LATEST)
