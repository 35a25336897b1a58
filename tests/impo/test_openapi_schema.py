"""The OpenAPI schema states what the API really answers: every success body has a real shape."""

import pytest
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="module")
def schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


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


def test_a_path_id_is_documented_as_a_uuid(schema):
    parameters = [
        parameter
        for operations in schema["paths"].values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "path"
    ]

    assert parameters
    assert {(p["schema"]["type"], p["schema"].get("format")) for p in parameters} == {("string", "uuid")}
