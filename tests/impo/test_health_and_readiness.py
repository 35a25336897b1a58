import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_health_needs_no_authentication():
    response = APIClient().get("/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_reports_each_dependency(temporal_address, settings):
    settings.TEMPORAL_ADDRESS = temporal_address

    response = APIClient().get("/ready")

    assert response.status_code == 200, response.json()
    assert response.json()["checks"] == {"database": "ok", "redis": "ok", "temporal": "ok"}


def test_ready_is_unavailable_when_temporal_is_unreachable(settings):
    settings.TEMPORAL_ADDRESS = "127.0.0.1:1"

    response = APIClient().get("/ready")

    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["temporal"] == "failing"
    assert body["error"]["code"] == "not_ready"
    assert body["error"]["retryable"] is True
