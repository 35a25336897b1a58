from django.conf import settings

from rebyte.client import RebyteClient


def provider_client() -> RebyteClient:
    """The client for whichever Rebyte this deployment points at (the double under IMPO_RUNTIME=echo)."""
    return RebyteClient(
        settings.REBYTE_BASE_URL,
        settings.REBYTE_API_KEY,
        timeout=settings.REBYTE_TIMEOUT_SECONDS,
        stream_timeout=settings.REBYTE_STREAM_TIMEOUT_SECONDS,
    )
