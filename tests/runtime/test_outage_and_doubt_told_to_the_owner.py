"""What the owner's reply says follows the durable state (docs/api.md "The websocket"): a provider outage is
`run.reconnecting` (true, then false once the provider answers) and `reconnecting` on the history's active submission;
a run parked on a doubt says `needsStaff` only once the doubt is given to staff, which the sweeper tells once."""

import pytest

from devtools.stack import wait_until
from rebyte.models import CreationIntent
from runtime.models import Event, EventType
from tests.client import history, post_message
from tests.realtime.test_submission_stream import completed
from tests.runtime.test_parked_run_frees_its_conversation import parked  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def payloads(submission_id, kind) -> list[dict]:
    return list(
        Event.objects.filter(submission_id=submission_id, type=kind).order_by("seq").values_list("payload", flat=True)
    )


def test_a_provider_outage_is_said_as_reconnecting_until_the_provider_answers(workers, api, rebyte_double):
    completed(post_message(api, "warm up", client_message_id="m-1")["submissionId"])
    rebyte_double.fault("*", "http_error", status=503, until_ended=True)  # ended below, once the history has said it

    submission_id = post_message(api, "during the outage", client_message_id="m-2")["submissionId"]

    wait_until(
        lambda: [s["reconnecting"] for s in history(api)["activeSubmissions"]] == [True],
        timeout=60,
        what="the history to say the reply reconnects",
    )
    rebyte_double.end_faults()
    run = completed(submission_id)
    assert run.submission.assistant_message.text == "Echo: during the outage"
    said = [payload["reconnecting"] for payload in payloads(submission_id, EventType.RUN_RECONNECTING)]
    assert said == [True, False]  # once when the outage began, once when the provider answered again


@pytest.mark.slow
def test_a_parked_run_says_a_person_will_check_only_once_staff_must_act(parked, api):  # noqa: F811
    (first,) = payloads(parked.submission_id, EventType.RUN_PENDING_RECONCILIATION)
    assert first["needsStaff"] is False
    (active,) = history(api)["activeSubmissions"]
    assert (active["status"], active["needsStaff"]) == ("pending_reconciliation", False)

    CreationIntent.objects.filter(run=parked).update(
        needs_staff=True
    )  # what the reconciler does when looks cannot help

    wait_until(
        lambda: len(payloads(parked.submission_id, EventType.RUN_PENDING_RECONCILIATION)) == 2,
        timeout=60,
        what="the sweeper to tell the owner that staff must act",
    )
    told = payloads(parked.submission_id, EventType.RUN_PENDING_RECONCILIATION)[-1]
    assert told["needsStaff"] is True
    (active,) = history(api)["activeSubmissions"]
    assert active["needsStaff"] is True
