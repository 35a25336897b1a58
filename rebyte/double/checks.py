"""What the double refuses: request validation and list paging, each refusal an `ApiError` the HTTP layer answers.

Where the public sources say nothing the double is stricter, never more convenient (rebyte/README.md).
"""

from __future__ import annotations

from typing import Any

from rebyte.double import content
from rebyte.double.errors import ApiError

METADATA_MAX_KEYS = 16
METADATA_KEY_MAX = 64
METADATA_VALUE_MAX = 512
PAGE_LIMIT_DEFAULT = 20
PAGE_LIMIT_MAX = 100


def only(mapping: dict[str, Any], allowed: set[str]) -> None:
    if not isinstance(mapping, dict):
        raise ApiError(400, "invalid_type", "expected a JSON object")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise ApiError(400, "unknown_parameter", f"Unknown parameter: {unknown[0]}", param=unknown[0])


def stream_request(body: dict[str, Any]) -> bool:
    """Whether a session create asks for its event stream; `stream_options` only go with `stream: true` (the SDK)."""
    streamed = body.get("stream", False)
    if not isinstance(streamed, bool):
        raise ApiError(400, "invalid_type", "stream must be a boolean", param="stream")
    options = body.get("stream_options")
    if options is not None:
        if not streamed:
            message = "stream_options is only allowed with stream=true"
            raise ApiError(400, "invalid_parameter", message, param="stream_options")
        only(options, {"include_obfuscation"})
        if not isinstance(options.get("include_obfuscation", True), bool):
            raise ApiError(400, "invalid_type", "include_obfuscation must be a boolean", param="stream_options")
    return streamed


def check_metadata(metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or len(metadata) > METADATA_MAX_KEYS:
        raise ApiError(400, "invalid_metadata", f"metadata is an object of at most {METADATA_MAX_KEYS} pairs")
    for key, value in metadata.items():
        if not (1 <= len(key) <= METADATA_KEY_MAX) or not isinstance(value, str) or len(value) > METADATA_VALUE_MAX:
            raise ApiError(400, "invalid_metadata", "metadata keys are 1–64 characters, values strings ≤ 512")


def check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise ApiError(400, "invalid_type", "tools must be an array", param="tools")
    names = set()
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ApiError(400, "unsupported_tool", "the double serves function tools only", param="tools")
        for required in ("name", "description", "parameters"):
            if required not in tool:
                raise ApiError(400, "missing_required_parameter", f"tools[].{required} is required", param="tools")
        if tool["name"] in names:
            raise ApiError(400, "duplicate_tool", f"tool {tool['name']} is declared twice", param="tools")
        names.add(tool["name"])


def input_script(input_value: Any, *, param: str) -> str:
    """Validates user input and returns what the echo agent reads of its last message (rebyte/double/content.py)."""
    if isinstance(input_value, str) and input_value.strip():
        return input_value
    if not isinstance(input_value, list) or not input_value:
        raise ApiError(400, "missing_required_parameter", "input (the first user message) is required", param=param)
    texts = []
    for message in input_value:
        if (
            not isinstance(message, dict)
            or message.get("role") != "user"
            or message.get("type", "message") != "message"
        ):
            raise ApiError(400, "invalid_input", "input messages have role user", param=param)
        parts = message.get("content")
        if not isinstance(parts, list) or not parts:
            raise ApiError(400, "invalid_input", "input content is a non-empty array", param=param)
        texts.append(content.message_script(parts, param=param))
    return texts[-1]


def check_input_event(event: Any) -> None:
    if not isinstance(event, dict):
        raise ApiError(400, "invalid_type", "each event is an object", param="events")
    kind = event.get("type")
    if kind == "agent.session.input.message":
        only(event, {"type", "input"})
        input_script(event.get("input"), param="events.input")
    elif kind == "agent.session.input.cancel":
        only(event, {"type"})
    elif kind == "agent.session.input.tool_result":
        only(event, {"type", "turn_id", "call_id", "success", "output", "error"})
        if not isinstance(event.get("turn_id"), str) or not isinstance(event.get("call_id"), str):
            raise ApiError(400, "missing_required_parameter", "tool_result needs turn_id and call_id")
        if not isinstance(event.get("success"), bool):
            raise ApiError(400, "missing_required_parameter", "tool_result needs success", param="success")
        if event["success"] and not isinstance(event.get("output"), str | list):
            raise ApiError(400, "missing_required_parameter", "a successful tool_result carries output")
        if not event["success"] and not isinstance(event.get("error"), str):
            raise ApiError(400, "missing_required_parameter", "a failed tool_result carries error text")
    else:
        raise ApiError(400, "unsupported_event", f"the double does not accept {kind!r} events", param="events.type")


def page(objects: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
    raw_limit = query.get("limit", [str(PAGE_LIMIT_DEFAULT)])[-1]
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= PAGE_LIMIT_MAX:
        raise ApiError(400, "invalid_parameter", f"limit must be 1–{PAGE_LIMIT_MAX}", param="limit")
    order = query.get("order", ["desc"])[-1]
    if order not in ("asc", "desc"):
        raise ApiError(400, "invalid_parameter", "order must be asc or desc", param="order")
    ordered = objects if order == "asc" else list(reversed(objects))
    after = query.get("after", [None])[-1]
    if after is not None:
        ids = [o["id"] for o in ordered]
        if after not in ids:
            raise ApiError(400, "invalid_parameter", f"after={after} names no element of this list", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    data = ordered[: int(raw_limit)]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(ordered) > len(data),
    }
