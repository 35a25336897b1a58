"""The Celery baseline: a trivial task on the same broker, answered through Redis (`celery -A bench.celery_ping`).

Publishing a wake-up and a worker picking it up is one hop of every run's path; this measures that hop bare, with
the same acknowledgement settings as Impo's workers and no database.
"""

import os
from functools import cache

import redis
from celery import Celery

app = Celery("bench-ping", broker=os.environ["REDIS_URL"])
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
)


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REDIS_URL"])


@app.task(name="bench.ping")
def ping(reply_key: str) -> None:
    _redis().lpush(reply_key, "pong")
