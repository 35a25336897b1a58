"""Fuzz the REST API from its own OpenAPI schema with schemathesis, against the web server on the test database.

Schema-valid and schema-violating requests go to every operation: none may answer 5xx, a violating one must be
refused (4xx), a valid one accepted, and every answer must be one the schema documents. Real ids of the user's
own task, submission, plan, device and device invocation are mixed into the path parameters, so fuzzing reaches
the code behind the 404. Afterwards the database must hold nothing a client could not have legitimately sent.

The suite's budget: the schema's examples and 20 fuzzed cases an operation, valid and violating. `make fuzz` adds
the coverage phase (every constraint's boundaries and violations, about 4,000 cases: most of a run's time) and
fuzzes 100 an operation. IMPO_FUZZ_PHASES, IMPO_FUZZ_EXAMPLES (fuzzed cases an operation), IMPO_FUZZ_SECONDS (a timed
run instead) and IMPO_FUZZ_SEED (default fixed, so CI is reproducible) widen or replay a run.
"""

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from devtools.stack import MAKE_RUN_WEB_PROCESSES, VENV_BIN, start_web, wait_until
from runtime.models import Event, Message, Run, Submission
from runtime.realtime.stream_schema import STREAM_PATH
from tests.client import token_of
from tests.factories import UserFactory
from tools.models import DeviceInvocation, ToolApproval

pytestmark = pytest.mark.slow

DEFAULT_SEED = 20261203
DEFAULT_EXAMPLES = 20
DEFAULT_PHASES = "examples,fuzzing"

# All of schemathesis's checks, named in the config (not with `--checks all`, which would override the
# per-operation exceptions below).
EVERY_CHECK = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "use_after_free",
    "ensure_resource_availability",
    "ignored_auth",
)

# Rules the schema cannot state, so a schema-valid request may still be refused with a 400:
# - a scheduled task's `runAt` must lie in the future and its cron fields must form an expression that fires;
# - a runs-page cursor is opaque: only one this endpoint returned decodes;
# - an approval's edited `arguments` must fit the called tool's own schema, and only a denial has a `reason`;
# - a webhook endpoint's `url` must be an http(s) URL a delivery can be sent to, without credentials in it;
# - a push subscription's `endpoint` likewise, and its `keys` base64url of a P-256 point and a 16-byte secret.
# - a notification's approve/deny capability is a secret only a push carries: a well-formed one is unknown (404).
CONFIG_TEMPLATE = """
[checks]
{every_check}

{owned_ids}

[[operations]]
include-path = ["/api/v1/scheduled-tasks/", "/api/v1/scheduled-tasks/{{plan_id}}/"]
include-method = ["POST", "PUT"]
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path = "/api/v1/scheduled-tasks/{{plan_id}}/runs/"
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path = "/api/v1/tool-calls/{{tool_call_id}}/approval"
checks.positive_data_acceptance.enabled = false

# The SSE stream stays open while its run waits (an approval, a device): it is exercised by tests/realtime, not here.
[[operations]]
include-path = "/api/v1/submissions/{{submission_id}}/stream"
enabled = false

[[operations]]
include-path = ["/api/v1/webhooks/", "/api/v1/webhooks/{{endpoint_id}}/"]
include-method = ["POST", "PATCH"]
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path = "/api/v1/approvals/decide"
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path = "/api/v1/push-subscriptions/"
include-method = "POST"
checks.positive_data_acceptance.enabled = false
"""


