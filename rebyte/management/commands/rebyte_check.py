"""`manage.py rebyte_check`: one real round trip to the configured Rebyte, for a deployment with a key.

It reuses (or creates) an agent marked as this check's, creates a session whose first input is the
message, follows the turn to its end and prints the reply and every resource it created. It touches
no database: it checks the provider, the key and the model, nothing of Impo's own state.
"""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from rebyte.client import RebyteGateway
from rebyte.failures import ProviderError

CHECK_METADATA = {"impo_check": "rebyte_check"}
TERMINAL = ("completed", "failed", "cancelled")


class Command(BaseCommand):
    help = "Sends one message to the configured Rebyte (REBYTE_BASE_URL, _API_KEY, _MODEL) and prints the reply."

    def add_arguments(self, parser):
        parser.add_argument("--message", default="Say hello to Impo in one short sentence.")
        parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the turn to end")

    def handle(self, *args, message: str, timeout: float, **options):
        gateway = RebyteGateway(
            settings.REBYTE_BASE_URL,
            settings.REBYTE_API_KEY,
            timeout=settings.REBYTE_TIMEOUT_SECONDS,
            stream_timeout=settings.REBYTE_STREAM_TIMEOUT_SECONDS,
            reasoning_summary=settings.REBYTE_REASONING_SUMMARY or None,
        )
        try:
            with gateway:
                self._check(gateway, message, timeout)
        except ProviderError as exc:
            raise CommandError(f"Rebyte at {settings.REBYTE_BASE_URL} answered: {exc}") from exc

    def _check(self, gateway: RebyteGateway, message: str, timeout: float) -> None:
        self.stdout.write(f"Rebyte: {settings.REBYTE_BASE_URL} (model {settings.REBYTE_MODEL})")
        reused = [a for a in gateway.list_agents() if all(a.metadata.get(k) == v for k, v in CHECK_METADATA.items())]
        if reused:
            agent = reused[0]
            self.stdout.write(f"agent: {agent.id} (reused)")
        else:
            agent = gateway.create_agent(
                model=settings.REBYTE_MODEL, name="Impo check", instructions="Answer briefly.", metadata=CHECK_METADATA
            )
            self.stdout.write(f"agent: {agent.id} (created)")
        session = gateway.create_session(agent_id=agent.id, tools=[], input_parts=[message], metadata=CHECK_METADATA)
        self.stdout.write(f"session: {session.id} (created, with the message as its first input)")
        deadline = time.monotonic() + timeout
        while True:
            turns = gateway.list_turns(session.id)
            if turns and turns[0].status in TERMINAL:
                break
            if time.monotonic() > deadline:
                raise CommandError(f"the turn did not end within {timeout:g} s (session {session.id})")
            time.sleep(0.5)
        turn = turns[0]
        self.stdout.write(f"turn: {turn.id} ({turn.status})")
        replies = [
            item.output_text
            for item in gateway.list_items(session.id)
            if item.type == "message" and item.role == "assistant" and getattr(item, "turn_id", None) == turn.id
        ]
        self.stdout.write("reply: " + "\n".join(replies))
        if turn.status != "completed":
            error = f"{turn.error.code}: {turn.error.message}" if turn.error else turn.status
            raise CommandError(f"the turn ended {turn.status}: {error}")
