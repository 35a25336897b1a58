"""The demo superuser's password is published, so it is created only when a local run asks for it explicitly."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("debug", [False, True])
def test_the_demo_user_is_refused_unless_asked_for_whatever_debug_says(settings, monkeypatch, debug):
    settings.DEBUG = debug
    monkeypatch.delenv("IMPO_DEMO_USER_FORCE", raising=False)

    with pytest.raises(CommandError, match="IMPO_DEMO_USER_FORCE"):
        call_command("ensure_demo_user")
    assert not get_user_model().objects.filter(username="demo").exists()


def test_a_local_run_asking_for_the_demo_user_gets_it(monkeypatch):
    monkeypatch.setenv("IMPO_DEMO_USER_FORCE", "true")

    call_command("ensure_demo_user")

    assert get_user_model().objects.get(username="demo").is_superuser
