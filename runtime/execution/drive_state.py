"""The state of one run's drive, in one typed object that each phase of the driver takes (`driver.Driver`): what the
claim read, the provider and the lease's heartbeat, and what the driver came to know of the run on the way.

The phases never write the claim's copy of the run; what they learn of it is kept here, from what the lifecycle
functions return.
"""

from dataclasses import dataclass

from rebyte.client import LiveEvents, RebyteGateway
from rebyte.models import RemoteSession, RemoteTurn
from runtime.execution.heartbeat import HeldLease
from runtime.models import Run
from runtime.services import claims


@dataclass(frozen=True)
class Claimed:
    """What the claim read, in its transaction, before the driver's first provider call."""

    lease: claims.Lease
    run: Run
    remote_turn: RemoteTurn
    # For a run whose input has not left yet: the tools it is offered (and which of them run on its device), and
    # its conversation's session if the input may go there (None: a new session is created with the input).
    tools: list[dict] | None
    device_tools: list[str] | None
    session: RemoteSession | None
    # Whether a new session's first input carries the conversation's last turns (it had a session before).
    carry: bool
    # The owner's instructions as the claim read them: a new session's agent is made with these (the turn's start
    # checks them again under their lock, `InputPhase`).
    instructions: str


@dataclass
class DriveState:
    claimed: Claimed
    gateway: RebyteGateway
    heartbeat: HeldLease
    # Whether the run's input has left (under this claim or an earlier one).
    input_sent: bool
    # The run's provider failures in a row: the first answer after some resets the backoff.
    provider_failures: int
    # The input left under an earlier claim: what that claim projected of the turn's reasoning is not known, so the
    # items are not read for it (only parts this driver's stream sees from their start, or whole at their end).
    resumed: bool
    # Seen on the run row each projection locks: a cancel asked for while deltas stream is relayed at once, not at
    # the next quiet moment.
    cancel_seen: bool = False
    # The session the run's input goes (or went) to, once known: the one a 404 may say the provider lost.
    session: RemoteSession | None = None
    # The event stream of a session this driver created with the run's input (its first turn, from the start).
    created_stream: LiveEvents | None = None

    @classmethod
    def of(cls, claimed: Claimed, gateway: RebyteGateway, heartbeat: HeldLease) -> "DriveState":
        sent = claimed.run.input_sent_at is not None
        return cls(
            claimed,
            gateway,
            heartbeat,
            input_sent=sent,
            provider_failures=claimed.run.provider_failures,
            resumed=sent,
        )

    @property
    def run(self) -> Run:
        return self.claimed.run

    @property
    def remote_turn(self) -> RemoteTurn:
        return self.claimed.remote_turn

    @property
    def lease(self) -> claims.Lease:
        return self.claimed.lease

    def fence(self):
        """One durable transaction in which the phases write the run, only while this claim still holds its lease."""
        return claims.fenced(self.lease)

    @property
    def input_key(self) -> str:
        """The key the run's input message is sent (and resent) under."""
        # A staff retry is a new turn: under the first key the provider would answer with the failed one.
        retry = f"-retry-{self.run.retries}" if self.run.retries else ""
        return f"impo-run-{self.run.id}{retry}"
