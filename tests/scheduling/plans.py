"""Building scheduled-task requests for the scheduling tests."""

import uuid
from datetime import UTC, datetime, timedelta

PLANS_URL = "/api/v1/scheduled-tasks"


def error_of(response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def plan_url(plan_id) -> str:
    return f"{PLANS_URL}/{plan_id}"


def once(run_at: datetime) -> dict:
    return {
        "frequency": "once",
        "timeZone": "Europe/Berlin",
        "runAt": run_at.isoformat(),
        "time": None,
        "weekdays": None,
        "cron": None,
    }


def daily(at: str = "09:00", zone: str = "Europe/Berlin") -> dict:
    return {"frequency": "daily", "timeZone": zone, "runAt": None, "time": at, "weekdays": None, "cron": None}


def cron(expression: str) -> dict:
    return {"frequency": "cron", "timeZone": "UTC", "runAt": None, "time": None, "weekdays": None, "cron": expression}


def seconds_from_now(seconds: float) -> datetime:
    """A whole second at least `seconds` from now."""
    return (datetime.now(UTC) + timedelta(seconds=seconds + 1)).replace(microsecond=0)


def create_body(**fields) -> dict:
    return {
        "clientRequestId": str(uuid.uuid4()),
        "title": "Morning digest",
        "goal": "Summarise my unread mail.",
        "schedule": daily(),
        "enabled": True,
    } | fields


def update_body(plan: dict, **fields) -> dict:
    return {
        "revision": plan["revision"],
        "title": plan["title"],
        "goal": plan["goal"],
        "schedule": plan["schedule"],
        "enabled": plan["enabled"],
    } | fields


def create(api, **fields) -> dict:
    response = api.post(PLANS_URL, create_body(**fields), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def update(api, plan: dict, **fields) -> dict:
    response = api.put(plan_url(plan["id"]), update_body(plan, **fields), format="json")
    assert response.status_code == 200, response.json()
    return response.json()
