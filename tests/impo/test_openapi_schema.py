"""The OpenAPI schema states what the API really answers: every success body has a real shape, and every error
lists the codes it may carry, from the catalogue."""

from core.error_codes import HTTP_CODES, RUN_ERROR_CODES, TOOL_ERROR_CODES, ErrorCode
from tools.permissions import TOOL_NAME


def success_bodies(schema: dict):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                json_body = response.get("content", {}).get("application/json")  # the SSE stream's is text
                if status.startswith("2") and json_body:
                    yield f"{method.upper()} {path} {status}", json_body["schema"]


def component(schema: dict, reference: dict) -> dict:
    return schema["components"]["schemas"][reference["$ref"].rsplit("/", 1)[-1]]


def test_every_success_body_names_its_fields(schema):
    shapeless = [name for name, body in success_bodies(schema) if not component(schema, body).get("properties")]

    assert shapeless == []


def test_no_field_of_a_success_body_is_an_untyped_placeholder(schema):
    untyped = [
        f"{name}: {field}"
        for name, body in success_bodies(schema)
        for field, field_schema in component(schema, body)["properties"].items()
        if not (field_schema.keys() & {"type", "$ref", "allOf", "oneOf", "enum"})
    ]

    assert untyped == []


def path_parameters(schema: dict) -> list[dict]:
    return [
        parameter
        for operations in schema["paths"].values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "path"
    ]


def test_a_path_id_is_documented_as_a_uuid(schema):
    ids = [p for p in path_parameters(schema) if p["name"] != "tool_name"]

    assert ids
    assert {(p["schema"]["type"], p["schema"].get("format")) for p in ids} == {("string", "uuid")}


def test_a_path_tool_name_is_documented_with_the_names_it_takes(schema):
    names = [p for p in path_parameters(schema) if p["name"] == "tool_name"]

    assert names
    assert {(p["schema"]["type"], p["schema"].get("pattern")) for p in names} == {("string", f"^{TOOL_NAME.pattern}$")}


def error_responses(schema: dict):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    yield f"{method.upper()} {path} {status}", int(status), response["content"]["application/json"]


def test_the_error_body_code_is_one_of_the_catalogue_http_codes(schema):
    detail = component(schema, {"$ref": "#/components/schemas/ErrorDetail"})

    assert detail["properties"]["code"] == {"$ref": "#/components/schemas/ErrorCodeEnum"}
    assert schema["components"]["schemas"]["ErrorCodeEnum"]["enum"] == [code.value for code in HTTP_CODES]


def test_every_error_response_lists_codes_of_its_own_status(schema):
    misfiled = []
    for name, status, content in error_responses(schema):
        envelope, narrowed = content["schema"]["allOf"]
        codes = narrowed["properties"]["error"]["properties"]["code"]["enum"]
        assert envelope == {"$ref": "#/components/schemas/ErrorBody"}, name
        misfiled += [f"{name}: {code}" for code in codes if ErrorCode(code).status != status]
        misfiled += [f"{name}: none listed"] if not codes else []

    assert misfiled == []


def test_an_operation_lists_the_conflicts_it_names(schema):
    responses = schema["paths"]["/api/v1/conversation/messages"]["post"]["responses"]

    assert codes_of(responses["409"]) == ["idempotency_conflict", "run_in_progress", "upload_incomplete"]
    assert codes_of(responses["400"]) == ["invalid_request", "invalid_attachments"]


def codes_of(response: dict) -> list[str]:
    narrowed = response["content"]["application/json"]["schema"]["allOf"][1]
    return narrowed["properties"]["error"]["properties"]["code"]["enum"]


def test_a_submission_error_and_a_tool_error_list_their_known_codes_and_admit_the_provider_s(schema):
    run_code = component(schema, {"$ref": "#/components/schemas/ErrorOut"})["properties"]["code"]
    tool_code = component(schema, {"$ref": "#/components/schemas/ToolState"})["properties"]["errorCode"]

    assert run_code["anyOf"] == [{"type": "string", "enum": [c.value for c in RUN_ERROR_CODES]}, {"type": "string"}]
    assert tool_code["anyOf"] == [{"type": "string", "enum": [c.value for c in TOOL_ERROR_CODES]}, {"type": "string"}]
