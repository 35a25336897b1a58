"""The sections of a benchmark run: one asked for alone (`--many-hosts`, `--streaming`, `--inflight`), or the
in-flight section, then the baselines, each scale's admission and execution figures, the first delta with few and
many sockets open, idle sockets, the same again over a long history, and recovery.

Imported once Django is set up (`python -m bench` does it), so that the settings it reads are the run's own.
"""

import argparse
import functools
from dataclasses import dataclass, field

from django.conf import settings

from bench import (
    admission,
    execution,
    harness,
    inflight,
    inflight_load,
    inflight_streaming,
    many_hosts,
    recovery,
    sockets,
    stream,
    uploads,
)
from devtools.stack import Stack


@dataclass(frozen=True)
class Sizes:
    admissions: int
    pgbench_seconds: int
    stream_samples: int
    runs: int
    claims: int
    recovery_samples: int
    lease_seconds: float
    sweep_seconds: float
    scales: tuple[int, ...]
    history_events: int
    baseline_samples: int
    many_sockets: int
    idle_sockets: int
    idle_hold_seconds: float


FULL = Sizes(2000, 10, 40, 300, 1000, 3, 30.0, 5.0, (10, 100, 1000), 100_000, 200, 1000, 2000, 30.0)
# A smoke run of every figure in about 3 minutes: one scale, no history section.
QUICK = Sizes(200, 3, 10, 30, 200, 1, 8.0, 1.0, (10,), 0, 40, 200, 500, 10.0)
FEW_SOCKETS = 10
HOSTS = ("host-a", "host-b")
# One web process a host: two in all, as on two machines.
WEB_PROCESSES_PER_HOST = 1


@dataclass
class Run:
    """One benchmark run: where it measures, how much, and the figures it has printed so far."""

    stack: Stack
    database: str
    sizes: Sizes
    # `--realtime`: only the baselines, first-delta and socket figures.
    realtime_only: bool = False
    figures: list[harness.Figure] = field(default_factory=list)

    def record(self, figure: harness.Figure) -> None:
        self.figures.append(figure)
        print(figure.line() + "".join(f"\n    {note}" for note in figure.notes), flush=True)


