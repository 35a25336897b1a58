"""Provider failures are counted where the gateway sorts them, in Redis, without ever getting in the call's way."""

import pytest

from devtools.stack import free_port
from rebyte import provider_errors
from rebyte.failures import Unavailable
from rebyte.provider import provider_gateway

# The SDK tries an idempotent read this many times (its own retries) before the gateway sorts the failure.
READ_ATTEMPTS = 3


def unavailable_listings() -> int:
    return provider_errors.counts().get(("list_agents", "unavailable"), 0)


def test_a_provider_5xx_is_counted_once_per_failed_call_by_operation_and_kind(rebyte_double):
    before = unavailable_listings()
    rebyte_double.fault("list_agents", "http_error", status=503, times=READ_ATTEMPTS)

    with pytest.raises(Unavailable):
        provider_gateway().list_agents()

    assert unavailable_listings() == before + 1


def test_a_provider_failure_is_raised_as_itself_when_redis_cannot_be_reached(rebyte_double, settings, monkeypatch):
    # The counter rests after a Redis error; the rest ends with this test.
    monkeypatch.setattr(provider_errors, "_resting_until", provider_errors._resting_until)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    rebyte_double.fault("list_agents", "http_error", status=503, times=READ_ATTEMPTS)

    with pytest.raises(Unavailable) as failure:
        provider_gateway().list_agents()

    assert failure.value.status == 503
