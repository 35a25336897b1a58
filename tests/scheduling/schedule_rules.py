"""The schedule the pure scheduling rules' tests start from, and their clock."""

from datetime import UTC, datetime

from scheduling.schedules import Schedule, parse_schedule

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def schedule_object(**fields: object) -> dict[str, object]:
    """A valid daily schedule object with `fields` replacing its keys."""
    return {
        "frequency": "daily",
        "timeZone": "America/New_York",
        "runAt": None,
        "time": "09:00",
        "weekdays": None,
        "cron": None,
    } | fields


def schedule(**fields: object) -> Schedule:
    return parse_schedule(schedule_object(**fields), now=NOW)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)
