from django.conf import settings

from impo import provider_errors, telemetry
from rebyte.client import RebyteGateway


def provider_gateway() -> RebyteGateway:
    """The gateway to whichever Rebyte this deployment points at (the double under IMPO_RUNTIME=echo)."""
    return RebyteGateway(
        settings.REBYTE_BASE_URL,
        settings.REBYTE_API_KEY,
        timeout=settings.REBYTE_TIMEOUT_SECONDS,
        stream_timeout=settings.REBYTE_STREAM_TIMEOUT_SECONDS,
        on_failure=provider_errors.record,
        span=telemetry.span,
    )
