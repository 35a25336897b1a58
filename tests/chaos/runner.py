"""The chaos scenario runner: real processes, concurrent clients, injected faults, bounded and seeded.

Every conversation is driven by one thread over REST (the web server, tests/chaos/conversations.py) while a
websocket watcher records what the client saw; drivers send until the window (IMPO_CHAOS_SECONDS) closes, retrying
what an outage answered as a client would, and now and then regenerate, edit, rate, export, rewrite the user's
instructions or delete; approvals
are decided from their push notifications. Users of their own delete
their accounts meanwhile (tests/chaos/accounts.py), and every user has a browser subscribed to the suite's push
service. A fault thread (tests/chaos/faults.py) injects faults for the whole window. The seed is fixed unless
IMPO_CHAOS_SEED says otherwise, and printed. What happened is kept in plain records (devtools/records.py) so the
invariant checkers (devtools/invariants.py, devtools/lifecycle_invariants.py) can compare it with the database,
the double and the push service afterwards.
"""

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from devtools.lifecycle_invariants import files_meant_to_go
from devtools.push_service import PushService
from devtools.records import (
    LIVENESS_BOUND_SECONDS,
    SETTLED_STATES,
    STALL_BOUND_SECONDS,
    CapabilityAnswer,
    ChaosUser,
    ConversationRecord,
    DeletedAccount,
    DeletedConversation,
    Export,
    Figures,
    InstructionsChange,
    PermissionChange,
    Rating,
    UploadedFile,
)
from devtools.stack import ServiceProcess, Stack, wait_until
from tests.chaos.accounts import AccountDriver, subscribe
from tests.chaos.clients import SocketWatcher
from tests.chaos.conversations import ConversationDriver
from tests.chaos.faults import FaultInjector
from tests.faults.instances import PrivatePostgres, PrivateRedis

