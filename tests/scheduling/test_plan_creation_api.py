"""Creating and listing plans through the scheduled-tasks REST API (docs/design.md §7): validation, the
request id's idempotency, the cap, ownership and authentication."""

import uuid
from datetime import UTC, datetime

import pytest

from scheduling import services
from scheduling.models import Plan
from scheduling.services import MAX_LIVE_PLANS, PlanCommand
from tests.scheduling.plans import (
    PLANS_URL,
    create,
    create_body,
    daily,
    error_of,
    once,
    plan_url,
    update_body,
)

pytestmark = pytest.mark.django_db


def test_creating_a_plan_returns_it_with_a_revision_and_its_next_run(api):
    response = api.post(PLANS_URL, create_body(schedule=daily("09:00", "UTC")), format="json")

    assert response.status_code == 201
    plan = response.json()
    assert set(plan) == {
        "id",
        "title",
        "goal",
        "schedule",
        "enabled",
        "revision",
        "nextRunAt",
        "createdAt",
        "updatedAt",
    }
    assert plan["schedule"] == daily("09:00", "UTC")
    uuid.UUID(plan["revision"])
    next_run = datetime.fromisoformat(plan["nextRunAt"])
    assert (next_run.hour, next_run.minute) == (9, 0)
    assert next_run > datetime.now(UTC)


def test_a_refused_plan_names_every_refused_field_for_the_form(api):
    body = create_body(title="  ", schedule={**daily("09:00", "UTC"), "frequency": "cron", "time": None, "cron": "no"})

    response = api.post(PLANS_URL, body, format="json")

    assert error_of(response) == (400, "invalid_request")
    error = response.json()["error"]
    assert error["message"].startswith("title: ")  # the first, as before
    assert set(error["fields"]) == {"title", "schedule.cron"}
    assert error["fields"]["schedule.cron"].startswith("must have exactly 5 fields")

    alone = api.post(PLANS_URL, {**body, "title": "Digest"}, format="json")

    assert error_of(alone) == (400, "invalid_task_schedule")  # the schedule's own code when it is the only problem
    assert alone.json()["error"]["fields"] == {"schedule.cron": error["fields"]["schedule.cron"]}
    assert not Plan.objects.exists()


def test_a_once_plan_is_stored_in_canonical_utc_form(api):
    run_at = datetime(2099, 5, 1, 9, 0, tzinfo=UTC)
    plan = create(api, schedule=once(run_at.astimezone(datetime.now().astimezone().tzinfo)))

    assert plan["schedule"]["runAt"] == "2099-05-01T09:00:00+00:00"
    assert plan["nextRunAt"] == "2099-05-01T09:00:00+00:00"


def test_a_disabled_plan_has_no_next_run(api):
    assert create(api, enabled=False)["nextRunAt"] is None


def test_repeating_a_create_with_the_same_request_id_returns_the_saved_plan(api):
    body = create_body()
    first = api.post(PLANS_URL, body, format="json").json()

    again = api.post(PLANS_URL, body, format="json")

    assert again.status_code == 201
    assert again.json() == first
    assert Plan.objects.count() == 1


def test_reusing_a_request_id_with_a_changed_payload_is_a_conflict(api):
    body = create_body()
    api.post(PLANS_URL, body, format="json")

    response = api.post(PLANS_URL, body | {"title": "Something else"}, format="json")

    assert error_of(response) == (409, "idempotency_conflict")


def test_a_replayed_once_plan_is_still_the_saved_plan_after_its_time_passed(api, user):
    body = create_body(schedule=once(datetime(2021, 1, 1, 9, 0, tzinfo=UTC)))
    saved = services.create_plan(
        owner=user,
        client_request_id=body["clientRequestId"],
        command=PlanCommand(title=body["title"], goal=body["goal"], schedule=body["schedule"], enabled=True),
        now=datetime(2020, 1, 1, tzinfo=UTC),
    )

    response = api.post(PLANS_URL, body, format="json")

    assert (response.status_code, response.json()["id"]) == (201, str(saved.id))


@pytest.mark.parametrize(
    ("fields", "message_start", "code"),
    [
        ({"title": ""}, "title:", "invalid_request"),
        ({"title": "x" * 121}, "title:", "invalid_request"),
        ({"title": "   "}, "title:", "invalid_request"),
        ({"goal": "x" * 4001}, "goal:", "invalid_request"),
        ({"goal": "a\x00b"}, "goal:", "invalid_request"),
        ({"clientRequestId": ""}, "clientRequestId:", "invalid_request"),
        ({"clientRequestId": "x" * 257}, "clientRequestId:", "invalid_request"),
        ({"enabled": "yes"}, "enabled:", "invalid_request"),
        ({"schedule": None}, "schedule:", "invalid_request"),
        ({"schedule": daily() | {"time": "9am"}}, "schedule.time:", "invalid_task_schedule"),
        (
            {"schedule": {"frequency": "daily", "timeZone": "UTC", "time": "09:00"}},
            "schedule.runAt:",
            "invalid_task_schedule",
        ),
        ({"schedule": daily(zone="Mars/Olympus")}, "schedule.timeZone:", "invalid_task_schedule"),
        ({"schedule": once(datetime(2020, 1, 1, tzinfo=UTC))}, "schedule.runAt:", "schedule_in_past"),
        (
            {"schedule": once(datetime(2099, 1, 1)) | {"runAt": "2099-01-01T09:00:00"}},
            "schedule.runAt:",
            "invalid_task_schedule",
        ),
        (
            {"schedule": daily() | {"frequency": "weekly", "weekdays": [1, 1]}},
            "schedule.weekdays[1]:",
            "invalid_task_schedule",
        ),
        (
            {"schedule": daily() | {"frequency": "cron", "time": None, "cron": "* * *"}},
            "schedule.cron:",
            "invalid_task_schedule",
        ),
        ({"color": "red"}, "color:", "invalid_request"),
    ],
)
def test_an_invalid_create_is_rejected_with_the_offending_field_and_the_contracts_code(
    api, fields, message_start, code
):
    response = api.post(PLANS_URL, create_body(**fields), format="json")

    assert error_of(response) == (400, code)
    assert response.json()["error"]["message"].startswith(message_start), response.json()
    assert "requestId" in response.json()
    assert not Plan.objects.exists()


def test_a_missing_field_is_rejected(api):
    body = create_body()
    del body["enabled"]

    response = api.post(PLANS_URL, body, format="json")

    assert error_of(response) == (400, "invalid_request")
    assert response.json()["error"]["message"].startswith("enabled:")


def test_an_account_can_have_at_most_fifty_live_plans(api):
    plans = [create(api) for _ in range(MAX_LIVE_PLANS)]

    refused = api.post(PLANS_URL, create_body(), format="json")
    api.delete(plan_url(plans[0]["id"]), {"revision": plans[0]["revision"]}, format="json")
    accepted = api.post(PLANS_URL, create_body(), format="json")

    assert error_of(refused) == (409, "schedule_limit_reached")
    assert accepted.status_code == 201


def test_the_list_shows_only_the_owners_live_plans(api, other_api):
    mine = create(api, title="Mine")
    gone = create(api, title="Gone")
    create(other_api, title="Theirs")
    api.delete(plan_url(gone["id"]), {"revision": gone["revision"]}, format="json")

    listed = api.get(PLANS_URL).json()["schedules"]

    assert [plan["id"] for plan in listed] == [mine["id"]]


def test_routes_answer_with_and_without_a_trailing_slash(api):
    plan = create(api)

    assert api.get(f"{PLANS_URL}/").status_code == 200
    assert api.get(f"{plan_url(plan['id'])}/").status_code == 200
    assert api.get(f"{plan_url(plan['id'])}/runs/").status_code == 200
    assert api.post(f"{PLANS_URL}/", create_body(), format="json").status_code == 201


def test_another_users_plan_is_not_found_for_every_method(api, other_api):
    plan = create(api)

    assert error_of(other_api.get(plan_url(plan["id"]))) == (404, "not_found")
    assert error_of(other_api.put(plan_url(plan["id"]), update_body(plan), format="json")) == (404, "not_found")
    delete = other_api.delete(plan_url(plan["id"]), {"revision": plan["revision"]}, format="json")
    assert error_of(delete) == (404, "not_found")
    assert error_of(other_api.get(f"{plan_url(plan['id'])}/runs")) == (404, "not_found")


def test_an_anonymous_request_is_unauthorized(client):
    assert client.get(PLANS_URL).status_code == 401
