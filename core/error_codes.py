"""Every error code a client can meet, each defined once with its HTTP status, whether retrying may help, and what it
means.

Two kinds share the catalogue. An HTTP code is an answer: it has a `status` and leaves in the ICA error body
(`core.errors`). A run or tool code has no status of its own: it reaches the client inside a resource — a
Submission's `error`, a tool call's `errorCode`, a run event — and the agent reads a tool's as its output. A member
is a `str`, so it is written to a column, a JSON body or an event payload as the bare code the wire always carried.

Codes not listed here pass through unchanged from outside: the provider's own code of a failed turn, and the code a
device reports with a failed result.
"""

from dataclasses import dataclass
from enum import StrEnum


class ErrorCode(StrEnum):
    def __new__(cls, code: str, status: int | None, retryable: bool, meaning: str):
        member = str.__new__(cls, code)
        member._value_ = code
        member.status = status
        member.retryable = retryable
        member.meaning = meaning
        return member

    @property
    def code(self) -> str:
        return self.value

    # HTTP answers.
    INVALID_REQUEST = "invalid_request", 400, False, "The request is malformed or a value breaks the input rules."
    ALWAYS_ALLOW_NOT_OFFERED = (
        "always_allow_not_offered",
        400,
        False,
        "The tool takes no standing permission (`remember`): each of its calls is asked.",
    )
    INVALID_CURSOR = "invalid_cursor", 400, False, "The page cursor is not one this API handed out."
    INVALID_TASK_SCHEDULE = "invalid_task_schedule", 400, False, "The scheduled task's schedule breaks its contract."
    SCHEDULE_IN_PAST = "schedule_in_past", 400, False, "A one-off schedule's runAt is not in the future."
    WEBHOOK_TARGET_FORBIDDEN = (
        "webhook_target_forbidden",
        400,
        False,
        "The webhook URL is plain http where https is required, or its host resolves to a loopback, private,"
        " link-local, multicast, reserved or unspecified address.",
    )
    HOST_NOT_ALLOWED = (
        "host_not_allowed",
        400,
        False,
        "The Host header names a host this server does not serve (not in its DJANGO_ALLOWED_HOSTS).",
    )
    INVALID_UPLOAD = (
        "invalid_upload",
        400,
        False,
        "The upload's manifest breaks its rules (exactly id, name, mediaType, sizeBytes, sha256; a size within"
        " maxBytes), or the bytes PUT are not the manifest's size and SHA-256.",
    )
    INVALID_ATTACHMENTS = (
        "invalid_attachments",
        400,
        False,
        "A message's attachmentIds break their rules: more than maxFiles, an id twice or not a UUID, or an id that"
        " is none of the sender's files (another user's looks the same as one that never existed).",
    )
    UNAUTHORIZED = "unauthorized", 401, False, "No valid session or token."
    FORBIDDEN = "forbidden", 403, False, "Authenticated, but not allowed to do this."
    PASSWORD_INCORRECT = "password_incorrect", 403, False, "The password confirming the account's deletion is wrong."
    NOT_FOUND = "not_found", 404, False, "No such object for this user (another user's object looks the same)."
    METHOD_NOT_ALLOWED = "method_not_allowed", 405, False, "The route does not answer this HTTP method."
    NOT_ACCEPTABLE = "not_acceptable", 406, False, "The route cannot answer in a media type the Accept header allows."
    REQUEST_TIMEOUT = "request_timeout", 408, True, "The request body did not arrive in time; nothing was saved."
    IDEMPOTENCY_CONFLICT = (
        "idempotency_conflict",
        409,
        False,
        "This client id was already used with a different body.",
    )
    RUN_IN_PROGRESS = (
        "run_in_progress",
        409,
        True,
        "The conversation refuses a message while a reply is unfinished (its `activeSubmissionId` is in the error).",
    )
    NOT_RETRYABLE = "not_retryable", 409, False, "Only a failed reply (its latest version) can be tried again."
    NOT_REGENERABLE = (
        "not_regenerable",
        409,
        False,
        "Only the last reply of a conversation, once it has ended, can be regenerated.",
    )
    EDIT_NOT_LAST = (
        "edit_not_last",
        409,
        False,
        "Only the user message of a conversation's last exchange can be edited.",
    )
    REGISTRATION_CONFLICT = "registration_conflict", 409, False, "The device registration raced another; try again."
    ATTACHMENT_CONFLICT = (
        "attachment_conflict",
        409,
        False,
        "This attachment id was already prepared with a different manifest.",
    )
    UPLOAD_INCOMPLETE = (
        "upload_incomplete",
        409,
        True,
        "The attachment's bytes have not all reached the store yet, or a message names a file not yet completed.",
    )
    ATTACHMENT_IN_USE = "attachment_in_use", 409, False, "A message refers to the attachment; it cannot be deleted."
    APPROVAL_CONFLICT = "approval_conflict", 409, False, "The tool call was already answered differently."
    CAPABILITY_USED = (
        "capability_used",
        409,
        False,
        "A notification's approve/deny capability was used already, or its approval was decided another way.",
    )
    NOT_UNCERTAIN = "not_uncertain", 409, False, "Only an uncertain tool call can be reconciled."
    EXECUTION_MISMATCH = "execution_mismatch", 409, False, "The result is for another execution of the invocation."
    INVOCATION_NOT_CLAIMED = (
        "invocation_not_claimed",
        409,
        False,
        "The device reported a result without claiming the invocation first.",
    )
    SCHEDULE_CHANGED = "schedule_changed", 409, False, "The scheduled task changed since this revision; reload it."
    SCHEDULE_LIMIT_REACHED = "schedule_limit_reached", 409, False, "The user has as many scheduled tasks as allowed."
    WEBHOOK_LIMIT_REACHED = "webhook_limit_reached", 409, False, "The user has as many webhook endpoints as allowed."
    PUSH_SUBSCRIPTION_LIMIT_REACHED = (
        "push_subscription_limit_reached",
        409,
        False,
        "The user has as many push subscriptions (browsers) as allowed.",
    )
    PUSH_ENDPOINT_TAKEN = (
        "push_endpoint_taken",
        409,
        False,
        "The push endpoint is registered by another account, and the keys sent are not its keys.",
    )
    INVOCATION_EXPIRED = "invocation_expired", 410, False, "The device invocation passed its deadline."
    INVOCATION_CANCELLED = (
        "invocation_cancelled",
        410,
        False,
        "The run of the device invocation was cancelled (as a tool error: the call ended unrun with its run).",
    )
    PERMISSION_REVOKED = (
        "permission_revoked",
        410,
        False,
        "The device no longer offers the tool (as a tool error: the call ended when the device dropped it).",
    )
    APPROVAL_EXPIRED = "approval_expired", 410, False, "The tool call's approval passed its deadline."
    APPROVAL_CANCELLED = "approval_cancelled", 410, False, "The run of the tool call awaiting approval was cancelled."
    CAPABILITY_EXPIRED = (
        "capability_expired",
        410,
        False,
        "A notification's approve/deny capability came after its approval's deadline; nothing was decided.",
    )
    SCHEDULE_DELETED = "schedule_deleted", 410, False, "The scheduled task was deleted."
    REQUEST_TOO_LARGE = "request_too_large", 413, False, "The JSON body is over the size limit."
    ATTACHMENT_QUOTA_EXCEEDED = (
        "attachment_quota_exceeded",
        413,
        False,
        "The owner's stored attachments and this one would be over the owner's quota; delete some first.",
    )
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type", 415, False, "The body is not application/json."
    UNSUPPORTED_FILE_TYPE = (
        "unsupported_file_type",
        415,
        False,
        "The file's type (its name's extension and declared media type together) is not one `GET /attachments` offers.",
    )
    ATTACHMENT_UNREADABLE = (
        "attachment_unreadable",
        422,
        False,
        "The stored bytes are not what the manifest declares (size, SHA-256, or content of its type); they were"
        " deleted.",
    )
    RATE_LIMITED = "rate_limited", 429, True, "A per-user limit; `Retry-After` says when to try again."
    INTERNAL_ERROR = "internal_error", 500, True, "An unexpected failure of the service."
    SERVICE_UNAVAILABLE = "service_unavailable", 503, True, "Nothing was saved; the same command may be retried."
    NOT_READY = "not_ready", 503, True, "The readiness check found a dependency failing."

    # A run's error (a Submission's `error`, the run events).
    PROVIDER_REJECTED = "provider_rejected", None, False, "The provider refused to start the run's turn."
    PROVIDER_ERROR = "provider_error", None, False, "The provider refused a request the run needed."
    TURN_FAILED = "turn_failed", None, False, "The provider's turn failed without saying why."
    MAX_ATTEMPTS_EXCEEDED = "max_attempts_exceeded", None, True, "The run failed on every attempt it was allowed."
    FAILED_BY_STAFF = "failed_by_staff", None, True, "Support ended this attempt as failed; the owner may try again."
    PENDING_RECONCILIATION = (
        "pending_reconciliation",
        None,
        True,
        "The provider's outcome is in doubt; the run waits until it is settled.",
    )
    SESSION_NOT_FOUND = (
        "session_not_found",
        None,
        True,
        "The provider lost the conversation's session; the run started over in a new one.",
    )
    AGENT_NOT_FOUND = (
        "agent_not_found",
        None,
        True,
        "The provider lost the user's agent; the run started over with a new agent and session.",
    )

    # A tool call's error (its receipt, `errorCode`, the tool events; the agent reads `code: message`).
    UNKNOWN_TOOL = "unknown_tool", None, False, "The agent asked for a tool that is not offered here."
    INVALID_ARGUMENTS = "invalid_arguments", None, False, "The tool's arguments break its schema."
    NO_DEVICE = "no_device", None, False, "No registered device of the user can run the tool."
    TOOL_UNAVAILABLE = "tool_unavailable", None, True, "The tool failed transiently on every attempt allowed."
    TIMEOUT = "timeout", None, True, "The tool did not finish in its time limit."
    DEVICE_TIMEOUT = (
        "device_timeout",
        None,
        False,
        "The device reported no result before the deadline; the action may or may not have run.",
    )
    DEVICE_ERROR = "device_error", None, False, "The device reported a failure without a code of its own."
    APPROVAL_DENIED = "approval_denied", None, False, "The user denied the tool call."
    APPROVAL_TIMEOUT = "approval_timeout", None, False, "Nobody answered the tool call's approval before its deadline."
    RUN_CANCELLED = "run_cancelled", None, False, "The run was cancelled while the tool call awaited approval."
    RECONCILED_FAILED = "reconciled_failed", None, False, "Staff found that an uncertain tool call did not act."