DEFAULT_SEED = 35
# How long, after every run settled, deletions may take to be purged locally and at the provider (a deletion
# refused while its turn settles backs off, doubling from 2 s), and pushes to reach the push service.
DELETION_SETTLE_SECONDS = 240
PUSH_SETTLE_SECONDS = 60


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

    @property
    def deleted_accounts(self) -> int:
        """One account deleted per 40 s of window, at least one."""
        return max(1, int(self.seconds // 40))


@dataclass
class Services:
    """The stack's own PostgreSQL and Redis (tests/faults/instances.py), which the run restarts, its web server, the
    push service its browsers subscribe to, and the directory of its attachments' store."""

    postgres: PrivatePostgres
    redis: PrivateRedis
    web: ServiceProcess
    push: PushService
    attachment_dir: Path


class ChaosRun:
    def __init__(
        self,
        config: ChaosConfig,
        stack: Stack,
        web_url: str,
        users: list[ChaosUser],
        services: Services,
        doomed: list[ChaosUser],
    ):
        self.config = config
        self.stack = stack
        self.services = services
        self.web_url = web_url
        self.ws_base = web_url.replace("http://", "ws://")
        self.users = users
        self.doomed = doomed  # users whose accounts the run deletes
        self.rng = random.Random(config.seed)
        self.figures = Figures()
        self.faults = FaultInjector(self)
        self.records: list[ConversationRecord] = []
        self.watchers: dict[int, SocketWatcher] = {}
        self.deletions: list[DeletedConversation] = []
        self.account_deletions: list[DeletedAccount] = []
        self.account_errors: list[str] = []
        self.exports: list[Export] = []
        self.uploads: list[UploadedFile] = []
        self.ratings: dict[str, Rating] = {}  # reply id -> its last acknowledged rating
        self.capability_answers: list[CapabilityAnswer] = []
        self.instruction_changes: list[InstructionsChange] = []
        self.permission_changes: list[PermissionChange] = []
        self.accepted_before_deletes = 0  # commands of conversations deleted since
        self.deadline = 0.0
        self._last_unsettled_at: float | None = None
        self._monitoring = threading.Event()

    # --- the whole run ---------------------------------------------------------------------------

    def execute(self) -> None:
        self.stack.double.configure(delta_delay_ms=40, delta_chunks=5)
        self.faults.start_hosts()
        self.stack.start_sweeper()
        self.stack.start_webhooks()
        self.services.push.start()
        for host in self.faults.hosts:
            self.stack.wait_ready(host)
        self._subscribe_browsers()
        # The window opens once the stack serves: on a loaded machine its start alone can outlast a short run.
        self.deadline = time.monotonic() + self.config.seconds
        self.records = [self._plan(index) for index in range(self.config.conversations)]
        self.figures.scenarios = len(self.records)
        drivers = [ConversationDriver(self, record, random.Random(self.rng.random())).drive for record in self.records]
        drivers.append(AccountDriver(self, self.doomed, random.Random(self.rng.random())).drive)
        threads = [threading.Thread(target=drive, daemon=True) for drive in drivers]
        faults = threading.Thread(target=self.faults.inject, name="faults", daemon=True)
        faults.start()
        self._monitor = threading.Thread(target=self._watch_progress, name="progress", daemon=True)
        self._monitor.start()
        for thread in threads:
            thread.start()
        faults.join(timeout=self.config.seconds + 300)
        for thread in threads:
            thread.join(timeout=max(1.0, self.deadline - time.monotonic() + 240))
        self.faults.replace_dead_hosts()

    def settle(self, timeout: float) -> None:
        """Waits until every run is settled and every watcher has caught up with its conversation; then until every
        deletion is purged and every push sent (a bound missed is a violation)."""
        from django.db import connection

        from runtime.models import Run

        connection.close()  # opened before the run: PostgreSQL may have restarted under it since
        wait_until(
            lambda: (
                not Run.objects.filter(submission_id__in=self.submission_ids())
                .exclude(state__in=SETTLED_STATES)
                .exists()
            ),
            timeout=timeout,
            interval=0.25,
            what="every chaos run to settle",
        )
        self._monitoring.set()
        self._monitor.join(timeout=10)
        self._judge_liveness()
        self._wait_for_watchers(timeout=30)
        self._wait_for(self._deletions_done, DELETION_SETTLE_SECONDS, "every deletion purged, retired agent deleted")
        self._wait_for(self._files_done, DELETION_SETTLE_SECONDS, "every file meant to go to be deleted")
        self._wait_for(self._pushes_done, PUSH_SETTLE_SECONDS, "every notification to be pushed")
        self.figures.commands = self.accepted_before_deletes + sum(len(record.commands) for record in self.records)

    def stop_watchers(self) -> None:
        for watcher in list(self.watchers.values()):
            watcher.stop()

    @property
    def push_service(self) -> PushService:
        return self.services.push

    @property
    def attachment_dir(self) -> Path:
        return self.services.attachment_dir

    def submission_ids(self) -> list[str]:
        """The commands of the conversations that were not deleted."""
        return [command.submission_id for record in self.records for command in record.commands]

    def watch(self, record: ConversationRecord) -> None:
        url = f"{self.ws_base}/ws/v1/conversations/{record.conversation_id}/?token={record.user.token}"
        watcher = SocketWatcher(url, record, random.Random(self.rng.random()))
        self.watchers[record.index] = watcher
        watcher.start()

    # --- conversations ---------------------------------------------------------------------------

    def _plan(self, index: int) -> ConversationRecord:
        user = self.users[index % len(self.users)]
        # Each user's first conversation is its Main Chat; the rest are Tasks, each with its own session.
        kind = "main_chat" if index < len(self.users) else "task"
        return ConversationRecord(index=index, user=user, kind=kind)

    def _subscribe_browsers(self) -> None:
        for user in self.users:
            with httpx.Client(
                base_url=self.web_url, headers={"Authorization": f"Bearer {user.token}"}, timeout=20
            ) as http:
                subscribe(self, http, self.services.push)

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

        self._wait_for(caught_up, timeout, "every websocket client to catch up")

    def _wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            wait_until(condition, timeout=timeout, interval=0.5, what=what)
        except TimeoutError as exc:
            self.figures.violations.append(str(exc))

    def _deletions_done(self) -> bool:
        """Deleted conversations purged, deleted accounts gone, and every agent retired by new instructions deleted
        at the provider (its runs have all settled)."""
        from django.contrib.auth import get_user_model

        from rebyte.agent_retirement import retired_agent_ids
        from runtime.models import Conversation

        deleted = [deletion.conversation_id for deletion in self.deletions]
        accounts = [account.user.id for account in self.account_deletions]
        return (
            not Conversation.objects.filter(id__in=deleted, purged_at__isnull=True).exists()
            and not get_user_model().objects.filter(id__in=accounts).exists()
            and not retired_agent_ids(limit=1)
        )

    def _files_done(self) -> bool:
        from django.db.models import Q

        from attachments.models import Attachment, AttachmentStatus

        return not Attachment.objects.filter(
            Q(status=AttachmentStatus.DELETING) | Q(client_id__in=files_meant_to_go(self))
        ).exists()

    @staticmethod
    def _pushes_done() -> bool:
        from runtime.models import Notification
        from webhooks.models import PushDelivery, PushStatus

        return (
            not Notification.objects.filter(dispatched_at__isnull=True).exists()
            and not PushDelivery.objects.filter(status=PushStatus.PENDING).exists()
        )

    # --- liveness ---------------------------------------------------------------------------------

    def _judge_liveness(self) -> None:
        # From the last fault to the last moment any accepted run was still unsettled (sampled each second).
        last_fault_at = self.faults.last_fault_at
        if last_fault_at is not None:
            self.figures.settled_after_faults = max(0.0, (self._last_unsettled_at or 0.0) - last_fault_at)
            if self.figures.settled_after_faults > LIVENESS_BOUND_SECONDS:
                self.figures.violations.append(
                    f"liveness: commands settled {self.figures.settled_after_faults:.1f} s after the last fault"
                )
        if self.figures.longest_stall > STALL_BOUND_SECONDS:
            self.figures.violations.append(
                f"liveness: {self.figures.longest_stall:.1f} s with unsettled runs and no progress at all"
            )

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
