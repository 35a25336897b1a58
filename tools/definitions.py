"""The built-in tools, each declared beside its handler. Registered when the app is ready (tools.apps)."""

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from core.error_codes import ErrorCode
from runtime.models import ConversationKind
from tools.models import Note, SideEffect
from tools.registry import ToolError, ToolInvocation, device_tool, tool

EVERYWHERE = frozenset(ConversationKind.values)
MAIN_CHAT_ONLY = frozenset({ConversationKind.MAIN_CHAT})
NOTE_MAX = 4000
TASK_PROMPT_MAX = 4000


@tool(
    title="Tell the time",
    summary="Reads the current date and time, in your time zone unless another is named.",
    description="The current date and time, in the user's time zone unless another is given.",
    properties={"timeZone": {"type": "string", "minLength": 1, "maxLength": 64}},
    side_effect=SideEffect.READ,
    contexts=EVERYWHERE,
    timeout=2.0,
)
def current_time(call: ToolInvocation) -> dict:
    zone_name = call.arguments.get("timeZone") or call.submission.client_context.get("timeZone") or "UTC"
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, f"timeZone: unknown time zone {zone_name!r}") from None
    return {"now": datetime.now(zone).isoformat(), "timeZone": zone_name}


@tool(
    title="List your notes",
    summary="Reads your most recent notes, newest first.",
    description="The user's most recent notes, newest first.",
    properties={"limit": {"type": "integer", "minimum": 1, "maximum": 50}},
    side_effect=SideEffect.READ,
    contexts=EVERYWHERE,
    timeout=3.0,
)
def list_notes(call: ToolInvocation) -> dict:
    notes = Note.objects.filter(owner=call.owner).order_by("-created_at")[: call.arguments.get("limit", 10)]
    return {
        "notes": [
            {"noteId": str(note.id), "text": note.text, "createdAt": note.created_at.isoformat()} for note in notes
        ]
    }


@tool(
    title="Save a note",
    summary="Saves a note to your account.",
    description="Saves a note for the user.",
    properties={"text": {"type": "string", "minLength": 1, "maxLength": NOTE_MAX}},
    required=("text",),
    side_effect=SideEffect.TRANSACTIONAL,
    contexts=EVERYWHERE,
    timeout=5.0,
    always_allowable=True,  # only its owner's own notes: an operator asking approval may let the owner allow it always
)
def save_note(call: ToolInvocation) -> dict:
    # Writes only Impo's own database, so it needs no approval by default (an operator may ask for one).
    # Runs inside the transaction that saves the receipt; the note's unique source_call backs that up.
    note = Note.objects.create(owner=call.owner, text=call.arguments["text"], source_call_id=call.tool_call_id)
    return {"noteId": str(note.id)}


def _device_tool_timeout() -> float:
    return settings.IMPO_DEVICE_TOOL_TIMEOUT_SECONDS


# Sound in the user's room, not repeatable: by a device tool's default a person approves each call.
device_tool(
    name="play_sound",
    title="Play a sound",
    summary="Plays a sound on this device, through its speakers.",
    description="Plays a sound on the user's device.",
    properties={
        "sound": {"type": "string", "minLength": 1, "maxLength": 64},
        "volume": {"type": "number", "minimum": 0, "maximum": 1},
    },
    required=("sound",),
    contexts=MAIN_CHAT_ONLY,
    timeout=_device_tool_timeout,
)
