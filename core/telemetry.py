"""Traces: one tracer provider per process, configured from the standard OpenTelemetry environment.

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; then spans leave through
the standard OTLP/HTTP exporter behind a batch processor, flushed when the process shuts down. Off, `span()` does
nothing and reads nothing (no parent lookup, no trace id), so tracing costs nothing by default.

A run crosses processes (admitted by the web, executed by a worker, perhaps a successor after a crash, its device
invocations answered over HTTP later), so the W3C `traceparent` of its admission is persisted with it and every
later span of the run names that context as its parent, whatever process starts it.
"""

import functools
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

logger = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACER_NAME = "impo"

_propagator = TraceContextTextMapPropagator()
_provider = None


def exporting() -> bool:
    """Whether the environment asks for spans to be exported."""
    return any(os.environ.get(variable) for variable in ENDPOINT_VARIABLES)


def configure(service_name: str) -> None:
    """Installs this process's tracer provider when an OTLP endpoint is configured; once per process.

    Called where a process starts serving: the ASGI app, each prefork child of a Celery worker, the sweeper.
    """
    global _provider
    if _provider is not None or not exporting():
        return
    # Imported here so a process that exports nothing never loads the SDK and the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME, when set, names the service; otherwise the process says what it is.
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=True)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    logger.info("exporting traces as %s", service_name)


def shutdown() -> None:
    """Flushes and stops the exporter, for processes that end without running atexit (prefork children)."""
    if _provider is not None:
        _provider.shutdown()


def enabled() -> bool:
    return _provider is not None


def _tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def span(
    name: str,
    attributes: dict | None = None,
    *,
    parent: Callable[[], str] | None = None,
) -> Iterator[trace.Span]:
    """A span around a block; an exception leaving it is recorded on the span and marks it failed.

    `parent` returns a persisted `traceparent` to continue (a run's, an invocation's); it is called only
    while tracing, and an empty one continues the current context instead.
    """
    if _provider is None:
        yield trace.INVALID_SPAN
        return
    context = None
    if parent is not None:
        carried = parent()
        if carried:
            context = _propagator.extract({"traceparent": carried})
    with _tracer().start_as_current_span(name, context=context, attributes=_clean(attributes)) as current:
        yield current


def traced(
    name: str,
    *,
    attributes: Callable[..., dict] | None = None,
    parent: Callable[..., str] | None = None,
    outcome: Callable[[object], dict] | None = None,
):
    """`span()` around a function; `attributes` and `parent` get its arguments, `outcome` what it returned."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if _provider is None:
                return function(*args, **kwargs)
            with span(
                name,
                attributes(*args, **kwargs) if attributes else None,
                parent=(lambda: parent(*args, **kwargs)) if parent else None,
            ) as current:
                result = function(*args, **kwargs)
                if outcome is not None:
                    current.set_attributes(_clean(outcome(result)))
                return result

        return wrapper

    return decorate


def annotate(attributes: dict) -> None:
    """Adds attributes to the current span (nothing when tracing is off)."""
    if _provider is not None:
        trace.get_current_span().set_attributes(_clean(attributes))


def traceparent() -> str:
    """The current span's context as a W3C `traceparent`, to persist; '' when tracing is off."""
    if _provider is None:
        return ""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent", "")


def current_trace_id() -> str:
    """The current trace id (32 hex digits), or '' outside any span."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else ""


def trace_id_of(traceparent_value: str) -> str:
    """The trace id a persisted `traceparent` names ('' for none): `00-<trace id>-<span id>-<flags>`."""
    parts = traceparent_value.split("-")
    return parts[1] if len(parts) == 4 else ""


def _clean(attributes: dict | None) -> dict:
    # OpenTelemetry takes str, bool, int and float values only: ids (UUIDs) are sent as text, None is left out.
    if not attributes:
        return {}
    return {
        key: value if isinstance(value, (str, bool, int, float)) else str(value)
        for key, value in attributes.items()
        if value is not None
    }
