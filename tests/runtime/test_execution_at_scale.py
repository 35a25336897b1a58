"""A worker process drives many runs at once: no connection held while a run waits, one heartbeat statement for
all of its leases, and live deltas projected together after the first (issue 27)."""

import math
import threading
import uuid
from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from devtools.stack import wait_until
from runtime.execution.group_commit import GroupCommit
from runtime.execution.heartbeat import ProcessHeartbeat, several_runs_statement
from runtime.models import TERMINAL_RUN_STATES, Event, EventType, Message, Run, RunState
from runtime.services import claims, projection
from runtime.services.admission import MessageCommand
from runtime.services.commands import create_task

pytestmark = pytest.mark.slow

APPLICATION = "impo-scale-test-worker"


def start_tasks(user, texts: list[str]) -> list[Run]:
    """One Task each, so that every run is its conversation's only writer and all may run at once."""
    receipts = [
        create_task(owner=user, command=MessageCommand(client_message_id=str(uuid.uuid4()), text=text))
        for text in texts
    ]
    return list(Run.objects.filter(submission_id__in=[receipt.submission_id for receipt in receipts]))


def settled(runs: list[Run], timeout: float = 120) -> list[Run]:
    ids = [run.id for run in runs]

    def all_settled() -> list[Run] | None:
        found = list(Run.objects.filter(id__in=ids, state__in=TERMINAL_RUN_STATES))
        return found if len(found) == len(ids) else None

    return wait_until(all_settled, timeout=timeout, what=f"{len(ids)} runs to settle")


def deltas_of(run: Run) -> list[Event]:
    return list(Event.objects.filter(submission_id=run.submission_id, type=EventType.TEXT_DELTA).order_by("seq"))


def worker_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APPLICATION])
        return cursor.fetchone()[0]


def echo_chunks(text: str, count: int) -> list[str]:
    """The pieces the double sends an echo of `text` in (rebyte/double/agent.py `chunks`)."""
    reply = f"Echo: {text}"
    size = max(1, math.ceil(len(reply) / count))
    return [reply[i : i + size] for i in range(0, len(reply), size)]


