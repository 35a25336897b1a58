"""In flight: one worker host, as shipped, driving hundreds of long turns at once .

- slow turns: every turn 20 s at the double (1 delta/s); each must settle within 1.5× that, while the host's
  PostgreSQL connections (pg_stat_activity by the host's application name) and RSS are sampled: first the first
  message of each user (the user's agent and session created), then a second one (an input event to the session);
- streaming turns: 10 s at 10 deltas/s; worker CPU per provider delta, and provider delta → websocket frame for
  a few watched conversations (the delta's emission seen by a subscriber of the double's own live stream);
- the host SIGKILLed with turns in flight, a fresh one taking over: the chaos invariants on every run;
- POST → first delta on an idle host, with the provider's share apart (bench/own_share.py).
The double's CPU is printed apart: it shares the machine and must not be what limits the figures.
"""

import os
import time
import types
import uuid
from collections import Counter

from bench import floors, own_share
from bench.admission import cpu_seconds
from bench.harness import Figure, create_users, median_and_p95
from bench.inflight_load import (
    ADMITTING_THREADS,
    SAMPLE_SECONDS,
    InflightSizes,
    Sampler,
    admit,
    message_text,
    pace,
    phases,
    run_outcomes,
    runs_in_flight,
    settle_seconds,
    wait_settled,
)
from bench.inflight_streaming import streaming_side_by_side
from bench.worker_host import LEASE_SECONDS, start_host
from devtools import invariants
from devtools.records import Command, ConversationRecord, Figures
from devtools.stack import Stack, wait_until


def slow_turns(stack: Stack, owners: list, sizes: InflightSizes, *, which: str) -> list[Figure]:
    """One message to each owner at once; `which` names it (each user's first message creates the user's agent
    and session with the input; a later one goes to the session as an input event, its stream open before it)."""
    turns, seconds = sizes.slow_turns, sizes.slow_turn_seconds
    pace(stack, turn_seconds=seconds, deltas=seconds)
    host = start_host(stack)
    calls = Counter(stack.double.state()["requests"])
    double_cpu, host_cpu = cpu_seconds(stack.double.process.pid), cpu_seconds(host.process.pid)
    try:
        started = time.monotonic()
        admitted = admit(owners[:turns], [message_text(i) for i in range(turns)], f"slow-{which}")
        admitting = time.monotonic() - started
        run_ids = [run_id for run_id, *_ in admitted]
        with Sampler(host, run_ids) as samples:
            wait_settled(run_ids, timeout=seconds * 3 + 120)
        elapsed = time.monotonic() - started
        double_cpu = cpu_seconds(stack.double.process.pid) - double_cpu
        host_cpu = cpu_seconds(host.process.pid) - host_cpu
        calls = Counter(stack.double.state()["requests"]) - calls
    finally:
        host.stop()
    settled = settle_seconds([submission_id for _, submission_id, *_ in admitted])
    median, p95 = median_and_p95(settled)
    outcomes = run_outcomes(run_ids)
    call_ms = floors.sdk_call_cpu_ms(stack, owners[0])
    requests = calls.total() - calls["session_events"]
    return [
        Figure(
            f"{turns} slow turns ({seconds} s each, 1 delta/s, {which} message of each user), one worker host: "
            "slowest acceptance → settled",
            max(settled),
            "s",
            baseline_name="the turn itself × 1.5",
            baseline=seconds * 1.5,
            higher_is_better=False,
            notes=[
                f"median {median:.1f} s, p95 {p95:.1f} s; outcomes {dict(outcomes)}; admitted in {admitting:.1f} s "
                f"({ADMITTING_THREADS} threads), all settled {elapsed:.1f} s after the first admission",
                f"where the time went, median (p95): {phases(run_ids)}",
                f"peak in flight {max(samples.in_flight, default=0)} of {turns}",
                f"PostgreSQL connections held by the host: max {max(samples.connections, default=0)} over "
                f"{len(samples.connections)} samples (every {SAMPLE_SECONDS} s)",
                f"host RSS: max {max(samples.rss_mb, default=0):.0f} MB",
                f"CPU: worker host {host_cpu:.1f} s, the double {double_cpu:.1f} s (apart), over {elapsed:.0f} s",
                f"provider calls per run: {requests / turns:.1f} ({calls['list_items'] / turns:.1f} reads of the "
                f"items, {calls['list_turns'] / turns:.1f} of the turns) and {calls['session_events'] / turns:.1f} "
                f"live streams; one SDK call (a read of the items) costs {call_ms:.2f} ms of CPU here, so the host's "
                f"{1000 * host_cpu / turns:.0f} ms per run include about {requests / turns * call_ms:.0f} ms of calls",
            ],
        )
    ]


