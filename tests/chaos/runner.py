"""The chaos scenario runner: real processes, concurrent clients, injected faults, bounded and seeded.

Every conversation is driven by one thread over REST (the web server) while a websocket watcher records what the
client saw; drivers send until the window (IMPO_CHAOS_SECONDS) closes, retrying what an outage answered as a client
would. A fault thread meanwhile, for the whole window: kills worker processes and whole worker hosts, arms the
Rebyte double's fault knobs, redelivers Celery wake-ups, cuts client sockets, and on a schedule spread over the
window restarts the stack's own PostgreSQL and Redis and kills web processes. The seed is fixed unless
IMPO_CHAOS_SEED says otherwise, and printed. What happened is kept in plain records (impo/devtools/records.py) so
the invariant checker (impo/devtools/invariants.py) can compare it with the database and the double afterwards.
"""

import json
import os
import random
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import kombu.exceptions

from impo.devstack import ServiceProcess, Stack, WorkerProcess, wait_until
from impo.devtools.records import (
    LIVENESS_BOUND_SECONDS,
    SETTLED_STATES,
    STALL_BOUND_SECONDS,
    ChaosUser,
    Command,
    Connection,
    ConversationRecord,
    Figures,
)
from impo.devtools.websocket import Closed, WebsocketConnection
from tests.faults.instances import PrivatePostgres, PrivateRedis

DEFAULT_SEED = 35
# The chaos hosts' threshold for a crash loop (30 s in production): kills come faster than that here.
QUICK_EXIT_SECONDS = 5.0
# A client retries what an outage of the stack answered (a lost connection, 502-504) with the same body for this long.
CLIENT_RETRY_SECONDS = 120.0


def process_age_seconds(pid: int) -> float:
    """How long the process has run (from /proc: its start in clock ticks after boot)."""
    started_ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")


_SLOT_STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")
_SLOT_READY = re.compile(r"\.(\d+)@\S+ ready\.")


def serving_worker_pids(host: WorkerProcess) -> list[int]:
    """The worker processes of a host that said they are ready since they started (from the host's log, which
    has the host's "worker N started (pid P)" and then worker N's Celery "<name>.N@<machine> ready.")."""
    started, ready = {}, set()
    for line in host.log_text().splitlines():
        if match := _SLOT_STARTED.search(line):
            started[match.group(1)] = int(match.group(2))
            ready.discard(match.group(1))
        elif match := _SLOT_READY.search(line):
            ready.add(match.group(1))
    alive = set(child_pids(host.process.pid))
    return [pid for slot, pid in started.items() if slot in ready and pid in alive]


def child_pids(pid: int) -> list[int]:
    """The processes `pid` started (a worker host's workers, gunicorn's web processes)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    conversations: int
    messages_per_conversation: int
    seconds: float
    users: int
    workers: int
    worker_processes: int
    tools: bool

    @classmethod
    def from_environment(cls, *, conversations: int, messages: int, seconds: float, tools: bool) -> "ChaosConfig":
        env = os.environ.get
        return cls(
            # Fixed unless told: a run that finds something is replayed as it was.
            seed=int(env("IMPO_CHAOS_SEED") or DEFAULT_SEED),
            conversations=int(env("IMPO_CHAOS_CONVERSATIONS") or conversations),
            messages_per_conversation=int(env("IMPO_CHAOS_MESSAGES") or messages),
            seconds=float(env("IMPO_CHAOS_SECONDS") or seconds),
            users=int(env("IMPO_CHAOS_USERS") or 3),
            workers=max(2, int(env("IMPO_CHAOS_WORKERS") or 2)),
            worker_processes=max(1, int(env("IMPO_CHAOS_WORKER_PROCESSES") or 1)),
            tools=tools,
        )


class SocketWatcher:
    """One client's view of a conversation over the websocket; reconnects when told to, from its last seq."""

    def __init__(self, ws_url: str, record: ConversationRecord, rng: random.Random):
        self._url = ws_url
        self._record = record
        self._rng = rng
        self._stop = threading.Event()
        self._reconnect = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name=f"ws-{record.index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def last_seq(self) -> int:
        with self._lock:
            return max(self._record.seen, default=0)

    def request_reconnect(self) -> None:
        self._reconnect.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _watch(self) -> None:
        while not self._stop.is_set():
            # A reconnecting client may ask for a little overlap; de-duplication by seq must cope.
            after = max(0, self.last_seq - self._rng.choice([0, 0, 1, 3]))
            try:
                socket = WebsocketConnection(f"{self._url}&after={after}")
            except Exception as exc:  # noqa: BLE001  (a refused or failed connect is recorded, then retried)
                self._record.errors.append(f"websocket connect failed: {exc!r}")
                time.sleep(0.5)  # pacing a client's retry, not waiting for a condition
                continue
            connection = Connection(after=after)
            self._record.connections.append(connection)
            try:
                self._read(socket, connection)
            finally:
                socket.abort()
            self._reconnect.clear()

    def _read(self, socket: WebsocketConnection, connection: Connection) -> None:
        while not self._stop.is_set() and not self._reconnect.is_set():
            try:
                event = socket.receive_json(timeout=0.3)
            except TimeoutError:
                continue
            except Closed:
                return
            connection.seqs.append(event["seq"])
            with self._lock:
                if event["seq"] in self._record.seen:
                    self._record.duplicates_seen += 1
                else:
                    self._record.seen[event["seq"]] = event


