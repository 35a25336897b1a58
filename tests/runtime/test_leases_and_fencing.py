"""Lease claims and fenced writes, exercised directly on the database (no provider involved)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runtime.models import Event, EventType, IllegalTransition, Run, RunState
from runtime.services import claims, lifecycle, projection, sweeper
from tests.client import send_message

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued_run(api):
    receipt = send_message(api, "hi", client_message_id="m-1").json()
    return Run.objects.get(submission_id=receipt["submissionId"])


def expire_lease(run):
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_claim_takes_a_lease_bumps_the_generation_and_announces_the_start(queued_run):
    lease = claims.claim_run(queued_run.id, "worker-a")

    run = Run.objects.get(id=queued_run.id)
    assert (run.state, run.lease_owner, run.lease_generation, run.attempts) == ("running", "worker-a", 1, 1)
    assert run.lease_expires_at > timezone.now()
    assert lease.generation == 1
    assert Event.objects.filter(submission=run.submission, type=EventType.RUN_STARTED).count() == 1


def test_a_run_under_a_live_lease_cannot_be_claimed_again(queued_run):
    claims.claim_run(queued_run.id, "worker-a")

    assert claims.claim_run(queued_run.id, "worker-b") is None
    assert Run.objects.get(id=queued_run.id).lease_owner == "worker-a"


def test_a_fenced_block_can_read_its_run_but_change_it_only_through_the_runtime_services(queued_run):
    lease = claims.claim_run(queued_run.id, "worker-a")

    with pytest.raises(AttributeError), claims.fenced(lease) as run:
        assert run.state == RunState.RUNNING
        run.error_message = "written on the side"
    with claims.fenced(lease) as run:
        lifecycle.await_reconciliation(run, reason="through the lifecycle")

    stored = Run.objects.get(id=queued_run.id)
    assert (stored.state, stored.error_message) == (RunState.PENDING_RECONCILIATION, "through the lifecycle")


def test_a_stale_workers_late_write_is_rejected_after_a_takeover(queued_run):
    stale = claims.claim_run(queued_run.id, "worker-a")
    expire_lease(queued_run)
    successor = claims.claim_run(queued_run.id, "worker-b")

    with pytest.raises(claims.LeaseLost), claims.fenced(stale) as run:
        projection.project_output(run, [projection.Output("text-1", "stale words")])
    with claims.fenced(successor) as run:
        projection.project_output(run, [projection.Output("text-1", "fresh words")])

    run = Run.objects.select_related("submission__assistant_message").get(id=queued_run.id)
    assert run.submission.assistant_message.text == "fresh words"
    deltas = Event.objects.filter(type=EventType.TEXT_DELTA).values_list("payload__delta", flat=True)
    assert list(deltas) == ["fresh words"]


def test_a_stale_worker_cannot_finish_a_run_it_no_longer_holds(queued_run):
    stale = claims.claim_run(queued_run.id, "worker-a")
    expire_lease(queued_run)
    claims.claim_run(queued_run.id, "worker-b")

    with pytest.raises(claims.LeaseLost):
        claims.finish_run(stale, RunState.COMPLETED)
    assert Run.objects.get(id=queued_run.id).state == RunState.RUNNING


def test_a_run_fails_visibly_once_its_attempts_are_used_up(queued_run, settings):
    for attempt in range(settings.IMPO_RUN_MAX_ATTEMPTS):
        assert claims.claim_run(queued_run.id, f"worker-{attempt}") is not None
        expire_lease(queued_run)

    assert claims.claim_run(queued_run.id, "worker-last") is None

    run = Run.objects.select_related("submission__assistant_message").get(id=queued_run.id)
    assert run.state == RunState.FAILED
    assert run.error_code == "max_attempts_exceeded"
    assert run.submission.assistant_message.status == "failed"
    assert Event.objects.filter(type=EventType.RUN_FAILED).count() == 1


def test_a_run_waits_while_an_earlier_run_of_its_conversation_is_unfinished(api, queued_run):
    later = send_message(api, "next", client_message_id="m-2")
    later_run = Run.objects.get(submission_id=later.json()["submissionId"])

    assert claims.claim_run(later_run.id, "worker-b") is None
    lease = claims.claim_run(queued_run.id, "worker-a")
    assert claims.claim_run(later_run.id, "worker-b") is None
    claims.finish_run(lease, RunState.COMPLETED)

    assert claims.claim_run(later_run.id, "worker-b") is not None


def test_a_provider_outage_backs_off_without_spending_attempts(queued_run, settings):
    lease = claims.claim_run(queued_run.id, "worker-a")

    delays = []
    for attempt in range(settings.IMPO_RUN_MAX_ATTEMPTS + 3):
        delays.append(claims.release_for_provider(lease, cause="provider unavailable: 503"))
        assert claims.claim_run(queued_run.id, "worker-b") is None  # not before its backoff
        Run.objects.filter(id=queued_run.id).update(not_before=timezone.now())
        lease = claims.claim_run(queued_run.id, f"worker-{attempt}")
        assert lease is not None

    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(delays) == settings.IMPO_PROVIDER_BACKOFF_CAP_SECONDS or max(delays) == 0.5 * 2 ** (len(delays) - 1)
    run = Run.objects.get(id=queued_run.id)
    assert (run.state, run.attempts) == (RunState.RUNNING, 1)
    assert run.error_message == "provider unavailable: 503"


def test_a_run_that_keeps_crashing_fails_with_its_last_cause(queued_run, settings):
    for attempt in range(settings.IMPO_RUN_MAX_ATTEMPTS):
        lease = claims.claim_run(queued_run.id, f"worker-{attempt}")
        claims.release_after_error(lease, cause="KeyError: 'item'")

    assert claims.claim_run(queued_run.id, "worker-last") is None

    run = Run.objects.get(id=queued_run.id)
    assert (run.state, run.error_code) == (RunState.FAILED, "max_attempts_exceeded")
    assert "KeyError: 'item'" in run.error_message


def test_the_sweeper_re_wakes_expired_leases_and_stale_queued_runs(queued_run, settings):
    settings.IMPO_REWAKE_AFTER_SECONDS = 0
    assert sweeper.sweep_runs().rewoken == 1

    claims.claim_run(queued_run.id, "worker-a")
    expire_lease(queued_run)

    assert sweeper.sweep_runs().expired_leases == 1


def test_a_finished_run_refuses_to_start_again():
    run = Run(state=RunState.COMPLETED)

    with pytest.raises(IllegalTransition):
        run.transition_to(RunState.RUNNING)
    assert run.state == RunState.COMPLETED
