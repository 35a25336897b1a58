"""The pure scheduling rules, validation: what a schedule object must be, its canonical form, what a stored plan
still loads as."""

from datetime import datetime, time

import pytest

from scheduling.schedules import Frequency, Schedule, ScheduleError, parse_schedule
from tests.scheduling.schedule_rules import NOW, schedule, schedule_object, utc


def rejection(data: object, now: datetime = NOW) -> ScheduleError:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(data, now=now)
    return caught.value


def test_a_valid_schedule_round_trips_through_its_canonical_form():
    data = schedule_object(frequency="weekly", weekdays=[5, 1, 3], time="07:05")

    assert parse_schedule(data, now=NOW).to_json() == data | {"weekdays": [1, 3, 5]}


def test_the_canonical_form_renders_run_at_in_utc_and_collapses_cron_whitespace():
    once = schedule(frequency="once", time=None, runAt="2026-05-01T09:00:00+02:00")
    cron = schedule(frequency="cron", time=None, cron=" 0  9 * *   1-5 ")

    assert once.to_json()["runAt"] == "2026-05-01T07:00:00+00:00"
    assert cron.to_json()["cron"] == "0 9 * * 1-5"


def test_a_schedule_that_is_not_an_object_is_rejected():
    assert rejection(["daily"]).field == "schedule"


def test_a_missing_key_is_rejected_even_where_it_would_be_null():
    data = schedule_object()
    del data["cron"]

    assert rejection(data).field == "schedule.cron"


def test_an_unknown_key_is_rejected():
    assert rejection(schedule_object(interval=5)).field == "schedule.interval"


def test_an_unknown_frequency_is_rejected():
    assert rejection(schedule_object(frequency="hourly")).field == "schedule.frequency"


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "america/new_york", "../etc/passwd", "", "localtime", 0, None])
def test_a_time_zone_that_is_not_an_iana_name_is_rejected(zone):
    assert rejection(schedule_object(timeZone=zone)).field == "schedule.timeZone"


@pytest.mark.parametrize("run_at", ["2025-12-31T09:00:00+00:00", "2026-01-01T12:00:00+00:00"])
def test_a_once_plan_that_is_not_in_the_future_is_rejected(run_at):
    error = rejection(schedule_object(frequency="once", time=None, runAt=run_at))

    assert (error.field, error.message) == ("schedule.runAt", "must be in the future")


@pytest.mark.parametrize("run_at", ["2026-05-01T09:00:00", "2026-05-01"])
def test_a_once_plan_without_an_offset_is_rejected(run_at):
    error = rejection(schedule_object(frequency="once", time=None, runAt=run_at))

    assert error.field == "schedule.runAt"
    assert "offset" in error.message


@pytest.mark.parametrize("run_at", ["next tuesday", "2026-13-01T09:00:00+00:00", 1777626000])
def test_a_once_plan_with_a_malformed_run_at_is_rejected(run_at):
    assert rejection(schedule_object(frequency="once", time=None, runAt=run_at)).field == "schedule.runAt"


@pytest.mark.parametrize("value", ["24:00", "7:5", "7:05", "07:5", "07:60", "07:05:00", "0७:05", "07:05\n", 705])
def test_a_time_that_is_not_exactly_hh_mm_is_rejected(value):
    assert rejection(schedule_object(time=value)).field == "schedule.time"


def test_the_last_minute_of_the_day_is_a_valid_time():
    assert schedule(time="23:59").time == time(23, 59)


def test_duplicate_weekdays_are_rejected():
    error = rejection(schedule_object(frequency="weekly", weekdays=[1, 3, 1]))

    assert error.field == "schedule.weekdays[2]"


@pytest.mark.parametrize("weekday", [0, 8, True, "1", 1.0])
def test_a_weekday_that_is_not_an_iso_weekday_number_is_rejected(weekday):
    assert rejection(schedule_object(frequency="weekly", weekdays=[2, weekday])).field == "schedule.weekdays[1]"


def test_an_empty_weekday_list_is_rejected():
    assert rejection(schedule_object(frequency="weekly", weekdays=[])).field == "schedule.weekdays"


@pytest.mark.parametrize("expression", ["0 0 9 * * *", "0 0 9 * * * 2026"])
def test_a_cron_with_seconds_or_years_fields_is_rejected(expression):
    error = rejection(schedule_object(frequency="cron", time=None, cron=expression))

    assert error.field == "schedule.cron"
    assert "5 fields" in error.message


@pytest.mark.parametrize("expression", ["@daily", "@hourly"])
def test_a_cron_alias_is_rejected(expression):
    assert rejection(schedule_object(frequency="cron", time=None, cron=expression)).field == "schedule.cron"


@pytest.mark.parametrize("expression", ["a b c d e", "60 * * * *", "* 24 * * *", "*/0 * * * *", "H * * * *"])
def test_a_cron_that_is_not_a_valid_expression_is_rejected(expression):
    error = rejection(schedule_object(frequency="cron", time=None, cron=expression))

    assert (error.field, error.message) == ("schedule.cron", "is not a valid cron expression")


def test_a_cron_that_can_never_fire_is_rejected():
    error = rejection(schedule_object(frequency="cron", time=None, cron="0 9 31 2 *"))

    assert (error.field, error.message) == ("schedule.cron", "never fires (no date matches it)")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"weekdays": [1]}, "schedule.weekdays"),
        ({"runAt": "2026-05-01T09:00:00+00:00"}, "schedule.runAt"),
        ({"cron": "0 9 * * *"}, "schedule.cron"),
        ({"frequency": "once", "runAt": "2026-05-01T09:00:00+00:00"}, "schedule.time"),
        ({"frequency": "cron", "cron": "0 9 * * *"}, "schedule.time"),
    ],
)
def test_a_field_the_frequency_does_not_use_must_be_null(fields, field):
    error = rejection(schedule_object(**fields))

    assert error.field == field
    assert error.message.startswith("must be null")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"time": None}, "schedule.time"),
        ({"frequency": "weekly"}, "schedule.weekdays"),
        ({"frequency": "once", "time": None}, "schedule.runAt"),
        ({"frequency": "cron", "time": None}, "schedule.cron"),
    ],
)
def test_a_field_the_frequency_needs_must_not_be_null(fields, field):
    assert rejection(schedule_object(**fields)).field == field


def test_a_stored_once_plan_whose_time_has_passed_still_loads():
    stored = schedule_object(frequency="once", time=None, runAt="2025-06-01T09:00:00+00:00")

    assert Schedule.from_json(stored).run_at == utc(2025, 6, 1, 9, 0)


def test_loading_a_stored_plan_still_enforces_the_other_rules():
    with pytest.raises(ScheduleError):
        Schedule.from_json(schedule_object(time="25:00"))


def test_frequency_values_are_the_wire_strings():
    assert [frequency.value for frequency in Frequency] == ["once", "daily", "weekly", "cron"]
