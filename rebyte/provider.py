import os
import threading

from django.conf import settings

from core import telemetry
from core.database import release_connection
from rebyte import provider_errors
from rebyte.client import RebyteGateway

_gateways: dict[tuple, RebyteGateway] = {}
_gateways_lock = threading.Lock()


def provider_gateway() -> RebyteGateway:
    """This process's gateway to whichever Rebyte the deployment points at (the double under IMPO_RUNTIME=echo).

    One per process and settings, shared by its threads and never closed: building the SDK client costs ~40 ms
    of CPU (its TLS context), and its pool keeps connections to the provider open between runs (sized for the runs a
    worker drives at once). Before each call the thread's database connection goes back to the pool. Keyed by pid, so
    a prefork child builds its own rather than sharing its parent's sockets.
    """
    key = (
        os.getpid(),
        settings.REBYTE_BASE_URL,
        settings.REBYTE_API_KEY,
        settings.REBYTE_TIMEOUT_SECONDS,
        settings.REBYTE_STREAM_TIMEOUT_SECONDS,
        settings.REBYTE_REASONING_SUMMARY,
    )
    with _gateways_lock:
        gateway = _gateways.get(key)
        if gateway is None:
            gateway = _gateways[key] = RebyteGateway(
                settings.REBYTE_BASE_URL,
                settings.REBYTE_API_KEY,
                timeout=settings.REBYTE_TIMEOUT_SECONDS,
                stream_timeout=settings.REBYTE_STREAM_TIMEOUT_SECONDS,
                on_failure=provider_errors.record,
                span=telemetry.span,
                before_call=release_connection,
                # Each run in flight holds a live stream and makes one call at a time.
                connections=2 * settings.IMPO_WORKER_CONCURRENCY + 10,
                reasoning_summary=settings.REBYTE_REASONING_SUMMARY or None,
            )
        return gateway
