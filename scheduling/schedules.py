"""The scheduling core: validating a plan's `schedule` object and computing its fire times (docs/design.md §7).

Everything here is a pure function of its arguments — no clock reads, no database, no Django — so the Temporal
workflow can call it deterministically and the API can validate with the same rules. The one outside input is
the tz database: a tzdata upgrade can move a future fire time, exactly as it moves the wall clock itself.

Wall-clock rules, shared by daily, weekly and cron plans:
- A wall time inside a spring-forward gap fires after the gap, shifted forward by the gap's length (02:30 on a
  day whose 02:00–03:00 does not exist fires at 03:30). This is PEP 495's `fold=0` reading of a missing time.
- A wall time inside a repeated (fall-back) hour fires at its first occurrence only; the second pass of that
  hour fires nothing. For a frequent cron ("*/15 * * * *") that means the repeated hour runs once, not twice.
- Several wall times landing on the same instant (a gap's times coincide with the real times after it) fire
  once.

croniter is used only to enumerate the wall-clock times a cron expression names, on naive datetimes. Its own
time-zone handling disagrees with the rules above (it skips times in a gap and fires a repeated hour twice), so
the mapping from wall clock to instant is done here, identically for every frequency.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from core.error_codes import ErrorCode
from core.patterns import NOT_WHITESPACE, WHITESPACE
from core.time_zones import iana_time_zone_names


class Frequency(StrEnum):
    ONCE = "once"
    DAILY = "daily"
    WEEKLY = "weekly"
    CRON = "cron"


class ScheduleError(ValueError):
    """One violation of the schedule contract; `field` is the JSON path of the offending value.

    `code` is the original contract's name for it: `invalid_task_schedule`, or `schedule_in_past`.
    """

    def __init__(self, field: str, message: str, *, code: ErrorCode = ErrorCode.INVALID_TASK_SCHEDULE) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.code = code


# Every key is required, with an explicit null where it does not apply: a client cannot leave a field out and
# have it mean something, so a stored plan and its wire form always say the same thing.
_KEYS = ("frequency", "timeZone", "runAt", "time", "weekdays", "cron")

# The fields each frequency uses; all others must be null, so no plan is ambiguous (a daily plan carrying
# stale weekdays, say) and the canonical form of a plan is unique.
_USED_FIELDS: dict[Frequency, frozenset[str]] = {
    Frequency.ONCE: frozenset({"runAt"}),
    Frequency.DAILY: frozenset({"time"}),
    Frequency.WEEKLY: frozenset({"time", "weekdays"}),
    Frequency.CRON: frozenset({"cron"}),
}

# [0-9] rather than \d, which also matches non-ASCII digits; fullmatch so "07:05\n" fails too.
_HH_MM = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")

_CRON_FIELDS = 5

# A fixed, arbitrary start for the "does this cron ever fire" check, so validation never reads the clock.
_CRON_PROBE_START = datetime(2000, 1, 1)


@dataclass(frozen=True)
class Schedule:
    """A validated schedule. Build it with `parse_schedule` (API input) or `Schedule.from_json` (stored plans).

    `run_at` is held in UTC; `time` is a wall-clock time in `time_zone`; `weekdays` are ISO (1 = Monday), sorted.
    """

    frequency: Frequency
    time_zone: str
    run_at: datetime | None
    time: time | None
    weekdays: tuple[int, ...] | None
    cron: str | None

    @classmethod
    def from_json(cls, data: object) -> Schedule:
        """Load a stored schedule: every rule of `parse_schedule` except that a once-plan may lie in the past."""
        return _parse(data, now=None)

    def to_json(self) -> dict[str, object]:
        """The canonical wire form: every key present. runAt is rendered in UTC so the form stays stable."""
        return {
            "frequency": self.frequency.value,
            "timeZone": self.time_zone,
            "runAt": None if self.run_at is None else self.run_at.isoformat(),
            "time": None if self.time is None else self.time.strftime("%H:%M"),
            "weekdays": None if self.weekdays is None else list(self.weekdays),
            "cron": self.cron,
        }


def parse_schedule(data: object, *, now: datetime) -> Schedule:
    """Validate a client's `schedule` object; a once-plan must fire after `now`. Raises ScheduleError."""
    _require_aware(now, "now")
    return _parse(data, now=now)


