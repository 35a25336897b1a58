"""One run is one trace, across the web process that admits it, the worker that runs it and the web requests of the
device that answers its tool call, as received by an OTLP/HTTP collector from the real processes."""

import httpx
import pytest
from django.test import Client
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from devtools.stack import start_web, wait_until
from runtime import selectors
from runtime.models import Event, EventType, Run, RunState
from tests.client import post_message, submission, token_of, web_client
from tests.devices import device_answers, register_device
from tests.factories import UserFactory
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

TOOL_SCRIPT = '/tool current_time {"timeZone": "Europe/Paris"}\n/tool play_sound {"sound": "chime"}'
# Every boundary one run crosses; the wait below lasts until each has reached the receiver. (A first message's turn
# is followed on its session's streamed create, so no live stream of the session is opened: no `rebyte.session_events`.)
EXPECTED_SPANS = {
    "impo.admission",
    "impo.run",
    "impo.run.drive",
    "rebyte.create_agent",
    "rebyte.create_session",
    "rebyte.list_turns",
    "rebyte.list_items",
    "rebyte.input_tool_result",
    "impo.tool.record",
    "impo.tool.dispatch",
    "impo.device_invocation.claim",
    "impo.device_invocation.result",
}


@pytest.fixture
def receiver():
    running = OtlpReceiver()
    yield running
    running.stop()


@pytest.fixture
def traced_stack(stack, receiver):
    stack.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    stack.env["OTEL_BSP_SCHEDULE_DELAY"] = "200"
    return stack


def answer_the_device_call(phone: httpx.Client, device_id: str) -> None:
    """What the phone does: finds its pending invocation, claims it, runs it, reports the result."""

    def pending():
        listed = phone.get(f"/api/v1/devices/{device_id}/tool-invocations", params={"status": "pending"})
        return listed.json()["invocations"]

    (invocation,) = wait_until(pending, timeout=60, what="the device invocation")
    device_answers(phone, device_id, invocation["invocationId"], {"played": "chime"})


def every_span_received(receiver: OtlpReceiver) -> list[ReceivedSpan] | None:
    spans = receiver.spans()
    return spans if {span.name for span in spans} >= EXPECTED_SPANS else None


def the_one(spans: list[ReceivedSpan], name: str, **attributes) -> ReceivedSpan:
    (found,) = [
        span
        for span in spans
        if span.name == name and all(span.attributes.get(key) == value for key, value in attributes.items())
    ]
    return found


# Long because it follows one trace end to end: every span the run leaves in both processes hangs from its
# admission, then every place that names the trace (events, run, wire, admin) names the same one.
def test_a_run_with_a_device_tool_call_is_one_trace_rooted_at_its_admission(traced_stack, receiver):
    _, web = start_web(traced_stack)
    traced_stack.start_worker()
    user = UserFactory(is_staff=True, is_superuser=True)
    with web_client(web, token_of(user)) as phone:
        device_id = register_device(phone)
        submission_id = post_message(phone, TOOL_SCRIPT, deviceId=device_id)["submissionId"]
        answer_the_device_call(phone, device_id)
    run = wait_until(
        lambda: Run.objects.filter(
            submission_id=submission_id, state__in=[RunState.COMPLETED, RunState.FAILED]
        ).first(),
        timeout=60,
        what="the run to finish",
    )
    assert run.state == RunState.COMPLETED, run.error_message
    spans = wait_until(lambda: every_span_received(receiver), timeout=60, what="every span of the run")

    (trace_id,) = {span.trace_id for span in spans}
    by_id = {span.span_id: span for span in spans}
    admission = the_one(spans, "impo.admission")
    assert admission.parent_span_id == ""
    assert admission.service == "impo-web"
    assert admission.attributes["impo.run.id"] == str(run.id)
    for span in spans:
        ancestor = span
        while ancestor.parent_span_id:
            ancestor = by_id[ancestor.parent_span_id]
        assert ancestor == admission, f"{span.name} does not descend from the admission"

    run_span = the_one(spans, "impo.run", **{"impo.run.claimed": True})
    assert (run_span.parent_span_id, run_span.service) == (admission.span_id, "impo-worker")
    drive = the_one(spans, "impo.run.drive")
    assert drive.parent_span_id == run_span.span_id
    provider_calls = [span for span in spans if span.name.startswith("rebyte.")]
    assert {span.parent_span_id for span in provider_calls} == {drive.span_id}
    assert the_one(spans, "rebyte.create_session").attributes["rebyte.operation"] == "create_session"

    clock = the_one(spans, "impo.tool.dispatch", **{"impo.tool.name": "current_time"})
    sound = the_one(spans, "impo.tool.dispatch", **{"impo.tool.name": "play_sound"})
    assert (clock.parent_span_id, clock.attributes["impo.tool.outcome"]) == (drive.span_id, "ok")
    assert (sound.parent_span_id, sound.attributes["impo.tool.outcome"]) == (drive.span_id, "awaiting_device")
    recorded = the_one(spans, "impo.tool.record", **{"impo.tool.name": "play_sound"})
    assert recorded.parent_span_id == drive.span_id
    for name in ("impo.device_invocation.claim", "impo.device_invocation.result"):
        device_span = the_one(spans, name)
        assert (device_span.parent_span_id, device_span.service) == (recorded.span_id, "impo-web")
        assert device_span.attributes["impo.device_invocation.id"] == recorded.attributes["impo.device_invocation.id"]

    # The run's events, written by both processes, name the trace; so do the run, the wire and the admin.
    events = Event.objects.filter(submission_id=submission_id)
    assert {EventType.SUBMISSION_ACCEPTED, EventType.TOOL_ACCEPTED, EventType.RUN_COMPLETED} <= {e.type for e in events}
    assert {event.trace_id for event in events} == {trace_id}
    assert run.trace_id == trace_id
    with web_client(web, token_of(user)) as client:
        assert submission(client, submission_id)["traceId"] == trace_id
    assert {event["traceId"] for event in selectors.submission_events_after(submission_id, 0)} == {trace_id}
    admin = Client()
    admin.force_login(user)
    assert trace_id in admin.get(f"/admin/runtime/run/{run.id}/change/").content.decode()
    assert trace_id in admin.get(f"/admin/runtime/event/?q={trace_id}").content.decode()


