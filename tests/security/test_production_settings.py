"""Secure by default: with nothing configured the app is a deployment (DEBUG off, HTTPS, https-only targets) that
refuses to start without a key of its own; DEBUG is asked for, relaxes no rule by itself, and is served on loopback
only. Django's deployment checks pass with production settings."""

import os
import secrets
import subprocess
import sys

import pytest

from devtools.stack import REPO_ROOT, VENV_BIN

pytestmark = pytest.mark.processes  # each test runs manage.py or the web server in a process of its own

# What a deployment sets: DEBUG is not among it (off unless asked for).
PRODUCTION = {
    "DJANGO_ALLOWED_HOSTS": "impo.example",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://impo.example",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "true",
}


def _environment(env: dict[str, str]) -> dict[str, str]:
    inherited = {name: value for name, value in os.environ.items() if not name.startswith(("DJANGO_", "IMPO_"))}
    return {**inherited, **env}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=_environment({"DJANGO_SETTINGS_MODULE": "impo.settings", **env}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def start_web_server(**env: str) -> subprocess.CompletedProcess:
    """The web server as `make run` and the Procfile start it; one that refuses exits before it binds or forks."""
    return subprocess.run(
        [str(VENV_BIN / "gunicorn"), "-c", "python:impo.web_server", "impo.asgi:application"],
        cwd=REPO_ROOT,
        env=_environment({"IMPO_WEB_PORT": "0", **env}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_with_nothing_configured_the_app_refuses_to_start_without_a_secret_key():
    result = manage("check")

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr


def test_the_local_development_key_is_refused_outside_debug():
    result = manage("check", **PRODUCTION, DJANGO_SECRET_KEY="impo-local-development-only")

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr


def test_the_deployment_checks_pass_with_production_settings():
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION, DJANGO_SECRET_KEY=secrets.token_urlsafe(50)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_developer_asking_for_debug_starts_with_no_other_configuration():
    result = manage("check", DJANGO_DEBUG="true")

    assert result.returncode == 0, result.stderr


def test_debug_relaxes_no_rule_by_itself():
    shown = "from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, s.IMPO_WEBHOOK_ALLOW_HTTP)"

    result = manage("shell", "--no-imports", "-c", shown, DJANGO_DEBUG="true")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]  # HTTPS, and https-only webhook and push targets


def test_the_web_server_refuses_to_serve_debug_beyond_loopback():
    result = start_web_server(DJANGO_DEBUG="true", IMPO_WEB_HOST="0.0.0.0")

    assert result.returncode == 1
    assert "refusing to start: DJANGO_DEBUG is on and the server would listen on 0.0.0.0" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Booting worker" not in result.stderr  # refused in the master, before any worker


def test_the_web_server_refuses_to_start_without_a_secret_key():
    result = start_web_server(IMPO_WEB_HOST="0.0.0.0", **PRODUCTION)

    assert result.returncode == 1
    assert "refusing to start: DJANGO_SECRET_KEY must be set" in result.stderr
    assert "Traceback" not in result.stderr