def openapi_schema() -> dict[str, object]:
    """The schedule object as an OpenAPI 3.0 schema: the shape rules above, minus those that need the clock or
    croniter (a once-plan in the future, a cron expression that parses and fires)."""
    used_field_schemas: dict[str, dict[str, object]] = {
        "runAt": {"type": "string", "format": "date-time"},
        "time": {"type": "string", "pattern": f"^{_HH_MM.pattern}$"},
        "weekdays": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 7},
            "minItems": 1,
            "maxItems": 7,
            "uniqueItems": True,
        },
        # Exactly the five whitespace-separated fields of _parse_cron; whether they form a cron is croniter's call.
        "cron": {
            "type": "string",
            "pattern": f"^{WHITESPACE}*{NOT_WHITESPACE}+({WHITESPACE}+{NOT_WHITESPACE}+){{{_CRON_FIELDS - 1}}}"
            f"{WHITESPACE}*$",
        },
    }
    unused = {"type": "string", "nullable": True, "enum": [None]}
    variants = [
        {
            "type": "object",
            "properties": {
                "frequency": {"type": "string", "enum": [frequency.value]},
                **{
                    key: used_field_schemas[key] if key in _USED_FIELDS[frequency] else unused
                    for key in used_field_schemas
                },
            },
        }
        for frequency in Frequency
    ]
    return {
        "type": "object",
        "required": list(_KEYS),
        "additionalProperties": False,
        "properties": {
            "frequency": {"type": "string", "enum": [frequency.value for frequency in Frequency]},
            "timeZone": {"type": "string", "enum": sorted(iana_time_zone_names())},
            **{key: {**schema, "nullable": True} for key, schema in used_field_schemas.items()},
        },
        "oneOf": variants,
    }


