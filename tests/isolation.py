"""Loaded with `-p tests.isolation`, before Django reads its settings.

Each test session gets its own Celery queue and test database, in a Redis database apart from a
running stack's, so two sessions on one machine (or a session beside `make run`) never consume
each other's wake-ups or drop each other's tables.
"""

import os

_session = f"{os.getpid()}"
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("CELERY_QUEUE", f"impo-test-{_session}")
os.environ.setdefault("DJANGO_TEST_DATABASE", f"test_impo_{_session}")

# The device tests drive the device path, not the approval in front of it (on by default for play_sound):
# the harness turns that approval off, and the approval tests turn it back on.
os.environ.setdefault("IMPO_TOOL_APPROVAL", "play_sound=never")