def test_without_an_otlp_endpoint_nothing_is_traced_and_events_carry_no_trace(stack):
    _, web = start_web(stack)
    stack.start_worker()
    user = UserFactory()
    with web_client(web, token_of(user)) as client:
        submission_id = post_message(client, '/tool current_time {"timeZone": "UTC"}')["submissionId"]
        run = wait_until(
            lambda: Run.objects.filter(submission_id=submission_id, state=RunState.COMPLETED).first(),
            timeout=60,
            what="the run to complete",
        )

        assert run.traceparent == ""
        assert submission(client, submission_id)["traceId"] is None
    assert set(Event.objects.filter(submission_id=submission_id).values_list("trace_id", flat=True)) == {""}
    assert {event["traceId"] for event in selectors.submission_events_after(submission_id, 0)} == {None}


def test_a_provider_outage_mid_run_is_an_error_on_its_spans_and_the_retry_continues_the_same_trace(
    traced_stack, receiver, rebyte_double
):
    _, web = start_web(traced_stack)
    traced_stack.start_worker()
    token = token_of(UserFactory())
    # Every try the SDK makes of one read: the gateway sorts it as one Unavailable, and the run is given back.
    rebyte_double.fault("list_turns", "http_error", status=503, times=3)

    with web_client(web, token) as client:
        submission_id = post_message(client)["submissionId"]
    run = wait_until(
        lambda: Run.objects.filter(submission_id=submission_id, state=RunState.COMPLETED).first(),
        timeout=60,
        what="the run to complete after the outage",
    )

    def both_attempts_received():
        spans = receiver.spans()
        return spans if len([span for span in spans if span.name == "impo.run.drive"]) == 2 else None

    spans = wait_until(both_attempts_received, timeout=60, what="the spans of both attempts")
    (trace_id,) = {span.trace_id for span in spans}
    assert run.trace_id == trace_id
    admission = the_one(spans, "impo.admission")
    claimed = [span for span in spans if span.name == "impo.run" and span.attributes["impo.run.claimed"]]
    assert len(claimed) == 2
    assert {span.parent_span_id for span in claimed} == {admission.span_id}
    failed_read = the_one(spans, "rebyte.list_turns", **{"rebyte.outcome": "unavailable"})
    assert failed_read.attributes["http.response.status_code"] == 503
    assert failed_read.status_code == Status.STATUS_CODE_ERROR
    failed_drive = [span for span in spans if span.span_id == failed_read.parent_span_id][0]
    assert (failed_drive.name, failed_drive.status_code) == ("impo.run.drive", Status.STATUS_CODE_ERROR)
    (completed_drive,) = [span for span in spans if span.name == "impo.run.drive" and span != failed_drive]
    assert completed_drive.status_code != Status.STATUS_CODE_ERROR
    assert {failed_drive.attributes["impo.run.attempt"], completed_drive.attributes["impo.run.attempt"]} == {1}
