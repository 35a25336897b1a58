"""The tool registry: what each tool is, who may see it, and how it may fail and be retried.

A tool is offered to an execution context only if its definition names that context. Independently of
what a definition declares, Tasks never see foreground device tools nor tools that create Tasks
(docs/design.md §3): the registry refuses such a definition outright.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator

from core.error_codes import ErrorCode
from runtime.models import ConversationKind
from tools.models import SideEffect


class ToolError(Exception):
    """A failure the agent is told about as the tool's output; the run goes on."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ToolUnavailable(ToolError):
    """A transient failure: the call may be tried again under its retry policy."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.TOOL_UNAVAILABLE, message)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 1
    backoff_seconds: float = 0.0  # before the second attempt; doubles after each further one

    def delay_before(self, attempt: int) -> float:
        return self.backoff_seconds * (2 ** max(attempt - 2, 0))


class Approval:
    """Whether a person must approve a call before it is dispatched (besides a per-call policy callable)."""

    NEVER = "never"
    ALWAYS = "always"
    POLICIES = (NEVER, ALWAYS)


# A per-call policy decides from the call's validated arguments.
ApprovalPolicy = str | Callable[[dict], bool]


@dataclass(frozen=True)
class ToolInvocation:
    """What a handler gets: the call, the run's owner and submission, and the validated arguments."""

    tool_call_id: Any
    call_id: str
    owner: Any
    submission: Any
    arguments: dict


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str  # for the model
    input_schema: dict
    side_effect: str
    contexts: frozenset[str]
    timeout_seconds: float | Callable[[], float]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Runs on the user's device through an invocation the device must claim; has no server handler.
    device: bool = False
    creates_tasks: bool = False
    handler: Callable[[ToolInvocation], Any] | None = None
    # Acts on the world outside Impo's own database (a device, another service); a device tool always does.
    acts_outside_impo: bool = False
    # `never`, `always`, or a callable deciding per call; None derives it: a person approves what acts
    # outside Impo and cannot simply be repeated (transactional or uncertain). IMPO_TOOL_APPROVAL overrides.
    approval: ApprovalPolicy | None = None
    # Whether its owner may answer an approval with "Always allow" (a standing ToolPermission): off unless a tool is
    # marked, a device tool included, so no call that acts on the world goes unasked by default.
    always_allowable: bool = False
    # For the person reading the chat's tool card: a short title ("Play a sound") and one line on what it does.
    title: str = ""
    summary: str = ""

    def __post_init__(self):
        if self.side_effect not in SideEffect.values:
            raise ValueError(f"{self.name}: unknown side-effect class {self.side_effect!r}")
        unknown = set(self.contexts) - set(ConversationKind.values)
        if unknown or not self.contexts:
            raise ValueError(f"{self.name}: contexts must be a non-empty subset of {ConversationKind.values}")
        if ConversationKind.TASK in self.contexts and (self.device or self.creates_tasks):
            raise ValueError(f"{self.name}: Tasks never get device tools nor task-creation tools")
        if self.side_effect == SideEffect.UNCERTAIN and self.retry.attempts != 1:
            raise ValueError(f"{self.name}: an uncertain tool is never retried")
        if self.device != (self.handler is None):
            raise ValueError(f"{self.name}: a device tool has no server handler, every other tool has one")
        if self.device != (self.side_effect == SideEffect.UNCERTAIN):
            # The device's claim and report are what make an uncertain outcome knowable; a server-side
            # uncertain tool would need an outcome check of its own, which nothing provides yet.
            raise ValueError(f"{self.name}: uncertain tools, and only they, run on a device")
        if self.device and not self.acts_outside_impo:
            raise ValueError(f"{self.name}: a device tool acts outside Impo")
        if isinstance(self.approval, str) and self.approval not in Approval.POLICIES:
            raise ValueError(f"{self.name}: approval must be one of {Approval.POLICIES} or a callable")
        Draft202012Validator.check_schema(self.input_schema)

    @property
    def timeout(self) -> float:
        return self.timeout_seconds() if callable(self.timeout_seconds) else self.timeout_seconds

    def requires_approval(self, arguments: dict) -> bool:
        """Whether this call, with these (valid) arguments, waits for a person before it is dispatched."""
        policy = settings.IMPO_TOOL_APPROVAL.get(self.name, self.approval)
        if policy is None:
            return self.acts_outside_impo and self.side_effect != SideEffect.READ
        if callable(policy):
            return bool(policy(arguments))
        return policy == Approval.ALWAYS

    def validation_error(self, arguments: Any) -> str | None:
        """The first schema violation of `arguments`, as a message for the agent; None when valid."""
        error = next(iter(sorted(Draft202012Validator(self.input_schema).iter_errors(arguments), key=str)), None)
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    def to_provider(self) -> dict:
        return {"type": "function", "name": self.name, "description": self.description, "parameters": self.input_schema}


