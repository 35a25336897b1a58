"""Loaded with `-p tests.isolation`, before Django reads its settings.

Each test session gets its own Celery queue and test database, in a Redis database apart from a
running stack's, so two sessions on one machine (or a session beside `make run`) never consume
each other's wake-ups or drop each other's tables.

Under pytest-xdist every worker (`gw0`, `gw1`, …) is a session of its own: it inherits the controller's
environment, so it takes its own queue (the controller's name plus its worker id) and its own Redis
database, 8 + its index (8–14; a serial session keeps 15). pytest-django suffixes the test database with
the worker id. Users, limits, subscriber counts and heartbeats in Redis are keyed by ids that restart in
every test database, which is why workers cannot share a Redis database.
"""

import os
import secrets
from urllib.parse import urlsplit, urlunsplit

FIRST_WORKER_REDIS_DATABASE = 8
SERIAL_REDIS_DATABASE = 15

_session = f"{os.getpid()}"
os.environ.setdefault("REDIS_URL", f"redis://127.0.0.1:6379/{SERIAL_REDIS_DATABASE}")
os.environ.setdefault("CELERY_QUEUE", f"impo-test-{_session}")
os.environ.setdefault("DJANGO_TEST_DATABASE", f"test_impo_{_session}")

_worker = os.environ.get("PYTEST_XDIST_WORKER")  # set by xdist in a worker before it loads any plugin
if _worker:
    _redis_database = FIRST_WORKER_REDIS_DATABASE + int(_worker.removeprefix("gw"))
    if _redis_database >= SERIAL_REDIS_DATABASE:
        raise RuntimeError(f"xdist worker {_worker}: at most 7 workers, one Redis database (8–14) each")
    _redis = urlsplit(os.environ["REDIS_URL"])
    os.environ["REDIS_URL"] = urlunsplit(_redis._replace(path=f"/{_redis_database}"))
    os.environ["CELERY_QUEUE"] = f"{os.environ['CELERY_QUEUE']}-{_worker}"

# The test process serves Django's test client over plain HTTP, with a key of its own: without these the settings
# are a deployment's (HTTPS redirects, and no start at all without a key). DEBUG stays off, as deployed.
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
os.environ.setdefault("DJANGO_HTTPS", "false")

# The device tests drive the device path, not the approval in front of it (on by default for play_sound):
# the harness turns that approval off, and the approval tests turn it back on.
os.environ.setdefault("IMPO_TOOL_APPROVAL", "play_sound=never")
