"""Write paths of the runtime, by concern; each entry point is one durable transaction.

- `commands`: the owner's messages, tasks, cancels and approval answers;
- `admission`: the command as validated and the one statement that admits it;
- `lease`: the claim rule, claims, fenced writes, heartbeats and releases;
- `lifecycle`: every state change of a locked run;
- `sweeper`: lost wake-ups, expired leases, approval deadlines;
- `staff`: staff's decisions and audited actions on runs;
- `devices`: the device bridge's writes and staff's findings on uncertain tool calls.

Lock order, everywhere: a Run row before its Conversation row (`runtime.locks`, which takes every Run lock).
The names callers use are re-exported here.
"""

from runtime.events import append_events
from runtime.services.admission import (
    AdmissionStatement,
    MainChatTarget,
    MessageCommand,
    accepted_payload,
    admission_statement,
)
from runtime.services.commands import (
    TASK_TITLE_MAX,
    Receipt,
    answer_tool_approval,
    create_task,
    default_task_title,
    ensure_main_conversation,
    open_task,
    request_cancel,
    set_message_policy,
    submit_main_chat_message,
    submit_task_message,
)
from runtime.services.devices import claim_invocation, complete_invocation, register_device, resolve_uncertain_call
from runtime.services.lease import (
    Lease,
    LeasedOutput,
    LeaseLost,
    claim,
    claim_run,
    extend_leases,
    fenced,
    finish_run,
    project_outputs_together,
    release_after_error,
    release_for_provider,
)
from runtime.services.lifecycle import (
    FencedRun,
    Output,
    await_approval,
    await_reconciliation,
    enter_waiting_device,
    fail_parked_run,
    finish_in_transaction,
    leave_waiting_device,
    mark_input_sent,
    note_provider_recovered,
    project_output,
    provider_backoff_seconds,
    resume_parked_run,
    start_input_over,
)
from runtime.services.staff import (
    lock_run_for_staff,
    reopen_failed_run,
    reopen_owned_failed_run,
    staff_cancel_run,
    staff_fail_run,
    staff_retry_run,
)
from runtime.services.sweeper import SWEEP_BATCH, SweepReport, expire_tool_approvals, sweep_runs

__all__ = [
    "SWEEP_BATCH",
    "TASK_TITLE_MAX",
    "AdmissionStatement",
    "FencedRun",
    "Lease",
    "LeasedOutput",
    "LeaseLost",
    "MainChatTarget",
    "MessageCommand",
    "Output",
    "Receipt",
    "SweepReport",
    "accepted_payload",
    "admission_statement",
    "answer_tool_approval",
    "append_events",
    "await_approval",
    "await_reconciliation",
    "claim",
    "claim_invocation",
    "complete_invocation",
    "claim_run",
    "create_task",
    "default_task_title",
    "enter_waiting_device",
    "ensure_main_conversation",
    "expire_tool_approvals",
    "fail_parked_run",
    "fenced",
    "finish_in_transaction",
    "finish_run",
    "project_outputs_together",
    "extend_leases",
    "leave_waiting_device",
    "lock_run_for_staff",
    "mark_input_sent",
    "note_provider_recovered",
    "open_task",
    "project_output",
    "provider_backoff_seconds",
    "release_after_error",
    "register_device",
    "release_for_provider",
    "reopen_failed_run",
    "reopen_owned_failed_run",
    "request_cancel",
    "resolve_uncertain_call",
    "resume_parked_run",
    "set_message_policy",
    "staff_cancel_run",
    "staff_fail_run",
    "staff_retry_run",
    "start_input_over",
    "submit_main_chat_message",
    "submit_task_message",
    "sweep_runs",
]
