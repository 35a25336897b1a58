"""`python -m bench [--quick]`: every figure against its baseline, at 10, 100 and 1000 conversations and again
with 100k events in the table. Prints the figures; `make bench` runs it. Results are recorded in RESULTS.md.
"""

import argparse
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import harness, inflight, inflight_load, inflight_streaming, many_hosts, sockets


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


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    postgres = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {postgres}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run of every benchmark")
    parser.add_argument("--realtime", action="store_true", help="only the baselines, first-delta and socket figures")
    parser.add_argument("--inflight", action="store_true", help="only hundreds of long turns on one worker host")
    parser.add_argument(
        "--streaming", action="store_true", help="only the streaming turns on one worker host, claims bounded or not"
    )
    parser.add_argument(
        "--many-hosts", action="store_true", help="only several worker hosts on one database: its CPU per turn"
    )
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    inflight_sizes = inflight_load.QUICK if args.quick else inflight_load.FULL

    # A stopped benchmark (Ctrl-C, SIGTERM, a timeout) still stops its processes and drops its database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Thousands of sockets, both ends on this machine; the servers started below inherit the limit.
    sockets.raise_descriptor_limit()
    database = harness.configure_process_environment()
    harness.create_database(database)
    import django

    django.setup()
    from django.conf import settings

    from bench import admission, execution, recovery, stream
    from impo.celery import app
    from impo.devstack import RebyteDouble, Stack

    double = RebyteDouble()
    stack = Stack(database_name=database, double=double, redis_url=os.environ["REDIS_URL"])
    app.control.purge()
    figures: list[harness.Figure] = []
    started = time.monotonic()
    print(f"# Impo benchmarks, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n# {machine()}\n", flush=True)

    def record(figure: harness.Figure) -> None:
        figures.append(figure)
        print(figure.line() + "".join(f"\n    {note}" for note in figure.notes), flush=True)

    try:
        if args.many_hosts:
            many_sizes = many_hosts.QUICK if args.quick else many_hosts.FULL
            print(f"## many worker hosts on one database ({many_sizes})", flush=True)
            for figure in many_hosts.measure(stack, many_sizes):
                record(figure)
            return
        if args.streaming:
            print(f"## streaming turns on one worker host ({inflight_sizes})", flush=True)
            for figure in inflight_streaming.streaming_side_by_side(stack, inflight_sizes):
                record(figure)
            return
        if args.inflight or not args.realtime:
            print(f"## in flight on one worker host ({inflight_sizes})", flush=True)
            for figure in inflight.measure(stack, inflight_sizes):
                record(figure)
            if args.inflight:
                return
        hosts = stream.start_hosts(stack, HOSTS, web_processes=WEB_PROCESSES_PER_HOST)
        print(f"## baselines ({len(hosts)} hosts: web process + Celery worker each, one queue each)", flush=True)
        group_send_baseline, celery_baseline = stream.baselines(stack, sizes.baseline_samples)
        record(group_send_baseline)
        record(celery_baseline)

        def first_delta(users: list[tuple[int, str]]) -> list[float]:
            """The first delta of users[0]'s messages with every other user's socket open, spread over the hosts."""
            urls = [
                stream.subscription_url(hosts[index % len(hosts)].web_url, user_id, token)
                for index, (user_id, token) in enumerate(users[1:])
            ]
            stream.start_workers(stack, hosts)
            others = sockets.IdleSockets(urls).open()
            try:
                figure, latencies = stream.measure(
                    hosts, users[0], others.open_count, samples=sizes.stream_samples, baseline=group_send_baseline
                )
            finally:
                others.close()
                stream.stop_workers(hosts)
            record(figure)
            return latencies

        def measure_everything(users: list[tuple[int, str]]) -> None:
            if args.realtime:
                return
            owner_ids = [user_id for user_id, _ in users]
            for figure in admission.measure(
                stack, users, database, count=sizes.admissions, seconds=sizes.pgbench_seconds
            ):
                record(figure)
            harness.retire_unfinished_runs()
            for figure in execution.measure(stack, owner_ids, runs=sizes.runs, claims=sizes.claims):
                record(figure)

        first_users = None
        for scale in sizes.scales:
            print(f"\n## {scale} conversations", flush=True)
            users = harness.create_users(scale, f"scale{scale}")
            first_users = first_users or users
            measure_everything(users)

        print(f"\n## first delta with {FEW_SOCKETS} and with {sizes.many_sockets} sockets open", flush=True)
        socket_users = harness.create_users(sizes.many_sockets, "sockets")
        few = harness.median_and_p95(first_delta(socket_users[:FEW_SOCKETS]))[0] * 1000
        many = harness.median_and_p95(first_delta(socket_users))[0] * 1000
        record(
            harness.Figure(
                f"first text.delta with {sizes.many_sockets - 1} other sockets open (median)",
                many,
                "ms",
                baseline_name=f"with {FEW_SOCKETS - 1} (same run)",
                baseline=few,
                higher_is_better=False,
            )
        )

        print(f"\n## {sizes.idle_sockets} idle sockets", flush=True)
        idle_users = harness.create_users(sizes.idle_sockets, "idle")
        record(
            sockets.measure_idle(
                [
                    stream.subscription_url(hosts[index % len(hosts)].web_url, user_id, token)
                    for index, (user_id, token) in enumerate(idle_users)
                ],
                sockets.web_process_ids([host.web.process.pid for host in hosts]),
                hold_seconds=sizes.idle_hold_seconds,
                interval_seconds=settings.IMPO_SOCKET_CATCH_UP_SECONDS,
            )
        )
        if not args.realtime and sizes.history_events:
            history = f"{len(first_users)} conversations, {sizes.history_events:,} more events in the table"
            print(f"\n## {history}", flush=True)
            load_history([user_id for user_id, _ in first_users], sizes.history_events)
            measure_everything(first_users)
            first_delta(first_users)

        if not args.realtime:
            print("\n## recovery", flush=True)
            record(
                recovery.measure(
                    stack,
                    first_users[0][0],
                    lease_seconds=sizes.lease_seconds,
                    sweep_seconds=sizes.sweep_seconds,
                    samples=sizes.recovery_samples,
                )
            )
    finally:
        stack.stop()
        double.stop()
        app.control.purge()
        harness.drop_database(database)
    print(f"\n{len(figures)} figures in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