def killed_host(stack: Stack, owners: list, sizes: InflightSizes) -> list[Figure]:
    """Turns in flight on a host that is SIGKILLed; a fresh host and the sweeper take them over."""
    turns, seconds = sizes.killed_turns, sizes.slow_turn_seconds
    pace(stack, turn_seconds=seconds, deltas=seconds)
    first = start_host(stack)
    sweeper = stack.start_sweeper()
    second = None
    try:
        admitted = admit(owners[:turns], [message_text(i) for i in range(turns)], "kill")
        run_ids = [run_id for run_id, *_ in admitted]
        wait_until(lambda: runs_in_flight(run_ids) == turns, timeout=120, interval=0.2, what=f"{turns} turns in flight")
        time.sleep(seconds / 4)  # each turn part-way through its reply
        first.kill()
        killed_at = time.monotonic()
        second = start_host(stack)
        wait_settled(run_ids, timeout=seconds * 3 + 180)
        recovered = time.monotonic() - killed_at
    finally:
        for process in (first, second, sweeper):
            if process is not None:
                process.stop()
    by_user = {owner.id: owner for owner in owners}
    from runtime.models import Submission

    owner_of = dict(
        Submission.objects.filter(id__in=[s for _, s, *_ in admitted]).values_list("id", "owner_id").iterator()
    )
    records = [
        ConversationRecord(
            index=index,
            user=by_user[owner_of[uuid.UUID(submission_id)]],
            kind="main_chat",
            commands=[Command(client_message_id=client_id, text=text, submission_id=submission_id)],
        )
        for index, (_, submission_id, client_id, text) in enumerate(admitted)
    ]
    chaos = types.SimpleNamespace(
        records=records, users=[record.user for record in records], stack=stack, figures=Figures()
    )
    double_state = stack.double.state()
    violations = [
        *invariants.check_commands_settled(chaos),
        *invariants.check_one_turn_per_run(chaos, double_state),
        *invariants.check_one_input_per_run_and_no_steering(chaos, double_state),
        *invariants.check_event_sequences(chaos),
        *invariants.check_assistant_text(chaos),
    ]
    return [
        Figure(
            f"host SIGKILLed with {turns} turns in flight, a fresh host takes over: invariant violations",
            len(violations),
            "violations",
            higher_is_better=False,
            notes=[
                f"outcomes {dict(run_outcomes(run_ids))}; all settled {recovered:.1f} s after the kill "
                f"(turns of {seconds} s, leases of {LEASE_SECONDS} s)",
                *violations[:10],
            ],
        )
    ]


def measure(stack: Stack, sizes: InflightSizes) -> list[Figure]:
    from django.contrib.auth import get_user_model

    from impo.celery import app

    app.control.purge()
    count = max(sizes.slow_turns, sizes.streaming_turns, sizes.killed_turns)
    figures = []
    users = create_users(count, f"inflight-{os.getpid()}")
    owners = list(get_user_model().objects.filter(id__in=[user_id for user_id, _ in users]).order_by("id"))
    figures.extend(slow_turns(stack, owners, sizes, which="first"))
    figures.extend(slow_turns(stack, owners, sizes, which="second"))
    figures.extend(streaming_side_by_side(stack, sizes))
    killed_users = create_users(sizes.killed_turns, f"killed-{os.getpid()}")
    killed_owners = list(
        get_user_model().objects.filter(id__in=[user_id for user_id, _ in killed_users]).order_by("id")
    )
    figures.extend(killed_host(stack, killed_owners, sizes))
    figures.extend(own_share.measure(stack, create_users(1, f"first-{os.getpid()}")[0], sizes.first_delta_samples))
    stack.double.configure(delta_delay_ms=0, delta_chunks=4)
    return figures