def load_history(owner_ids: list[int], total_events: int) -> None:
    """`total_events` past events spread over the owners' Main Chats, as long-lived accounts accumulate them."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM runtime_conversation WHERE owner_id = ANY(%s)", [owner_ids])
        conversation_ids = [row[0] for row in cursor.fetchall()]
        per_conversation = total_events // len(conversation_ids)
        for conversation_id in conversation_ids:
            cursor.execute(
                "INSERT INTO runtime_event (conversation_id, seq, type, payload, trace_id, created_at) "
                "SELECT c.id, c.last_event_seq + g, 'text.delta', '{\"delta\": \"history\"}', '', now() "
                "FROM runtime_conversation c, generate_series(1, %s) g WHERE c.id = %s",
                [per_conversation, conversation_id],
            )
            cursor.execute(
                "UPDATE runtime_conversation SET last_event_seq = last_event_seq + %s WHERE id = %s",
                [per_conversation, conversation_id],
            )
        cursor.execute("ANALYZE runtime_event")


def measure(run: Run, args: argparse.Namespace) -> None:
    """The sections the arguments ask for: one of the single-section flags, or the in-flight section then the rest."""
    inflight_sizes = inflight_load.QUICK if args.quick else inflight_load.FULL
    if args.many_hosts:
        many_sizes = many_hosts.QUICK if args.quick else many_hosts.FULL
        print(f"## many worker hosts on one database ({many_sizes})", flush=True)
        for figure in many_hosts.measure(run.stack, many_sizes):
            run.record(figure)
        return
    if args.uploads:
        print("## attachments: one 10 MiB photo on each store, alone and ten at once", flush=True)
        for figure in uploads.measure(run.stack, rounds=3 if args.quick else 10):
            run.record(figure)
        run.record(uploads.measure_first_delta(run.stack, rounds=3 if args.quick else 10))
        return
    if args.streaming:
        print(f"## streaming turns on one worker host ({inflight_sizes})", flush=True)
        for figure in inflight_streaming.streaming_side_by_side(run.stack, inflight_sizes):
            run.record(figure)
        return
    if args.inflight or not args.realtime:
        print(f"## in flight on one worker host ({inflight_sizes})", flush=True)
        for figure in inflight.measure(run.stack, inflight_sizes):
            run.record(figure)
        if args.inflight:
            return
    _after_in_flight(run)


def _after_in_flight(run: Run) -> None:
    sizes = run.sizes
    hosts = stream.start_hosts(run.stack, HOSTS, web_processes=WEB_PROCESSES_PER_HOST)
    print(f"## baselines ({len(hosts)} hosts: web process + Celery worker each, one queue each)", flush=True)
    group_send_baseline, celery_baseline = stream.baselines(run.stack, sizes.baseline_samples)
    run.record(group_send_baseline)
    run.record(celery_baseline)
    first_delta = functools.partial(_first_delta, run, hosts, group_send_baseline)

    first_users = None
    for scale in sizes.scales:
        print(f"\n## {scale} conversations", flush=True)
        users = harness.create_users(scale, f"scale{scale}")
        first_users = first_users or users
        _measure_at_scale(run, users)

    _first_delta_with_few_and_many_sockets(run, first_delta)
    _idle_sockets(run, hosts)
    if not run.realtime_only and sizes.history_events:
        history = f"{len(first_users)} conversations, {sizes.history_events:,} more events in the table"
        print(f"\n## {history}", flush=True)
        load_history([user_id for user_id, _ in first_users], sizes.history_events)
        _measure_at_scale(run, first_users)
        first_delta(first_users)
    if not run.realtime_only:
        print("\n## recovery", flush=True)
        run.record(
            recovery.measure(
                run.stack,
                first_users[0][0],
                lease_seconds=sizes.lease_seconds,
                sweep_seconds=sizes.sweep_seconds,
                samples=sizes.recovery_samples,
            )
        )


def _first_delta(run: Run, hosts, baseline: harness.Figure, users: list[tuple[int, str]]) -> list[float]:
    """The first delta of users[0]'s messages with every other user's socket open, spread over the hosts."""
    urls = [
        stream.subscription_url(hosts[index % len(hosts)].web_url, user_id, token)
        for index, (user_id, token) in enumerate(users[1:])
    ]
    stream.start_workers(run.stack, hosts)
    others = sockets.IdleSockets(urls).open()
    try:
        figure, latencies = stream.measure(
            hosts, users[0], others.open_count, samples=run.sizes.stream_samples, baseline=baseline
        )
    finally:
        others.close()
        stream.stop_workers(hosts)
    run.record(figure)
    return latencies


def _measure_at_scale(run: Run, users: list[tuple[int, str]]) -> None:
    if run.realtime_only:
        return
    sizes = run.sizes
    owner_ids = [user_id for user_id, _ in users]
    for figure in admission.measure(
        run.stack, users, run.database, count=sizes.admissions, seconds=sizes.pgbench_seconds
    ):
        run.record(figure)
    harness.retire_unfinished_runs()
    for figure in execution.measure(run.stack, owner_ids, runs=sizes.runs, claims=sizes.claims):
        run.record(figure)


def _first_delta_with_few_and_many_sockets(run: Run, first_delta) -> None:
    many_sockets = run.sizes.many_sockets
    print(f"\n## first delta with {FEW_SOCKETS} and with {many_sockets} sockets open", flush=True)
    socket_users = harness.create_users(many_sockets, "sockets")
    few = harness.median_and_p95(first_delta(socket_users[:FEW_SOCKETS]))[0] * 1000
    many = harness.median_and_p95(first_delta(socket_users))[0] * 1000
    run.record(
        harness.Figure(
            f"first text.delta with {many_sockets - 1} other sockets open (median)",
            many,
            "ms",
            baseline_name=f"with {FEW_SOCKETS - 1} (same run)",
            baseline=few,
            higher_is_better=False,
        )
    )


def _idle_sockets(run: Run, hosts) -> None:
    print(f"\n## {run.sizes.idle_sockets} idle sockets", flush=True)
    idle_users = harness.create_users(run.sizes.idle_sockets, "idle")
    run.record(
        sockets.measure_idle(
            [
                stream.subscription_url(hosts[index % len(hosts)].web_url, user_id, token)
                for index, (user_id, token) in enumerate(idle_users)
            ],
            sockets.web_process_ids([host.web.process.pid for host in hosts]),
            hold_seconds=run.sizes.idle_hold_seconds,
            interval_seconds=settings.IMPO_SOCKET_CATCH_UP_SECONDS,
        )
    )