def seed_owned_objects(web_url: str, token: str) -> dict[str, str]:
    """One of each object a path parameter names, made through the API like a client would; the device
    invocation comes from a real worker running a message that asks for play_sound, the tool call awaiting
    approval from a task's save_note (made to need approval by the stack's setting)."""
    with httpx.Client(base_url=web_url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        task = client.post("/api/v1/tasks", json={"clientMessageId": "fuzz-task", "text": "a task"}).json()
        client.post(
            "/api/v1/tasks", json={"clientMessageId": "fuzz-approval", "text": '/tool save_note {"text": "fuzz"}'}
        ).raise_for_status()
        plan = client.post(
            "/api/v1/scheduled-tasks/",
            json={
                "clientRequestId": "fuzz-plan",
                "title": "Morning note",
                "goal": "Say good morning.",
                "schedule": {
                    "frequency": "daily",
                    "timeZone": "Europe/Berlin",
                    "runAt": None,
                    "time": "08:00",
                    "weekdays": None,
                    "cron": None,
                },
                "enabled": True,
            },
        ).json()
        device_id = client.post(
            "/api/v1/devices/register", json={"installationId": "fuzz", "tools": ["play_sound"]}
        ).json()["deviceId"]
        client.post(
            "/api/v1/conversation/messages",
            json={
                "clientMessageId": "fuzz-sound",
                "text": '/tool play_sound {"sound": "chime"}',
                "deviceId": device_id,
            },
        ).raise_for_status()
        # Generous: the owner's first runs create their agent and sessions on a machine the suite keeps busy.
        invocation = wait_until(
            lambda: DeviceInvocation.objects.filter(device_id=device_id).first(),
            timeout=150,
            what="the play_sound invocation",
        )
        approval = wait_until(lambda: ToolApproval.objects.first(), timeout=150, what="the save_note approval")
    return {
        "path.task_id": task["taskId"],
        "path.submission_id": task["submissionId"],
        "path.plan_id": plan["id"],
        "path.device_id": device_id,
        "path.invocation_id": str(invocation.id),
        "path.tool_call_id": str(approval.tool_call_id),
        "body.deviceId": device_id,
    }


def owned_id_bindings(owned_ids: dict[str, str]) -> str:
    """Config that sends the real id in 70% of the cases and a generated one in the rest."""
    dictionaries = [f'[dictionaries.d{index}]\nvalues = ["{value}"]' for index, value in enumerate(owned_ids.values())]
    bindings = [
        f'"{parameter}" = {{ dictionary = "d{index}", probability = 0.7 }}' for index, parameter in enumerate(owned_ids)
    ]
    return "\n".join([*dictionaries, "[parameters]", *bindings])


@pytest.mark.timeout(900)
def test_the_api_survives_fuzzing_from_its_own_schema(stack, tmp_path: Path, capsys):
    user = UserFactory()
    token = token_of(user)
    stack.env["IMPO_TOOL_APPROVAL"] = "play_sound=never,save_note=always"
    stack.start_worker()
    _, web_url = start_web(stack, processes=MAKE_RUN_WEB_PROCESSES)
    owned_ids = seed_owned_objects(web_url, token)
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        CONFIG_TEMPLATE.format(
            every_check="\n".join(f"{check}.enabled = true" for check in EVERY_CHECK),
            owned_ids=owned_id_bindings(owned_ids),
        )
    )

    result = subprocess.run(
        [
            str(VENV_BIN / "schemathesis"),
            "--config-file",
            str(config),
            "run",
            f"{web_url}/api/schema/",
            "--header",
            f"Authorization: Bearer {token}",
            "--phases",
            os.environ.get("IMPO_FUZZ_PHASES", DEFAULT_PHASES),
            # A number of cases per operation, not a time budget: on a loaded machine a time budget ends the run
            # before every operation is reached; IMPO_FUZZ_SECONDS turns fuzzing into a timed run instead.
            *fuzzing_budget(),
            "--seed",
            os.environ.get("IMPO_FUZZ_SEED", str(DEFAULT_SEED)),
            # One worker: CPython 3.11.7's ast is not thread-safe ("AST constructor recursion depth mismatch"),
            # and Hypothesis parses source when it describes a strategy.
            "--workers",
            "1",
            "--request-timeout",
            "10",
        ],
        cwd=tmp_path,  # schemathesis keeps a crash cache in its working directory
        capture_output=True,
        text=True,
        timeout=600,
    )
    heading = next((name for name in ("= WARNINGS =", "= SUMMARY =") if name in result.stdout), None)
    summary = result.stdout[result.stdout.index(heading) :] if heading else result.stdout[-3000:]
    with capsys.disabled():
        print("\n" + summary)

    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-3000:]
    paths = httpx.get(f"{web_url}/api/schema/?format=json").json()["paths"]
    # Every operation but the SSE stream, which the configuration leaves to tests/realtime.
    operations = sum(len(methods) for path, methods in paths.items() if path != STREAM_PATH)
    assert f"Tested: {operations}" in result.stdout, "an operation went untested: " + summary
    assert_only_legitimate_commands_were_stored(user)


def fuzzing_budget() -> list[str]:
    if seconds := os.environ.get("IMPO_FUZZ_SECONDS"):
        return ["--max-time", seconds]
    return ["--max-examples", os.environ.get("IMPO_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES))]


def assert_only_legitimate_commands_were_stored(user) -> None:
    """Whatever the fuzzer got accepted is a well-formed command, admitted whole."""
    texts = Message.objects.filter(conversation__owner=user, role="user").values_list("text", flat=True)
    assert texts, "the fuzzer got no message accepted: the valid half of the run proved nothing"
    for text in texts:
        assert text.strip() and "\x00" not in text, f"a blank or NUL-bearing message was stored: {text!r}"

    submissions = Submission.objects.filter(owner=user)
    assert Run.objects.filter(submission__in=submissions).count() == submissions.count()
    accepted_events = Event.objects.filter(conversation__owner=user, type="submission.accepted")
    assert accepted_events.count() == submissions.count()