def next_fire_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire time strictly after `after`, in UTC; None when a once-plan has already fired."""
    _require_aware(after, "after")
    if schedule.frequency is Frequency.ONCE:
        assert schedule.run_at is not None
        return schedule.run_at if schedule.run_at > after else None

    zone = ZoneInfo(schedule.time_zone)
    # A gap's wall times fire after the gap, so a wall time up to one gap-length earlier than `after`'s own wall
    # clock can still fire after `after`: start the scan that much earlier.
    start = _naive_wall(after, zone) - _gap_ending_near(after, zone)
    best: datetime | None = None
    best_wall = datetime.max
    # Walls map to instants in order except inside a gap, where a wall fires later than a few walls after it.
    # Any wall that could still beat `best` is earlier than `best`'s own wall clock, so the scan stops there.
    for wall in _wall_times_after(schedule, start):
        if wall >= best_wall:
            break
        instant = _fire_instant(wall, zone)
        if instant > after and (best is None or instant < best):
            best = instant
            best_wall = _naive_wall(instant, zone)
    return best


def catch_up_fire_time(schedule: Schedule, last_handled: datetime, now: datetime) -> datetime | None:
    """The single occurrence to admit for the window (last_handled, now]: its latest fire time, or None.

    This is how a missed window catches up once, not once per missed day: after an outage only the most recent
    missed fire time is returned, and an on-time wake-up (a fire time equal to `now`) returns that fire time.
    Afterwards the caller records `now` as handled and sleeps until `next_fire_after(schedule, now)`.
    """
    _require_aware(last_handled, "last_handled")
    _require_aware(now, "now")
    if now <= last_handled:
        return None
    # Enumerating every fire time of a long outage could mean tens of thousands for a frequent cron, so look
    # back over a window that doubles until it holds a fire time or reaches `last_handled`.
    window = timedelta(hours=1)
    while True:
        window_start = max(last_handled, now - window)
        latest = None
        fire = next_fire_after(schedule, window_start)
        while fire is not None and fire <= now:
            latest = fire
            fire = next_fire_after(schedule, fire)
        if latest is not None or window_start == last_handled:
            return latest
        window *= 2


def _parse(data: object, *, now: datetime | None) -> Schedule:
    if not isinstance(data, dict):
        raise ScheduleError("schedule", "must be an object")
    for key in data:
        if key not in _KEYS:
            raise ScheduleError(f"schedule.{key}", "is not a schedule field")
    for key in _KEYS:
        if key not in data:
            raise ScheduleError(f"schedule.{key}", "is required (use null when it does not apply)")

    frequency = _parse_frequency(data["frequency"])
    time_zone = _parse_time_zone(data["timeZone"])
    for key in _KEYS[2:]:
        if key not in _USED_FIELDS[frequency] and data[key] is not None:
            raise ScheduleError(f"schedule.{key}", f"must be null for a {frequency.value} schedule")
        if key in _USED_FIELDS[frequency] and data[key] is None:
            raise ScheduleError(f"schedule.{key}", f"is required for a {frequency.value} schedule")

    return Schedule(
        frequency=frequency,
        time_zone=time_zone,
        run_at=_parse_run_at(data["runAt"], now) if frequency is Frequency.ONCE else None,
        time=_parse_time(data["time"]) if frequency in (Frequency.DAILY, Frequency.WEEKLY) else None,
        weekdays=_parse_weekdays(data["weekdays"]) if frequency is Frequency.WEEKLY else None,
        cron=_parse_cron(data["cron"]) if frequency is Frequency.CRON else None,
    )


def _parse_frequency(value: object) -> Frequency:
    try:
        return Frequency(value)
    except ValueError:
        raise ScheduleError("schedule.frequency", "must be one of: " + ", ".join(Frequency)) from None


def _parse_time_zone(value: object) -> str:
    if isinstance(value, str) and value in iana_time_zone_names():
        return value
    raise ScheduleError("schedule.timeZone", "must be an IANA time zone name, such as Europe/Berlin")


def _parse_run_at(value: object, now: datetime | None) -> datetime:
    if not isinstance(value, str):
        raise ScheduleError("schedule.runAt", "must be an ISO-8601 date-time string")
    try:
        run_at = datetime.fromisoformat(value)
    except ValueError:
        raise ScheduleError("schedule.runAt", "is not an ISO-8601 date-time") from None
    if run_at.utcoffset() is None:
        raise ScheduleError("schedule.runAt", "must include a UTC offset, such as 2026-05-01T09:00:00+02:00")
    if now is not None and run_at <= now:
        raise ScheduleError("schedule.runAt", "must be in the future", code=ErrorCode.SCHEDULE_IN_PAST)
    return run_at.astimezone(UTC)


def _parse_time(value: object) -> time:
    match = _HH_MM.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ScheduleError("schedule.time", 'must be a 24-hour time written "HH:mm", from 00:00 to 23:59')
    return time(int(match[1]), int(match[2]))


def _parse_weekdays(value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ScheduleError("schedule.weekdays", "must be a non-empty list of ISO weekdays (1 = Monday)")
    for index, weekday in enumerate(value):
        # bool is an int in Python, but `true` is not a weekday.
        if not isinstance(weekday, int) or isinstance(weekday, bool) or not 1 <= weekday <= 7:
            raise ScheduleError(f"schedule.weekdays[{index}]", "must be an integer from 1 (Monday) to 7 (Sunday)")
        if weekday in value[:index]:
            raise ScheduleError(f"schedule.weekdays[{index}]", "repeats an earlier weekday")
    return tuple(sorted(value))


def _parse_cron(value: object) -> str:
    if not isinstance(value, str):
        raise ScheduleError("schedule.cron", "must be a cron expression string")
    fields = value.split()
    # croniter also accepts seconds/years fields and @aliases; the contract is the classic five fields.
    if len(fields) != _CRON_FIELDS:
        raise ScheduleError("schedule.cron", "must have exactly 5 fields: minute hour day-of-month month weekday")
    expression = " ".join(fields)
    if not croniter.is_valid(expression):
        raise ScheduleError("schedule.cron", "is not a valid cron expression")
    try:
        croniter(expression, _CRON_PROBE_START).get_next(datetime)
    except CroniterBadDateError:
        raise ScheduleError("schedule.cron", "never fires (no date matches it)") from None
    return expression


def _require_aware(value: datetime, name: str) -> None:
    # A naive datetime would be read in the process's local zone, which differs between workers.
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime")


def _wall_times_after(schedule: Schedule, start: datetime) -> Iterator[datetime]:
    """The naive local wall-clock times the plan names, strictly after the naive `start`, in order, forever."""
    if schedule.frequency is Frequency.CRON:
        # Naive datetimes keep croniter out of time zones entirely: it just counts the wall clock.
        times = croniter(schedule.cron, start)
        while True:
            yield times.get_next(datetime)
    assert schedule.time is not None
    day: date = start.date()
    while True:
        if schedule.weekdays is None or day.isoweekday() in schedule.weekdays:
            wall = datetime.combine(day, schedule.time)
            if wall > start:
                yield wall
        day += timedelta(days=1)


def _fire_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    # fold=0 is exactly the contract: a repeated wall time reads as its first occurrence, and a missing one is
    # read with the offset from before the gap, which lands it one gap-length later on the clock.
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def _naive_wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def _gap_ending_near(instant: datetime, zone: ZoneInfo) -> timedelta:
    """How far the clock jumped forward during the day before `instant` (zero when it did not)."""
    jump = _utc_offset(instant, zone) - _utc_offset(instant - timedelta(days=1), zone)
    return max(jump, timedelta(0))


def _utc_offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset
