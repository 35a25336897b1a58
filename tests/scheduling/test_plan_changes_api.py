"""Changing and deleting plans through the scheduled-tasks REST API (docs/design.md §7): revisions, exact
retries and tombstones."""

from datetime import UTC, datetime

import pytest

from scheduling.models import Plan
from tests.scheduling.plans import (
    PLANS_URL,
    create,
    create_body,
    daily,
    error_of,
    once,
    plan_url,
    update,
    update_body,
)

pytestmark = pytest.mark.django_db


def test_an_update_gives_the_plan_a_new_revision(api):
    plan = create(api)

    edited = update(api, plan, title="Evening digest", schedule=daily("18:30", "UTC"))

    assert edited["revision"] != plan["revision"]
    assert (edited["title"], edited["schedule"]["time"]) == ("Evening digest", "18:30")
    assert datetime.fromisoformat(edited["nextRunAt"]).hour == 18
    assert api.get(plan_url(plan["id"])).json() == edited


def test_an_update_with_a_stale_revision_is_refused_as_schedule_changed(api):
    plan = create(api)
    update(api, plan, title="First edit")

    response = api.put(plan_url(plan["id"]), update_body(plan, title="Second edit"), format="json")

    assert error_of(response) == (409, "schedule_changed")


def test_an_exact_retry_of_an_update_returns_the_saved_plan(api):
    plan = create(api)
    body = update_body(plan, title="Edited")
    edited = api.put(plan_url(plan["id"]), body, format="json").json()

    retry = api.put(plan_url(plan["id"]), body, format="json")

    assert retry.status_code == 200
    assert retry.json() == edited


def test_an_update_that_changes_nothing_keeps_the_revision(api):
    plan = create(api)

    assert update(api, plan)["revision"] == plan["revision"]


def test_pausing_a_plan_clears_its_next_run(api):
    plan = create(api)

    assert update(api, plan, enabled=False)["nextRunAt"] is None


def test_an_update_rejects_unknown_fields_and_invalid_schedules(api):
    plan = create(api)

    unknown = api.put(plan_url(plan["id"]), update_body(plan) | {"owner": 1}, format="json")
    past = api.put(
        plan_url(plan["id"]), update_body(plan, schedule=once(datetime(2020, 1, 1, tzinfo=UTC))), format="json"
    )
    no_revision = api.put(
        plan_url(plan["id"]), {k: v for k, v in update_body(plan).items() if k != "revision"}, format="json"
    )

    assert error_of(unknown) == (400, "invalid_request")
    assert error_of(past) == (400, "schedule_in_past")
    assert error_of(no_revision) == (400, "invalid_request")


def test_deleting_a_plan_tombstones_it(api):
    plan = create(api)

    response = api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert (response.status_code, response.json()) == (200, {"deleted": True})
    assert error_of(api.get(plan_url(plan["id"]))) == (404, "not_found")
    assert Plan.objects.get(id=plan["id"]).deleted_at is not None


def test_repeating_a_delete_succeeds_again(api):
    plan = create(api)
    api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    again = api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert again.json() == {"deleted": True}


def test_deleting_with_a_stale_revision_is_refused_as_schedule_changed(api):
    plan = create(api)
    update(api, plan, title="Edited")

    response = api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert error_of(response) == (409, "schedule_changed")
    assert Plan.objects.get(id=plan["id"]).deleted_at is None


def test_changing_a_deleted_plan_is_gone_as_schedule_deleted(api):
    plan = create(api)
    api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert error_of(api.put(plan_url(plan["id"]), update_body(plan), format="json")) == (410, "schedule_deleted")


def test_replaying_the_create_of_a_deleted_plan_is_gone_as_schedule_deleted(api):
    body = create_body()
    plan = api.post(PLANS_URL, body, format="json").json()
    api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert error_of(api.post(PLANS_URL, body, format="json")) == (410, "schedule_deleted")


def test_deleting_an_already_deleted_plan_with_an_older_revision_answers_deleted(api):
    plan = create(api)
    edited = update(api, plan, title="Edited")
    api.delete(plan_url(plan["id"]), {"revision": edited["revision"]}, format="json")

    again = api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert (again.status_code, again.json()) == (200, {"deleted": True})


def test_another_users_deleted_plan_is_not_found(api, other_api):
    plan = create(api)
    api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert error_of(other_api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")) == (
        404,
        "not_found",
    )


def test_deleting_without_a_revision_is_rejected(api):
    plan = create(api)

    assert error_of(api.delete(plan_url(plan["id"]), {}, format="json")) == (400, "invalid_request")


def test_a_revision_that_is_not_a_uuid_string_is_rejected_even_for_a_deleted_plan(api):
    plan = create(api)
    api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")

    assert error_of(api.delete(plan_url(plan["id"]), {"revision": True}, format="json")) == (400, "invalid_request")