def claimed_with_the_last_taken_over(user, label: str) -> tuple[list[Run], list[claims.Lease]]:
    """Five runs claimed by worker-a; the last one's lease expired and worker-b claimed it, so worker-a's lease on
    it is stale (nothing more of worker-a's may be written to it)."""
    runs = start_tasks(user, [f"{label} {index}" for index in range(5)])
    leases = [claims.claim_run(run.id, "worker-a") for run in runs]
    Run.objects.filter(id=runs[-1].id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert claims.claim_run(runs[-1].id, "worker-b") is not None
    return runs, leases


def with_saved_agent(user) -> None:
    """One run first: the user's runs racing to create the user's agent would park for its reconciliation."""
    [run] = settled(start_tasks(user, ["the agent's first run"]))
    assert run.state == RunState.COMPLETED


def test_runs_waiting_on_the_provider_hold_no_database_connection(stack, user, rebyte_double):
    stack.start_worker(
        env={"PGAPPNAME": APPLICATION, "DATABASE_POOL_MAX_SIZE": "2", "DATABASE_POOL_TIMEOUT_SECONDS": "5"}
    )
    with_saved_agent(user)
    # Each turn lasts about 3 s at the double; a pool of two connections serves six runs in flight at once.
    rebyte_double.configure(delta_delay_ms=400, delta_chunks=8)
    runs = start_tasks(user, [f"paced turn {index}" for index in range(6)])
    ids = [run.id for run in runs]
    samples = []

    def all_running_while_counted() -> bool:
        samples.append(worker_connections())
        return Run.objects.filter(id__in=ids, state=RunState.RUNNING).count() == len(ids)

    wait_until(all_running_while_counted, timeout=60, interval=0.1, what="every run in flight at once")
    for run in settled(runs):
        samples.append(worker_connections())
        assert run.state == RunState.COMPLETED
        reply = "".join(event.payload["delta"] for event in deltas_of(run))
        assert reply == f"Echo: {run.submission.user_message.text}"
    assert max(samples) <= 2


@pytest.mark.django_db(transaction=True)
def test_one_heartbeat_statement_extends_every_lease_and_reports_only_the_lost_one(user):
    runs, leases = claimed_with_the_last_taken_over(user, "run")
    heartbeat = ProcessHeartbeat()
    before = dict(Run.objects.filter(id__in=[run.id for run in runs]).values_list("id", "lease_expires_at"))

    with ExitStack() as holding:
        held = [holding.enter_context(heartbeat.held(lease)) for lease in leases]
        with CaptureQueriesContext(connection) as statements:
            heartbeat.beat()

    assert len(statements) == 1
    assert [h.lost.is_set() for h in held] == [False, False, False, False, True]
    after = dict(Run.objects.filter(id__in=[run.id for run in runs]).values_list("id", "lease_expires_at"))
    assert all(after[run.id] > before[run.id] for run in runs[:-1])
    assert after[runs[-1].id] == before[runs[-1].id]  # the successor's lease is not the heartbeat's to extend
    with pytest.raises(claims.LeaseLost):
        held[-1].check()


def test_a_lease_the_shared_heartbeat_finds_lost_stops_only_its_run(stack, user, rebyte_double):
    # Deltas 2 s apart: the beat (every second under the stack's 3 s lease) finds the takeover before a write does.
    worker = stack.start_worker()
    with_saved_agent(user)
    rebyte_double.configure(delta_delay_ms=2000, delta_chunks=4)
    runs = start_tasks(user, [f"three of us {index}" for index in range(3)])
    wait_until(lambda: all(deltas_of(run) for run in runs), timeout=60, interval=0.1, what="every run's first delta")
    victim, others = runs[0], runs[1:]
    # What a successor's claim does to the fencing token.
    Run.objects.filter(id=victim.id).update(lease_generation=F("lease_generation") + 1)

    stopped = f"stopping: run {victim.id}"
    wait_until(lambda: stopped in worker.log_text(), timeout=30, what="the victim's driver to stop")
    for run in settled(others):
        assert run.state == RunState.COMPLETED
    assert f"run {victim.id}: lease lost" in worker.log_text()
    victim.refresh_from_db()
    assert victim.state == RunState.RUNNING  # left for a successor: the stopped driver wrote nothing more
    assert not Event.objects.filter(submission_id=victim.submission_id, type=EventType.MESSAGE_COMPLETED).exists()


def test_live_deltas_after_the_first_are_projected_together_with_the_same_text_and_gapless_seqs(
    stack, user, rebyte_double
):
    rebyte_double.configure(delta_delay_ms=60, delta_chunks=20)
    stack.start_worker(env={"IMPO_DELTA_WINDOW_SECONDS": "0.5"})
    text = "twenty pieces of a streamed reply, coalesced"
    [run] = settled(start_tasks(user, [text]))

    assert run.state == RunState.COMPLETED
    deltas = deltas_of(run)
    assert "".join(event.payload["delta"] for event in deltas) == f"Echo: {text}"
    assert 1 < len(deltas) < 20  # the provider's twenty deltas, coalesced into fewer events
    seqs = list(Event.objects.filter(conversation_id=run.submission.conversation_id).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, len(seqs) + 1))


def test_the_first_delta_of_a_turn_is_not_held_back_by_the_window(stack, user, rebyte_double):
    rebyte_double.configure(delta_delay_ms=600, delta_chunks=4)
    stack.start_worker(env={"IMPO_DELTA_WINDOW_SECONDS": "3600"})
    text = "the first piece goes at once"
    [run] = settled(start_tasks(user, [text]))

    # The first piece went at once, on its own; the three after it were held by the window and projected together
    # when the turn ended. Windows are aligned on the machine's clock (runtime/execution/coalescing.py), so the end of
    # one can fall between them, once at most: a CI run with a 30 s window met one (about 6 % of runs).
    pieces = echo_chunks(text, 4)
    first, *later = [delta.payload["delta"] for delta in deltas_of(run)]
    assert first == pieces[0]
    assert "".join(later) == "".join(pieces[1:]) and 1 <= len(later) <= 2, later


def test_an_owners_first_runs_at_once_create_one_remote_agent_and_wait_for_it(workers, user, rebyte_double):
    # Four Tasks of a new user, driven at once by one worker: each needs the user's agent before its session. The
    # create answers slowly, so the three that find it in flight wait for it: looking it up mid-create would find
    # nothing yet and park them for reconciliation until the sweeper's next look.
    rebyte_double.fault("create_agent", "delay", delay_ms=1500)

    runs = settled(start_tasks(user, [f"first of four {index}" for index in range(4)]))

    assert [run.state for run in runs] == [RunState.COMPLETED] * 4
    assert not Event.objects.filter(
        submission__in=[run.submission_id for run in runs], type=EventType.RUN_PENDING_RECONCILIATION
    ).exists()
    agents = [a for a in rebyte_double.state()["agents"] if a["metadata"].get("impo_owner") == str(user.id)]
    assert len(agents) == 1


