"""The demo superuser's password is published, so only a local (DEBUG) run may create it."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_the_demo_user_is_refused_with_debug_off(settings, monkeypatch):
    settings.DEBUG = False
    monkeypatch.delenv("IMPO_DEMO_USER_FORCE", raising=False)

    with pytest.raises(CommandError, match="DEBUG off"):
        call_command("ensure_demo_user")
    assert not get_user_model().objects.filter(username="demo").exists()


def test_the_demo_user_is_created_on_a_local_run(settings):
    settings.DEBUG = True

    call_command("ensure_demo_user")

    assert get_user_model().objects.get(username="demo").is_superuser


def test_a_local_run_with_debug_off_may_force_the_demo_user(settings, monkeypatch):
    settings.DEBUG = False
    monkeypatch.setenv("IMPO_DEMO_USER_FORCE", "true")

    call_command("ensure_demo_user")

    assert get_user_model().objects.filter(username="demo").exists()