class Registry:
    def __init__(self):
        self._tools: dict[str, ToolDefinition] = {}

    def register(self, definition: ToolDefinition) -> ToolDefinition:
        if definition.name in self._tools:
            raise ValueError(f"tool {definition.name!r} is already registered")
        self._tools[definition.name] = definition
        return definition

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name)

    def words_for_people(self) -> dict[str, dict]:
        """Each tool's title and one-line summary, as the web chat's tool cards show them (by tool name)."""
        return {
            name: {"title": tool.title, "summary": tool.summary, "alwaysAllowable": tool.always_allowable}
            for name, tool in sorted(self._tools.items())
        }

    def catalog(self, context: str, *, device_tools: Iterable[str] = ()) -> list[ToolDefinition]:
        """The tools offered in `context`; device tools only when the run's device can run them."""
        available = set(device_tools)
        return sorted(
            (
                tool
                for tool in self._tools.values()
                if context in tool.contexts and (not tool.device or tool.name in available)
            ),
            key=lambda tool: tool.name,
        )


registry = Registry()

# A server tool may be tried twice (a timeout, a transient failure); a device tool, whose outcome is uncertain, never.
SERVER_TOOL_RETRY = RetryPolicy(attempts=2, backoff_seconds=0.2)


def object_schema(properties: dict, *, required: tuple[str, ...] = (), strict: bool = True) -> dict:
    """A tool's input schema: a JSON object with these properties; `strict` (the default) refuses any other."""
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if strict:
        schema["additionalProperties"] = False
    return schema


def tool(
    *,
    title: str,
    summary: str,
    description: str,
    properties: dict,
    side_effect: str,
    contexts: Iterable[str],
    timeout: float | Callable[[], float],
    name: str | None = None,
    required: tuple[str, ...] = (),
    strict: bool = True,
    retry: RetryPolicy = SERVER_TOOL_RETRY,
    creates_tasks: bool = False,
    acts_outside_impo: bool = False,
    approval: ApprovalPolicy | None = None,
    always_allowable: bool = False,
) -> Callable[[Callable[[ToolInvocation], Any]], Callable[[ToolInvocation], Any]]:
    """Declares the decorated handler a server tool, named after it unless `name` is given, and registers it.

    The person reads `title` and `summary` on the chat's tool card; the agent reads `description` and calls it with
    an object of `properties` (`required` among them, no others unless `strict` is off); the definition refuses what
    the registry forbids (see ToolDefinition)."""

    def register(handler: Callable[[ToolInvocation], Any]) -> Callable[[ToolInvocation], Any]:
        registry.register(
            ToolDefinition(
                name=name or handler.__name__,
                title=title,
                summary=summary,
                description=description,
                input_schema=object_schema(properties, required=required, strict=strict),
                side_effect=side_effect,
                contexts=frozenset(contexts),
                timeout_seconds=timeout,
                retry=retry,
                creates_tasks=creates_tasks,
                handler=handler,
                acts_outside_impo=acts_outside_impo,
                approval=approval,
                always_allowable=always_allowable,
            )
        )
        return handler

    return register


def device_tool(
    *,
    name: str,
    title: str,
    summary: str,
    description: str,
    properties: dict,
    contexts: Iterable[str],
    timeout: float | Callable[[], float],
    required: tuple[str, ...] = (),
    strict: bool = True,
    approval: ApprovalPolicy | None = None,
    always_allowable: bool = False,
) -> ToolDefinition:
    """Declares and registers a tool the user's device runs: no server handler, its outcome uncertain (never
    retried), acting outside Impo (so by default a person approves each call)."""
    return registry.register(
        ToolDefinition(
            name=name,
            title=title,
            summary=summary,
            description=description,
            input_schema=object_schema(properties, required=required, strict=strict),
            side_effect=SideEffect.UNCERTAIN,
            contexts=frozenset(contexts),
            timeout_seconds=timeout,
            device=True,
            acts_outside_impo=True,
            approval=approval,
            always_allowable=always_allowable,
        )
    )
