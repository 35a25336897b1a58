"""Waiting for the runs that real worker processes drive, read from the database (the record of truth)."""

from runtime.models import Run, RunState
from tests.processes import wait_until


def run_of(submission_id) -> Run:
    run = _loaded(submission_id)
    assert run is not None, f"submission {submission_id} has no run"
    return run


def _loaded(submission_id) -> Run | None:
    return Run.objects.select_related("submission__assistant_message").filter(submission_id=submission_id).first()


def finished_run(submission_id, *, timeout: float = 60) -> Run:
    """The submission's run once it ended (completed, failed or cancelled), with its reply."""
    return wait_until(
        lambda: (run := _loaded(submission_id)) and run.is_terminal and run,
        timeout=timeout,
        what=f"run of submission {submission_id} to finish",
    )


def settled_run(submission_id, *, timeout: float = 60) -> Run:
    """The submission's run once it ended or parked for reconciliation, with its reply."""
    return wait_until(
        lambda: (
            (run := _loaded(submission_id))
            and (run.is_terminal or run.state == RunState.PENDING_RECONCILIATION)
            and run
        ),
        timeout=timeout,
        what=f"run of submission {submission_id} to settle",
    )


def run_in_state(receipt: dict, state: str = RunState.COMPLETED, *, timeout: float = 60) -> Run:
    """The run of an admission receipt once it is in `state`, with its reply."""
    return wait_until(
        lambda: (run := _loaded(receipt["submissionId"])) and run.state == state and run,
        timeout=timeout,
        what=f"submission {receipt['submissionId']} to be {state}",
    )
