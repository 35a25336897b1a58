"""What a client of a chaos run (or of a benchmark checked like one) keeps: the users it acts as, the commands the
stack accepted, what each websocket connection delivered, and the run's figures. Plain records, so the invariants
(devtools/invariants.py) can compare them with the database and the double afterwards."""

from collections import Counter
from dataclasses import dataclass, field

SETTLED_STATES = {"completed", "failed", "cancelled", "pending_reconciliation"}
# Liveness, stated: once the last fault is over, every accepted command settles within this bound (a lease,
# a sweep, the provider backoff cap and the backlog two workers drain on a loaded machine); and at no time
# do unsettled runs sit for this long without a single event anywhere (that would be every worker blocked).
LIVENESS_BOUND_SECONDS = 90.0
STALL_BOUND_SECONDS = 30.0


@dataclass
class ChaosUser:
    id: int
    token: str


@dataclass
class Command:
    """One accepted client command, as the client knows it."""

    client_message_id: str
    text: str
    submission_id: str
    note_text: str | None = None  # set for a `save_note` tool command
    cancel_requested: bool = False
    regenerates: str | None = None  # set for a regenerate: the id of the reply it replaces
    attachment_ids: list[str] = field(default_factory=list)  # the files sent with it
    # What the echo agent adds for those files, in order: " [image WxH png]" each.
    file_notes: str = ""
    user_message_id: str | None = None  # from the receipt: the user message it asks with (an edit's new version)
    reply_message_id: str | None = None  # and the reply its run writes
    edits: str | None = None  # set for an edit: the id of the user message version it edits
    edited_text: str | None = None  # and that version's words, which no later session may carry
    # For a reply whose exact words cannot be known (a tool reading the clock), how a completed one starts.
    reply_prefix: str | None = None


@dataclass
class Connection:
    after: int
    seqs: list[int] = field(default_factory=list)


@dataclass
class ConversationRecord:
    index: int
    user: ChaosUser
    kind: str  # "main_chat" | "task"
    conversation_id: str | None = None
    task_id: str | None = None
    commands: list[Command] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    seen: dict[int, dict] = field(default_factory=dict)  # seq -> first event received with it
    duplicates_seen: int = 0
    errors: list[str] = field(default_factory=list)

    def forget_conversation(self) -> None:
        """After a delete: the client goes on in a new conversation (a new Task, or Main Chat afresh)."""
        self.conversation_id = self.task_id = None
        self.commands, self.connections, self.seen = [], [], {}
        self.duplicates_seen = 0


@dataclass
class DeletedConversation:
    """A conversation its owner deleted (a Task, or Main Chat cleared), as the client knew it."""

    user: ChaosUser
    kind: str
    conversation_id: str
    task_id: str | None
    submission_ids: list[str]


@dataclass
class DeletedAccount:
    """An account deleted with its password, and the conversations its client had opened."""

    user: ChaosUser
    conversation_ids: list[str] = field(default_factory=list)


@dataclass
class UploadedFile:
    """A file a client uploaded (prepare → PUT → complete), and what it did with it: `sent` with a message of
    `conversation_id`, `deleted` by its owner, left `unsent` for the orphan sweep; a deleted account's are
    `account`."""

    user: ChaosUser
    client_id: str
    fate: str
    conversation_id: str | None = None
    size: tuple[int, int] = (0, 0)  # the image's width and height


@dataclass
class Rating:
    """The last feedback `PUT` on a reply that the web server acknowledged (`rating`: up, down or None)."""

    user: ChaosUser
    message_id: str
    conversation_id: str
    rating: str | None


@dataclass
class CapabilityAnswer:
    """An approval decided from its push by a capability (`POST /api/v1/approvals/decide`): the decision sent, whether
    a 200 acknowledged it (False: its answer was lost, and the resend found the capability used), and the spends the
    client tried after it (the same capability again, the other decision's), each of which must be refused."""

    user: ChaosUser
    approval_id: str
    conversation_id: str
    decision: str
    acknowledged: bool
    refused_after: int = 0


@dataclass
class InstructionsChange:
    """`PUT /api/v1/account/instructions` as a client sent it (resent through an outage): the words, when it was first
    sent and when a 200 acknowledged it (None: never), on the wall clock the server's own times use."""

    user: ChaosUser
    text: str
    sent_at: float
    acknowledged_at: float | None = None


@dataclass
class PermissionChange:
    """A standing permission for `save_note` granted ("Always allow" with an approval, `grant`) or revoked on the
    account page (`revoke`), as a client sent it: when first sent and when a 2xx acknowledged it (None: never)."""

    user: ChaosUser
    kind: str
    sent_at: float
    acknowledged_at: float | None = None


@dataclass
class Export:
    """`GET /api/v1/export` as one client got it: the user's messages settled before it started (read from the
    database: id -> (conversation id, text)), the messages the document holds (id -> text), and the conversations
    deleted by the time it ended (which it may leave out)."""

    user: ChaosUser
    settled_before: dict[str, tuple[str, str]]
    exported: dict[str, str]
    deleted_by_then: set[str]


@dataclass
class Figures:
    scenarios: int = 0
    commands: int = 0
    # The clients' commands by kind (message, regenerate, edit, feedback, approval_decide, task_delete,
    # main_chat_clear, account_delete, export, push_subscribe, upload, upload_delete, instructions, note_approval,
    # always_allow, permission_revoke), and the pushes the push service accepted (repeats: copies of one it had,
    # same Topic).
    commands_by_kind: Counter = field(default_factory=Counter)
    pushes: int = 0
    push_repeats: int = 0
    faults: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    settled_after_faults: float | None = None
    longest_stall: float = 0.0

    def provider_faults(self) -> int:
        return sum(count for name, count in self.faults.items() if ":" in name)

    def worker_kills(self) -> int:
        return self.faults["worker_process_sigkill"] + self.faults["worker_host_sigkill"]

    def summary(self, seed: int) -> str:
        faults = ", ".join(f"{name}={count}" for name, count in sorted(self.faults.items())) or "none"
        outcomes = ", ".join(f"{name}={count}" for name, count in sorted(self.outcomes.items()))
        kinds = ", ".join(f"{name}={count}" for name, count in sorted(self.commands_by_kind.items())) or "none"
        settled = "not measured" if self.settled_after_faults is None else f"{self.settled_after_faults:.1f} s"
        lines = [
            f"chaos seed={seed} (rerun with IMPO_CHAOS_SEED={seed})",
            f"  scenarios (conversations): {self.scenarios}, commands accepted: {self.commands}",
            f"  commands by kind: {kinds}; pushes received: {self.pushes} "
            f"({self.push_repeats} repeats replacing a copy by Topic)",
            f"  faults injected: {sum(self.faults.values())}: worker kills {self.worker_kills()} "
            f"(processes {self.faults['worker_process_sigkill']}, hosts {self.faults['worker_host_sigkill']}), "
            f"provider faults {self.provider_faults()}, Redis restarts {self.faults['redis_restart']}, "
            f"PostgreSQL restarts {self.faults['postgres_restart']}, web kills {self.faults['web_sigkill']}",
            f"    ({faults})",
            f"  run outcomes: {outcomes}",
            f"  liveness: settled {settled} after the last fault "
            f"(bound {LIVENESS_BOUND_SECONDS:.0f} s); longest stretch without progress {self.longest_stall:.1f} s "
            f"(bound {STALL_BOUND_SECONDS:.0f} s)",
            f"  violations found: {len(self.violations)}",
            *(f"    - {violation}" for violation in self.violations),
        ]
        return "\n".join(lines)