HTTP_CODES = tuple(code for code in ErrorCode if code.status is not None)
# What a Submission's `error.code` may say, besides the provider's own code of a failed turn.
RUN_ERROR_CODES = (
    ErrorCode.PROVIDER_REJECTED,
    ErrorCode.PROVIDER_ERROR,
    ErrorCode.TURN_FAILED,
    ErrorCode.MAX_ATTEMPTS_EXCEEDED,
    ErrorCode.FAILED_BY_STAFF,
    ErrorCode.PENDING_RECONCILIATION,
)
# Why a run started over in a new session (the `reason` of a run.session_replaced event).
START_OVER_REASONS = (ErrorCode.SESSION_NOT_FOUND, ErrorCode.AGENT_NOT_FOUND)
# What a tool call's error code may say, besides the code a device reports with a failed result.
TOOL_ERROR_CODES = (
    ErrorCode.UNKNOWN_TOOL,
    ErrorCode.INVALID_ARGUMENTS,
    ErrorCode.NO_DEVICE,
    ErrorCode.TOOL_UNAVAILABLE,
    ErrorCode.TIMEOUT,
    ErrorCode.DEVICE_TIMEOUT,
    ErrorCode.DEVICE_ERROR,
    ErrorCode.INVOCATION_CANCELLED,
    ErrorCode.PERMISSION_REVOKED,
    ErrorCode.APPROVAL_DENIED,
    ErrorCode.APPROVAL_TIMEOUT,
    ErrorCode.RUN_CANCELLED,
    ErrorCode.RECONCILED_FAILED,
)


@dataclass(frozen=True)
class RunError:
    """Why a run failed (or waits): what its Submission's `error` says."""

    code: str  # an ErrorCode, or the provider's own code of a failed turn
    message: str
    # Whether trying the run again may help: the catalogued code's own flag unless given (a provider's code: no).
    retryable: bool | None = None

    def __post_init__(self):
        if self.retryable is None:
            object.__setattr__(self, "retryable", isinstance(self.code, ErrorCode) and bool(self.code.retryable))

    def as_payload(self) -> dict:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}
