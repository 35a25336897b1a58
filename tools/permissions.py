"""Standing permissions: an owner's "Always allow" for a tool (docs/api.md "Tool approval").

Granted only with an approval of one of that tool's calls, in the approval's own transaction (`grant`, called by
tools.approvals), and only for a tool its registry entry marks `always_allowable`; read when a call is recorded, so
the owner's later calls of that tool are dispatched without asking. A grant whose tool loses the mark asks again.
No row lock: a grant is an insert that ignores the one already there, a revocation a delete.
"""

import re

from django.db import transaction

from core.error_codes import ErrorCode
from core.errors import InvalidRequest, NotFound
from tools.models import ToolPermission
from tools.registry import ToolDefinition, registry

# What a tool's name can be; anything else (a NUL, a thousand characters) names no permission, and is never queried.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def grant(owner_id, definition: ToolDefinition) -> None:
    """Inside the approval's transaction: the owner always allows this tool from now on (again is no change)."""
    if not definition.always_allowable:
        raise InvalidRequest(
            f"{definition.title or definition.name} takes no standing permission: each of its calls is asked.",
            code=ErrorCode.ALWAYS_ALLOW_NOT_OFFERED,
        )
    ToolPermission.objects.bulk_create(
        [ToolPermission(owner_id=owner_id, tool_name=definition.name)], ignore_conflicts=True
    )


def is_always_allowed(owner_id, definition: ToolDefinition) -> bool:
    return (
        definition.always_allowable
        and ToolPermission.objects.filter(owner_id=owner_id, tool_name=definition.name).exists()
    )


def revoke(owner, tool_name: str) -> None:
    """The owner takes back a standing permission: the next call of the tool is asked. None granted → 404."""
    if not TOOL_NAME.fullmatch(tool_name):
        raise NotFound("No standing permission for this tool.")
    with transaction.atomic(durable=True):
        if not ToolPermission.objects.filter(owner=owner, tool_name=tool_name).delete()[0]:
            raise NotFound("No standing permission for this tool.")


def permissions_to_wire(owner_id) -> list[dict]:
    """The owner's standing permissions, oldest first, each with the tool's title for people."""
    permissions = ToolPermission.objects.filter(owner_id=owner_id).order_by("created_at", "tool_name")
    return [
        {
            "toolName": permission.tool_name,
            "title": (definition.title if (definition := registry.get(permission.tool_name)) else permission.tool_name),
            "grantedAt": permission.created_at.isoformat(),
        }
        for permission in permissions
    ]
