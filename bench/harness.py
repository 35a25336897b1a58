"""The benchmark's own world: a scratch database, Redis database and Celery queue, and the real processes.

Nothing is shared with `make run` or a test session: the database `impo_bench_<pid>` is created, migrated and
dropped by the run, the Celery queue and Redis database are the run's own. Processes are the tests' helpers
(the web server, Celery workers, the sweeper, the Rebyte double), so a benchmark measures what the suite verifies.
"""

import os
import secrets
import statistics
import subprocess
import sys
from dataclasses import dataclass, field

# The server of the benchmark's scratch database: libpq's own variables, as `createdb`/`dropdb` read them.
PGHOST = os.environ.get("PGHOST", "127.0.0.1")
PGPORT = os.environ.get("PGPORT", "5432")
PGUSER = os.environ.get("PGUSER", "postgres")


def configure_process_environment() -> str:
    """Points this process (and every child it starts) at the benchmark's own services; returns the DB name."""
    database = f"impo_bench_{os.getpid()}"
    os.environ.update(
        {
            "DATABASE_URL": f"postgres://{PGUSER}@{PGHOST}:{PGPORT}/{database}",
            # A Redis database of the run's own unless told another (two runs at once on one machine).
            "REDIS_URL": os.environ.get("IMPO_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
            "CELERY_QUEUE": f"impo-bench-{os.getpid()}",
            "DJANGO_SETTINGS_MODULE": "impo.settings",
            # As deployed, like the processes it starts: with DEBUG every statement run here (the claims, the
            # in-process runs and their baselines) would also be logged in memory.
            "DJANGO_DEBUG": "false",
            "DJANGO_HTTPS": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "LOG_LEVEL": "WARNING",
        }
    )
    return database


def create_database(database: str) -> None:
    subprocess.run(["createdb", "-h", PGHOST, "-p", PGPORT, "-U", PGUSER, database], check=True)
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], check=True)


def drop_database(database: str) -> None:
    from django.db import connections

    connections.close_all()
    subprocess.run(
        ["dropdb", "-h", PGHOST, "-p", PGPORT, "-U", PGUSER, "--if-exists", "--force", database], check=False
    )


@dataclass
class Figure:
    """One measured quantity beside the baseline it is judged against, measured in the same run."""

    name: str
    value: float
    unit: str
    baseline_name: str = ""
    baseline: float | None = None
    # True when more is better (throughput); False for latencies and durations.
    higher_is_better: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if not self.baseline:
            return None
        return self.value / self.baseline

    def line(self) -> str:
        text = f"{self.name}: {self.value:,.2f} {self.unit}"
        if self.baseline is not None:
            text += f" | baseline {self.baseline_name}: {self.baseline:,.2f} {self.unit} | ratio {self.ratio:.3f}"
        return text


def median_and_p95(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def create_users(count: int, prefix: str) -> list[tuple[int, str]]:
    """`count` users with API tokens, in bulk: (user id, token key)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user_model = get_user_model()
    users = user_model.objects.bulk_create(
        [user_model(username=f"{prefix}-{index}", password="!") for index in range(count)]
    )
    tokens = Token.objects.bulk_create([Token(user=user, key=Token.generate_key()) for user in users])
    return [(token.user_id, token.key) for token in tokens]


def retire_unfinished_runs() -> None:
    """Admission and claim benchmarks leave thousands of queued or leased runs behind. Executing them would take
    minutes and measure nothing new, and the sweeper would hand them to the next benchmark's workers, so their
    wake-ups are purged and they are marked cancelled directly (bench bookkeeping, not a product write path).

    That one UPDATE leaves tens of thousands of dead run rows at once (pgbench admits many); the table is vacuumed
    right after, as autovacuum would within its minute, so the next figure does not measure the bookkeeping."""
    from django.db import connection

    from impo.celery import app

    app.control.purge()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runtime_run SET state = 'cancelled', finished_at = now() WHERE state IN ('queued', 'running')"
        )
        cursor.execute("VACUUM (ANALYZE) runtime_run")
