"""The registry: what each context is offered, and which definitions it refuses."""

import pytest

from runtime.models import ConversationKind
from tools.models import SideEffect
from tools.registry import Registry, RetryPolicy, ToolDefinition, registry

OBJECT = {"type": "object", "additionalProperties": False}


def names(tools) -> list[str]:
    return [tool.name for tool in tools]


def definition(**overrides) -> ToolDefinition:
    fields = {
        "name": "probe",
        "description": "A test tool.",
        "input_schema": OBJECT,
        "side_effect": SideEffect.READ,
        "contexts": frozenset({ConversationKind.MAIN_CHAT}),
        "timeout_seconds": 1.0,
        "handler": lambda call: "ok",
    }
    return ToolDefinition(**{**fields, **overrides})


def test_main_chat_is_offered_task_creation_but_no_device_tool_without_a_capable_device():
    assert names(registry.catalog(ConversationKind.MAIN_CHAT)) == [
        "create_task",
        "current_time",
        "list_notes",
        "save_note",
    ]


def test_main_chat_from_a_capable_device_is_offered_its_device_tools():
    assert "play_sound" in names(registry.catalog(ConversationKind.MAIN_CHAT, device_tools=["play_sound"]))


def test_tasks_never_see_device_tools_nor_task_creation():
    catalog = names(registry.catalog(ConversationKind.TASK, device_tools=["play_sound"]))

    assert catalog == ["current_time", "list_notes", "save_note"]


def test_a_tool_is_offered_only_in_the_contexts_it_declares():
    local = Registry()
    local.register(definition(name="only_in_tasks", contexts=frozenset({ConversationKind.TASK})))

    assert names(local.catalog(ConversationKind.MAIN_CHAT)) == []
    assert names(local.catalog(ConversationKind.TASK)) == ["only_in_tasks"]


def test_the_provider_gets_each_tool_as_a_function_with_its_schema():
    [tool] = [tool for tool in registry.catalog(ConversationKind.TASK) if tool.name == "save_note"]

    assert tool.to_provider() == {
        "type": "function",
        "name": "save_note",
        "description": tool.description,
        "parameters": tool.input_schema,
    }


@pytest.mark.parametrize(
    "overrides",
    [
        {"device": True, "handler": None, "side_effect": SideEffect.UNCERTAIN, "contexts": frozenset(ConversationKind)},
        {"creates_tasks": True, "contexts": frozenset(ConversationKind)},
    ],
    ids=["device tool", "task creation"],
)
def test_a_definition_exposing_device_or_task_creation_tools_to_tasks_is_refused(overrides):
    with pytest.raises(ValueError, match="Tasks never get"):
        definition(**overrides)


def test_an_uncertain_tool_with_a_retry_policy_is_refused():
    with pytest.raises(ValueError, match="never retried"):
        definition(
            side_effect=SideEffect.UNCERTAIN,
            device=True,
            handler=None,
            retry=RetryPolicy(attempts=2, backoff_seconds=1),
        )


def test_a_definition_with_an_invalid_schema_is_refused():
    from jsonschema.exceptions import SchemaError

    with pytest.raises(SchemaError):
        definition(input_schema={"type": "no-such-type"})


def test_registering_a_name_twice_is_refused():
    local = Registry()
    local.register(definition())

    with pytest.raises(ValueError, match="already registered"):
        local.register(definition())


def test_a_schema_violation_is_described_with_the_offending_field():
    save_note = registry.get("save_note")

    assert save_note.validation_error({"text": "milk"}) is None
    assert save_note.validation_error({"text": 5}) == "text: 5 is not of type 'string'"
    assert "'text' is a required property" in save_note.validation_error({})
    assert "Additional properties" in save_note.validation_error({"text": "x", "colour": "red"})


def test_retry_backoff_doubles_after_the_second_attempt():
    policy = RetryPolicy(attempts=4, backoff_seconds=0.5)

    assert [policy.delay_before(attempt) for attempt in (2, 3, 4)] == [0.5, 1.0, 2.0]


def test_every_registered_tool_has_a_title_and_a_one_line_summary_for_people():
    words = registry.words_for_people()

    assert {"current_time", "list_notes", "save_note", "play_sound", "create_task"} <= set(words)
    for name, tool in words.items():
        assert tool["title"] and tool["title"] != name, name
        assert tool["summary"].endswith(".") and "\n" not in tool["summary"] and len(tool["summary"]) <= 100, name