# Faults that an operator would call a fault (not a client's own resend, cancel or reconnect), for "settled after
# the last fault".
CLIENT_ACTIONS = {"client_resend", "client_cancel", "client_reconnect"}


@dataclass
class Services:
    """The stack's own PostgreSQL and Redis (tests/faults/instances.py), which the run restarts, and its web server."""

    postgres: PrivatePostgres
    redis: PrivateRedis
    web: ServiceProcess


class ChaosRun:
    def __init__(self, config: ChaosConfig, stack: Stack, web_url: str, users: list[ChaosUser], services: Services):
        self.config = config
        self.stack = stack
        self.services = services
        self.web_url = web_url
        self.ws_base = web_url.replace("http://", "ws://")
        self.users = users
        self.rng = random.Random(config.seed)
        self.figures = Figures()
        self.records: list[ConversationRecord] = []
        self.watchers: dict[int, SocketWatcher] = {}
        self.hosts: list[WorkerProcess] = []
        self.deadline = 0.0
        self._fault_lock = threading.Lock()
        self._last_fault_at: float | None = None
        self._last_unsettled_at: float | None = None
        self._monitoring = threading.Event()

    # --- the whole run ---------------------------------------------------------------------------

    def execute(self) -> None:
        self.stack.double.configure(delta_delay_ms=40, delta_chunks=5)
        self.hosts = [self._start_host(f"chaos-host-{n}") for n in range(self.config.workers)]
        self.stack.start_sweeper()
        for host in self.hosts:
            self.stack.wait_ready(host)
        # The window opens once the stack serves: on a loaded machine its start alone can outlast a short run.
        self.deadline = time.monotonic() + self.config.seconds
        self.records = [self._plan(index) for index in range(self.config.conversations)]
        self.figures.scenarios = len(self.records)
        drivers = [
            threading.Thread(target=self._drive, args=(record, random.Random(self.rng.random())), daemon=True)
            for record in self.records
        ]
        faults = threading.Thread(target=self._inject_faults, name="faults", daemon=True)
        faults.start()
        self._monitor = threading.Thread(target=self._watch_progress, name="progress", daemon=True)
        self._monitor.start()
        for driver in drivers:
            driver.start()
        faults.join(timeout=self.config.seconds + 300)
        for driver in drivers:
            driver.join(timeout=max(1.0, self.deadline - time.monotonic() + 240))
        self._replace_dead_hosts()

    def settle(self, timeout: float) -> None:
        """Waits until every run is settled and every watcher has caught up with its conversation."""
        from django.db import connection

        from runtime.models import Run

        connection.close()  # opened before the run: PostgreSQL may have restarted under it since
        submission_ids = [command.submission_id for record in self.records for command in record.commands]
        wait_until(
            lambda: not Run.objects.filter(submission_id__in=submission_ids).exclude(state__in=SETTLED_STATES).exists(),
            timeout=timeout,
            interval=0.25,
            what="every chaos run to settle",
        )
        self._monitoring.set()
        self._monitor.join(timeout=10)
        # From the last fault to the last moment any accepted run was still unsettled (sampled each second).
        if self._last_fault_at is not None:
            self.figures.settled_after_faults = max(0.0, (self._last_unsettled_at or 0.0) - self._last_fault_at)
            if self.figures.settled_after_faults > LIVENESS_BOUND_SECONDS:
                self.figures.violations.append(
                    f"liveness: commands settled {self.figures.settled_after_faults:.1f} s after the last fault"
                )
        if self.figures.longest_stall > STALL_BOUND_SECONDS:
            self.figures.violations.append(
                f"liveness: {self.figures.longest_stall:.1f} s with unsettled runs and no progress at all"
            )
        self._wait_for_watchers(timeout=30)

    def stop_watchers(self) -> None:
        for watcher in self.watchers.values():
            watcher.stop()

    # --- conversations ---------------------------------------------------------------------------

    def _plan(self, index: int) -> ConversationRecord:
        user = self.users[index % len(self.users)]
        # Each user's first conversation is its Main Chat; the rest are Tasks, each with its own session.
        kind = "main_chat" if index < len(self.users) else "task"
        return ConversationRecord(index=index, user=user, kind=kind)

    def _drive(self, record: ConversationRecord, rng: random.Random) -> None:
        """At least `messages_per_conversation` commands, and on until the window closes."""
        try:
            with httpx.Client(
                base_url=self.web_url, headers={"Authorization": f"Bearer {record.user.token}"}, timeout=20
            ) as http:
                number = 0
                while number < self.config.messages_per_conversation or time.monotonic() < self.deadline:
                    command = self._send(http, record, number, rng)
                    if record.index not in self.watchers:
                        self._watch(record)
                    self._maybe_retry_and_cancel(http, record, command, rng)
                    self._await_settled(http, command)
                    number += 1
                    time.sleep(rng.uniform(0, 0.4))  # a user's think time, to spread the load
        except Exception as exc:  # noqa: BLE001  (a crashed driver is reported as a violation, not lost)
            record.errors.append(f"driver crashed: {exc!r}")

    def _send(self, http: httpx.Client, record: ConversationRecord, number: int, rng: random.Random) -> Command:
        note_text = None
        if self.config.tools and rng.random() < 0.25:
            note_text = f"note {record.index}.{number} {uuid.uuid4().hex[:8]}"
            text = "/tool save_note " + json.dumps({"text": note_text})
        else:
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
            text = f"chaos {record.index}.{number} {words}"
        client_message_id = str(uuid.uuid4())
        body = {"clientMessageId": client_message_id, "text": text}
        if record.kind == "task" and record.task_id is None:
            receipt = self._post(http, "/api/v1/tasks", body)
            record.task_id, record.conversation_id = receipt["taskId"], receipt["conversationId"]
        elif record.kind == "task":
            receipt = self._post(http, f"/api/v1/tasks/{record.task_id}/messages", body)
        else:
            receipt = self._post(http, "/api/v1/conversation/messages", body)
            if record.conversation_id is None:
                record.conversation_id = self._request(http, "GET", "/api/v1/conversation").json()["conversationId"]
        command = Command(client_message_id, text, receipt["submissionId"], note_text=note_text)
        record.commands.append(command)
        return command

    def _request(self, http: httpx.Client, method: str, path: str, body: dict | None = None) -> httpx.Response:
        """A client's request through the outages the run causes: a lost connection or a 502-504 (a web process
        killed, PostgreSQL or Redis restarting) is sent again, the same body, as a client would."""
        give_up = time.monotonic() + CLIENT_RETRY_SECONDS
        while True:
            try:
                response = http.request(method, path, json=body)
                if response.status_code not in (502, 503, 504):
                    return response
                outcome = f"{response.status_code}: {response.text[:200]}"
            except httpx.TransportError as exc:
                outcome = repr(exc)
            if time.monotonic() > give_up:
                raise AssertionError(f"{method} {path} still failing after {CLIENT_RETRY_SECONDS:.0f} s: {outcome}")
            time.sleep(0.5)  # pacing a client's retry, not waiting for a condition

    def _post(self, http: httpx.Client, path: str, body: dict) -> dict:
        response = self._request(http, "POST", path, body)
        if response.status_code != 202:
            raise AssertionError(f"POST {path} {body} answered {response.status_code}: {response.text}")
        return response.json()

    def _maybe_retry_and_cancel(
        self, http: httpx.Client, record: ConversationRecord, command: Command, rng: random.Random
    ) -> None:
        if rng.random() < 0.2:
            # The client lost the 202 and posts the same command again: it must get the same receipt.
            self._count("client_resend")
            path = {
                ("task", True): "/api/v1/tasks",
                ("task", False): f"/api/v1/tasks/{record.task_id}/messages",
            }.get((record.kind, len(record.commands) == 1), "/api/v1/conversation/messages")
            receipt = self._post(http, path, {"clientMessageId": command.client_message_id, "text": command.text})
            if receipt["submissionId"] != command.submission_id:
                record.errors.append(
                    f"resent {command.client_message_id} got submission {receipt['submissionId']}, "
                    f"not the original {command.submission_id}"
                )
        if rng.random() < 0.08:
            time.sleep(rng.uniform(0, 0.5))  # cancel at a random point of the run
            self._count("client_cancel")
            command.cancel_requested = True
            self._request(http, "POST", f"/api/v1/submissions/{command.submission_id}/cancel", {}).raise_for_status()

    def _await_settled(self, http: httpx.Client, command: Command) -> None:
        def settled():
            response = self._request(http, "GET", f"/api/v1/submissions/{command.submission_id}")
            return response.status_code == 200 and response.json()["status"] in SETTLED_STATES

        wait_until(settled, timeout=240, interval=0.2, what=f"submission {command.submission_id} to settle")

    def _watch(self, record: ConversationRecord) -> None:
        url = f"{self.ws_base}/ws/v1/conversations/{record.conversation_id}/?token={record.user.token}"
        watcher = SocketWatcher(url, record, random.Random(self.rng.random()))
        self.watchers[record.index] = watcher
        watcher.start()

    def _wait_for_watchers(self, timeout: float) -> None:
        from runtime.models import Conversation

        targets = dict(
            Conversation.objects.filter(
                id__in=[record.conversation_id for record in self.records if record.conversation_id]
            ).values_list("id", "last_event_seq")
        )

        def caught_up():
            return all(
                watcher.last_seq >= targets[uuid.UUID(self.records[index].conversation_id)]
                for index, watcher in self.watchers.items()
            )

        try:
            wait_until(caught_up, timeout=timeout, interval=0.2, what="every websocket client to catch up")
        except TimeoutError as exc:
            self.figures.violations.append(str(exc))

    # --- liveness ---------------------------------------------------------------------------------

    def _watch_progress(self) -> None:
        """Samples, once a second, whether runs are unsettled and whether any event was written since (a sample
        PostgreSQL cannot answer while it restarts is skipped)."""
        from django.db import DatabaseError, connection

        from runtime.models import Event, Run

        user_ids = [user.id for user in self.users]
        last_event, stalled_since = None, None
        try:
            while not self._monitoring.wait(1.0):
                try:
                    newest = Event.objects.filter(conversation__owner_id__in=user_ids).order_by("-id").values("id")[:1]
                    newest = newest[0]["id"] if newest else 0
                    unsettled = (
                        Run.objects.filter(submission__owner_id__in=user_ids).exclude(state__in=SETTLED_STATES).exists()
                    )
                except DatabaseError:
                    connection.close()
                    continue
                now = time.monotonic()
                if unsettled:
                    self._last_unsettled_at = now
                if unsettled and newest == last_event:
                    stalled_since = stalled_since or now
                    self.figures.longest_stall = max(self.figures.longest_stall, now - stalled_since)
                else:
                    stalled_since = None
                last_event = newest
        finally:
            connection.close()

    # --- faults ----------------------------------------------------------------------------------

    def _inject_faults(self) -> None:
        from django.db import connection

        try:
            self._inject_faults_until_done()
        finally:
            connection.close()  # this thread's own connection would keep the test database from dropping

    def _outage_schedule(self, rng: random.Random) -> list[tuple[float, Callable]]:
        """When the heavy faults come: each kind spread over the window (one a slice of it, jittered), so a run of
        any length has some of each and never two restarts of one service at once."""
        seconds = self.config.seconds
        kinds = [
            (self._restart_postgres, max(1, int(seconds // 50))),
            (self._restart_redis, max(1, int(seconds // 50))),
            (self._kill_web_process, max(1, int(seconds // 30))),
            (self._kill_worker_host, max(1, int(seconds // 40))),
        ]
        schedule = []
        for inject, count in kinds:
            slice_seconds = seconds / count
            schedule += [(slice_seconds * (n + rng.uniform(0.15, 0.85)), inject) for n in range(count)]
        return sorted(schedule, key=lambda entry: entry[0])

    def _inject_faults_until_done(self) -> None:
        rng = random.Random(self.rng.random())
        outages = self._outage_schedule(rng)
        opened = self.deadline - self.config.seconds
        kinds = [
            (self._kill_worker_process, 1),
            (self._provider_fault, 8),
            (self._duplicate_delivery, 3),
            (self._reconnect_client, 3),
            (self._compound_faults, 1),
            (self._fault_during_recovery, 1),
        ]
        # Every run kills a worker host mid-flight first; the rest is drawn by weight, the outages on schedule.
        inject = self._kill_worker_host
        while time.monotonic() < self.deadline:
            time.sleep(rng.uniform(0.3, 1.2))  # pacing the injection, not waiting for a condition
            while outages and time.monotonic() - opened >= outages[0][0]:
                outages.pop(0)[1](rng)
            inject(rng)
            inject = rng.choices([kind for kind, _ in kinds], weights=[weight for _, weight in kinds])[0]

    def _count(self, name: str) -> None:
        with self._fault_lock:
            self.figures.faults[name] += 1
            if name not in CLIENT_ACTIONS:
                self._last_fault_at = time.monotonic()

    def _start_host(self, name: str) -> WorkerProcess:
        return self.stack.start_worker(
            name,
            wait=False,
            host_processes=self.config.worker_processes,
            env={"IMPO_WORKER_QUICK_EXIT_SECONDS": str(QUICK_EXIT_SECONDS)},
        )

    def _kill_worker_process(self, rng: random.Random) -> None:
        """SIGKILLs one worker process of a host: the host starts another (impo/worker_host.py). Only a process
        that serves (booted on a loaded machine it may take 20 s: killed before, nothing would run) and has served
        a while: the host takes a process dying younger than QUICK_EXIT_SECONDS for a crash loop
        and waits before the next start (up to 30 s), which the run would then measure as a stall of its own
        making."""
        serving = []
        for host in self.hosts:
            for pid in serving_worker_pids(host) if host.alive else []:
                try:
                    if process_age_seconds(pid) >= QUICK_EXIT_SECONDS:
                        serving.append(pid)
                except (FileNotFoundError, ProcessLookupError):
                    continue  # exited meanwhile
        if not serving:
            return
        try:
            os.kill(rng.choice(serving), signal.SIGKILL)
        except ProcessLookupError:
            return
        self._count("worker_process_sigkill")

    def _kill_worker_host(self, rng: random.Random) -> None:
        """SIGKILLs a whole worker host with its processes, as a machine lost; another host starts."""
        victim = rng.choice(self.hosts)
        victim.kill()
        self._count("worker_host_sigkill")
        self.hosts.remove(victim)
        self.hosts.append(self._start_host(f"chaos-host-r{self.figures.faults['worker_host_sigkill']}"))

    def _kill_web_process(self, rng: random.Random) -> None:
        """SIGKILLs one web process: its sockets and requests are lost, gunicorn starts another."""
        pids = child_pids(self.services.web.process.pid)
        if not pids:
            return
        try:
            os.kill(rng.choice(pids), signal.SIGKILL)
        except ProcessLookupError:
            return
        self._count("web_sigkill")

    def _restart_redis(self, rng: random.Random) -> None:
        self.services.redis.stop()
        self._count("redis_restart")
        time.sleep(rng.uniform(1.0, 5.0))  # the outage's length, not waiting for a condition
        self.services.redis.start()

    def _restart_postgres(self, rng: random.Random) -> None:
        self.services.postgres.stop()
        self._count("postgres_restart")
        time.sleep(rng.uniform(1.0, 3.0))  # the outage's length, not waiting for a condition
        self.services.postgres.start()

    def _compound_faults(self, rng: random.Random) -> None:
        """Several faults at once: a dead worker, provider failures and a redelivered wake-up together."""
        for inject in rng.sample(
            [self._kill_worker_process, self._provider_fault, self._provider_fault, self._duplicate_delivery], k=3
        ):
            inject(rng)
        self._count("compound")

    RECOVERY_FAULTS = [
        ("list_turns", "http_error", {"status": 503}),
        ("list_items", "http_error", {"status": 502}),
        ("session_events", "cut_stream", {"after_events": 0}),
        ("input_tool_result", "drop_response", {}),
    ]

    def _fault_during_recovery(self, rng: random.Random) -> None:
        """Kills a worker process and arms faults its successor meets while it resumes the run."""
        self._kill_worker_process(rng)
        for op, mode, options in rng.sample(self.RECOVERY_FAULTS, k=2):
            self.stack.double.fault(op, mode, times=rng.randint(1, 3), **options)
            self._count(f"recovery:{op}:{mode}")

    def _replace_dead_hosts(self) -> None:
        for host in [host for host in self.hosts if not host.alive]:
            self.hosts.remove(host)
            self.hosts.append(self._start_host("chaos-host-late"))

    PROVIDER_FAULTS = [
        ("create_agent", "drop_response", {}),
        ("create_session", "drop_response", {}),
        ("create_session", "http_error", {"status": 502}),
        # A streamed create lost before it names the session (an unknown outcome), and one cut mid-turn.
        ("create_session", "cut_stream", {"after_events": 0}),
        ("create_session", "cut_stream", {"after_events": 6}),
        ("input_message", "drop_response", {}),
        ("input_message", "http_error", {"status": 503}),
        ("input_message", "delay", {"delay_ms": 1500}),
        ("session_events", "delay", {"delay_ms": 1200}),
        ("session_events", "cut_stream", {"after_events": 1}),
        ("session_events", "cut_stream", {"after_events": 3}),
        ("list_turns", "http_error", {"status": 503}),
        ("list_items", "http_error", {"status": 500}),
        ("input_tool_result", "drop_response", {}),
        ("input_tool_result", "http_error", {"status": 503}),
    ]

    def _provider_fault(self, rng: random.Random) -> None:
        op, mode, options = rng.choice(self.PROVIDER_FAULTS)
        self.stack.double.fault(op, mode, times=rng.randint(1, 2), **options)
        self._count(f"{op}:{mode}")

    def _duplicate_delivery(self, rng: random.Random) -> None:
        from django.db import DatabaseError, connection

        from impo.celery import app
        from runtime.models import Run

        submission_ids = [command.submission_id for record in self.records for command in record.commands]
        try:
            candidates = list(Run.objects.filter(submission_id__in=submission_ids).values_list("id", flat=True))
        except DatabaseError:
            connection.close()
            return  # PostgreSQL restarting: nothing to redeliver now
        if not candidates:
            return
        run_id = rng.choice(candidates)
        try:
            with app.connection_for_write(url=self.stack.env["REDIS_URL"]) as broker:
                for _ in range(rng.randint(1, 3)):
                    app.send_task("runtime.execute_run", args=[str(run_id)], connection=broker)
                    self._count("duplicate_delivery")
        except (OSError, kombu.exceptions.OperationalError):
            return  # Redis restarting

    def _reconnect_client(self, rng: random.Random) -> None:
        if not self.watchers:
            return
        self.watchers[rng.choice(list(self.watchers))].request_reconnect()
        self._count("client_reconnect")


WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "ünïcode",
    "日本",
    "emoji🙂",
]
