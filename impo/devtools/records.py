"""What a client of a chaos run (or of a benchmark checked like one) keeps: the users it acts as, the commands the
stack accepted, what each websocket connection delivered, and the run's figures. Plain records, so the invariants
(impo/devtools/invariants.py) can compare them with the database and the double afterwards."""

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


@dataclass
class Figures:
    scenarios: int = 0
    commands: int = 0
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
        settled = "not measured" if self.settled_after_faults is None else f"{self.settled_after_faults:.1f} s"
        lines = [
            f"chaos seed={seed} (rerun with IMPO_CHAOS_SEED={seed})",
            f"  scenarios (conversations): {self.scenarios}, commands accepted: {self.commands}",
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
