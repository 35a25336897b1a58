"""Production settings: no known secret key, and Django's deployment checks pass with DEBUG off."""

import os
import secrets
import subprocess
import sys

import pytest

from impo.devstack import REPO_ROOT

pytestmark = pytest.mark.processes  # each test runs manage.py in a process of its own

PRODUCTION = {
    "DJANGO_DEBUG": "false",
    "DJANGO_ALLOWED_HOSTS": "impo.example",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://impo.example",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "true",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**inherited, "DJANGO_SETTINGS_MODULE": "impo.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_app_refuses_to_start_with_debug_off_and_no_secret_key():
    result = manage("check", **PRODUCTION)

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr


def test_the_deployment_checks_pass_with_production_settings():
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION, DJANGO_SECRET_KEY=secrets.token_urlsafe(50)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_local_checkout_starts_with_debug_on_and_no_configuration():
    result = manage("check")

    assert result.returncode == 0, result.stderr