def test_an_agent_create_refused_with_429_is_sent_again_without_being_looked_for(workers, user, rebyte_double):
    # A 429 made nothing (docs/provider.md): the run backs off and sends the create again. Counted as sent, it would
    # be looked for instead, found missing, and its run parked until the sweeper's second look.
    rebyte_double.fault("create_agent", "http_error", status=429, times=1)

    [run] = settled(start_tasks(user, ["first, after a 429"]))

    assert run.state == RunState.COMPLETED
    assert not Event.objects.filter(submission_id=run.submission_id, type=EventType.RUN_PENDING_RECONCILIATION).exists()
    assert [r["op"] for r in rebyte_double.requests() if r["op"] in ("create_agent", "list_agents")] == [
        "create_agent",
        "create_agent",
    ]


@pytest.mark.django_db(transaction=True)
def test_the_group_commit_writes_the_runs_handed_over_together_each_fenced_by_its_own_lease(user):
    runs, leases = claimed_with_the_last_taken_over(user, "grouped")
    commit = GroupCommit()
    outcomes: dict = {}

    def project(index: int) -> None:
        try:
            view = commit.project(leases[index], [projection.Output("text-1", f"words of {index}")], progress=None)
            outcomes[index] = view.id
        except claims.LeaseLost as exc:
            outcomes[index] = exc
        finally:
            connection.close()

    with several_runs_statement:  # the group commit's writer waits here, as it would for the heartbeat's beat
        first = threading.Thread(target=project, args=(0,))
        first.start()
        wait_until(lambda: commit.writing == 1, timeout=30, interval=0.05, what="the writer to take the first run")
        others = [threading.Thread(target=project, args=(index,)) for index in range(1, 5)]
        for thread in others:
            thread.start()
        wait_until(lambda: commit.waiting == 4, timeout=30, interval=0.05, what="four runs handed over")
    for thread in [first, *others]:
        thread.join(timeout=60)

    assert [outcomes[index] for index in range(4)] == [run.id for run in runs[:4]]
    assert isinstance(outcomes[4], claims.LeaseLost)
    messages = {
        run.id: Message.objects.get(id=run.submission.assistant_message_id)
        for run in Run.objects.filter(id__in=[r.id for r in runs]).select_related("submission")
    }
    assert [messages[run.id].text for run in runs] == ["words of 0", "words of 1", "words of 2", "words of 3", ""]
    # One transaction for the four handed over while the first was written (now() is its start), another before.
    grouped = {messages[run.id].updated_at for run in runs[1:4]}
    assert len(grouped) == 1 and messages[runs[0].id].updated_at not in grouped
    for index, run in enumerate(runs[:4]):
        assert [event.payload["delta"] for event in deltas_of(run)] == [f"words of {index}"]
    assert deltas_of(runs[4]) == []
    # Written together, the four tasks' conversations each got gapless seqs of their own.
    conversations = {run.submission.conversation_id for run in runs[:4]}
    assert len(conversations) == 4
    for conversation_id in conversations:
        seqs = list(Event.objects.filter(conversation_id=conversation_id).values_list("seq", flat=True).order_by("seq"))
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 2


def test_a_reply_the_stream_cannot_place_is_read_from_the_items_without_reading_the_turn_again(
    stack, user, rebyte_double
):
    # A first message's reply streams on its session's create; that stream is cut after the reply's first delta
    # (agent.session.created, turn.created, the user's item, turn and session in progress, the reply's item, a delta).
    # The live stream that takes over missed the reply's start and the gap: its deltas are read from the items.
    rebyte_double.configure(delta_delay_ms=300, delta_chunks=12)
    rebyte_double.fault("create_session", "cut_stream", after_events=7)
    stack.start_worker()
    text = "a first message, its stream cut after the reply began"
    [run] = settled(start_tasks(user, [text]))

    assert run.state == RunState.COMPLETED
    assert "".join(event.payload["delta"] for event in deltas_of(run)) == f"Echo: {text}"
    requests = rebyte_double.state()["requests"]
    assert requests["session_events"] >= 1
    assert requests["list_items"] >= 6  # twelve pieces 0.3 s apart, read as they came
    # The turn is read to find it after the cut, while no stream is open, and to end the run; its streaming is told by
    # the stream itself.
    assert requests["list_turns"] <= 5
