"""The three kinds every provider failure is sorted into (by `rebyte/client.py`), which is all the callers decide on:
- `Refused`: the provider answered 4xx; nothing happened and repeating the same call will not help;
- `Unavailable`: a transient failure of a call that is safe to repeat (a read, or an input event whose
  Idempotency-Key makes a resend harmless), or a create the provider declined before acting (429);
- `UnknownOutcome`: a create (agent or session: not idempotent upstream) was sent and its answer lost
  (timeout, dropped connection, 5xx); the resource may exist, so it must be looked up before creating again.
  A delete is sorted the same way: it may have happened, so it is read before it is sent again.

Apart from the client because the web tier names them (the failure counts `/metrics` serves) without calling the
provider: importing the SDK costs every web process most of a second of CPU at its start, and its memory.
"""


class ProviderError(Exception):
    def __init__(self, message: str, *, operation: str, status: int | None = None, code: str | None = None):
        super().__init__(f"{operation}: {message}")
        self.operation = operation
        self.status = status
        self.code = code


class Refused(ProviderError):
    """The provider answered 4xx: the call did not take effect."""


class Unavailable(ProviderError):
    """A transient failure of a call that is safe to repeat later."""


class UnknownOutcome(ProviderError):
    """A create was sent but its answer was lost: the resource may or may not exist."""


def failure_kind(error: ProviderError) -> str:
    """How a failure is named on spans and in the error counts."""
    return {Refused: "refused", Unavailable: "unavailable", UnknownOutcome: "unknown_outcome"}.get(type(error), "error")
