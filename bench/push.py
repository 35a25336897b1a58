"""Web Push (docs/notifications.md): notifications sent per second by one sender (the webhooks loop's push thread),
and the delay from a run's terminal commit to the push service receiving its push (median, p95), at 1 and at N runs
ending at once.

`python -m bench.push [--runs 200]`, in a scratch database of its own (bench/harness.py). Each run is admitted and
finished through the runtime's own write paths (claim, then `finish_run`, which writes the notification in the
same transaction); each owner has one browser subscribed to the suite's push service (devtools/push_service.py),
which checks the VAPID token and decrypts every push in this process, on the same machine: its CPU is part of the
figure.
The sender polls as deployed (`IMPO_WEBHOOK_POLL_SECONDS`, 1 s), and a notification's commit rings its doorbell
(core/doorbells.py) so it need not wait for the poll. Each figure is measured twice in the same run: first with the
bench's commits ringing no doorbell (the poll alone, as before the doorbell), then as shipped.
"""

import argparse
import os
import signal
import sys
import time
import types
from contextlib import nullcontext
from unittest import mock

from bench import harness


def _subscribe(owner_ids: list[int], service) -> dict[int, object]:
    from webhooks.models import PushSubscription

    browsers = {}
    for owner_id in owner_ids:
        browser = service.subscribe()
        keys = browser.to_json()["keys"]
        PushSubscription.objects.create(
            owner_id=owner_id, endpoint=browser.endpoint, p256dh=keys["p256dh"], auth=keys["auth"]
        )
        browsers[owner_id] = browser
    return browsers


def end_runs_at_once(owner_ids: list[int], service, *, timeout: float = 300) -> tuple[list[float], float, float]:
    """Admits one message per owner, then finishes every run back to back; returns each run's delay from its commit
    to the push service's receipt (seconds), the sender's rate over the burst (pushes per second) and how long the
    commits took (seconds)."""
    from django.contrib.auth import get_user_model

    from devtools.stack import wait_until
    from runtime.models import Run, RunState
    from runtime.services.admission import MessageCommand
    from runtime.services.claims import claim_run, finish_run
    from runtime.services.commands import submit_main_chat_message

    owners = get_user_model().objects.filter(id__in=owner_ids)
    leases = []
    for owner in owners:
        receipt = submit_main_chat_message(
            owner=owner, command=MessageCommand(client_message_id=f"push-{time.monotonic_ns()}", text="notify me")
        )
        run = Run.objects.get(submission_id=receipt.submission_id)
        leases.append(claim_run(run.id, "bench-push"))
    accepted_before = len(service.accepted)
    committed_at = {}
    for lease in leases:
        finish_run(lease, RunState.COMPLETED)
        committed_at[str(lease.run_id)] = time.time()
    wait_until(
        lambda: len(service.accepted) - accepted_before >= len(leases),
        timeout=timeout,
        interval=0.01,
        what=f"{len(leases)} pushes",
    )
    burst = service.accepted[accepted_before:]
    delays = [each.at - committed_at[each.payload["runId"]] for each in burst]
    span = max(each.at for each in burst) - min(each.at for each in burst)
    commits = max(committed_at.values()) - min(committed_at.values())
    return delays, (len(burst) / span if span > 0 else float("inf")), commits


def _measure(users: list, service, *, runs: int, rounds: int, label: str) -> None:
    single = []
    for _ in range(rounds):
        delays, _, _ = end_runs_at_once([users[0][0]], service)
        single += delays
    median, p95 = harness.median_and_p95(single)
    print(f"{label}: 1 run ending ({rounds} rounds): commit -> push service median {median * 1000:.0f} ms,", end="")
    print(f" p95 {p95 * 1000:.0f} ms", flush=True)
    delays, rate, commits = end_runs_at_once([user_id for user_id, _ in users[1 : runs + 1]], service)
    median, p95 = harness.median_and_p95(delays)
    print(
        f"{label}: {runs} runs ending at once: commit -> push service median {median * 1000:.0f} ms,"
        f" p95 {p95 * 1000:.0f} ms; one sender: {rate:.0f} notifications/s; the {runs} commits took {commits:.1f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.push")
    parser.add_argument("--runs", type=int, default=200, help="runs ending at once in the burst")
    parser.add_argument("--rounds", type=int, default=20, help="single runs measured one at a time")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    database = harness.configure_process_environment()
    harness.create_database(database)
    import django

    django.setup()
    from devtools.push_service import PushService, vapid_public_key_of
    from devtools.stack import Stack, free_port

    # The sender needs no provider: the stack's environment only names one.
    stack = Stack(
        database_name=database,
        double=types.SimpleNamespace(api_url="http://127.0.0.1:9/"),
        redis_url=os.environ["REDIS_URL"],
    )
    service = PushService(free_port(), vapid_public_key_of(stack.env["IMPO_VAPID_PRIVATE_KEY"])).start()
    try:
        stack.env["IMPO_WEBHOOK_ALLOWED_NETWORKS"] = "127.0.0.1/32"
        stack.start_webhooks(interval=float(os.environ.get("IMPO_WEBHOOK_POLL_SECONDS", "1.0")))
        users = harness.create_users(args.runs + 1, "push")
        _subscribe([user_id for user_id, _ in users], service)
        print(f"# Web Push, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
        from runtime import outbound

        for label, doorbell in (("poll only", False), ("doorbell", True)):
            # The poll alone: this process's commits ring nothing (the sender still listens).
            silenced = nullcontext() if doorbell else mock.patch.object(outbound, "ring_after_commit", lambda _: None)
            with silenced:
                _measure(users, service, runs=args.runs, rounds=args.rounds, label=label)
        assert service.refused == [], service.refused
    finally:
        stack.stop()
        service.stop()
        harness.drop_database(database)


if __name__ == "__main__":
    main()
