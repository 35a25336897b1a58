"""The `create_task` tool: registered by runtime, because admitting a Task is runtime's write path.

The tools app stays below runtime (it never admits work or changes runs); this definition joins its
registry from above when the runtime app is ready.
"""

from runtime.services.admission import MessageCommand
from runtime.services.commands import open_task
from tools.definitions import MAIN_CHAT_ONLY, TASK_PROMPT_MAX
from tools.models import SideEffect
from tools.registry import ToolInvocation, tool


@tool(
    title="Start a task",
    summary="Starts a background task that works on a goal in a chat of its own.",
    description="Starts a background Task that works on the prompt in its own conversation.",
    properties={
        "prompt": {"type": "string", "minLength": 1, "maxLength": TASK_PROMPT_MAX},
        "title": {"type": "string", "minLength": 1, "maxLength": 120},
    },
    required=("prompt",),
    side_effect=SideEffect.TRANSACTIONAL,
    contexts=MAIN_CHAT_ONLY,
    timeout=10.0,
    creates_tasks=True,
)
def create_task(call: ToolInvocation) -> dict:
    # Same transaction as the receipt; the client message id derived from the call makes a second
    # admission for this call impossible (unique per owner) even if the receipt were bypassed.
    receipt = open_task(
        owner=call.owner,
        command=MessageCommand(client_message_id=f"tool-call:{call.call_id}", text=call.arguments["prompt"]),
        title=call.arguments.get("title"),
    )
    return {
        "taskId": str(receipt.task_id),
        "conversationId": str(receipt.conversation_id),
        "submissionId": str(receipt.submission_id),
    }
