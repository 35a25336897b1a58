"""/api/docs/: the OpenAPI schema browsable with Redoc, vendored and served by Impo itself; the schema lists every
route of ICA v1 (the SSE stream included) with examples of the main bodies; an unknown API route's 404 is an ICA
error body like any other."""

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db


def api_routes(patterns=None, prefix=""):
    """Every route under /api/v1/, spelled as the schema spells it (`<ica_uuid:task_id>` -> `{task_id}`)."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from api_routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            yield "/" + schema_spelling(route)


def schema_spelling(route: str) -> str:
    """`tasks/<ica_uuid:task_id>` and `^webhooks/(?P<endpoint_id>[^/]+)/?$` as the schema writes them."""
    route = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route)
    route = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
    return route.replace("^", "").replace("$", "").replace("/?", "/")


def test_the_docs_page_loads_redoc_from_this_server_only():
    page = Client().get("/api/docs/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "https://" not in html and "http://" not in html and "//fonts." not in html  # no outside host
    script = re.search(r'<script src="([^"]+)"', html).group(1)
    assert script.startswith("/static/drf_spectacular_sidecar/redoc/")
    assert Client().get(script).status_code == 200
    assert '"/api/schema/"' in html


def test_every_api_route_is_in_the_schema_the_stream_included(schema):
    routes = set(api_routes())

    assert "/api/v1/submissions/{submission_id}/stream" in routes
    assert sorted(routes - set(schema["paths"])) == []
    stream = schema["paths"]["/api/v1/submissions/{submission_id}/stream"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]


def test_the_main_bodies_have_examples(schema):
    def examples(path, method):
        body = schema["paths"][path][method]["requestBody"]["content"]["application/json"]
        return body.get("examples", {})

    assert examples("/api/v1/conversation/messages", "post")
    assert examples("/api/v1/tasks", "post")
    assert examples("/api/v1/conversations/{conversation_id}", "patch")
    assert examples("/api/v1/tool-calls/{tool_call_id}/approval", "post")


def test_an_unknown_api_route_answers_the_ica_error_body(api):
    response = api.get("/api/v1/no-such-route")

    assert response.status_code == 404
    body = response.json()
    assert set(body) == {"error", "requestId"}
    assert body["error"] == {"code": "not_found", "message": "Not found.", "retryable": False}
