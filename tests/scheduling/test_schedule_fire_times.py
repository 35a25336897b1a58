"""The pure scheduling rules, in time: fire times across DST transitions, and catch-up after an outage."""

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from scheduling.schedules import Schedule, catch_up_fire_time, next_fire_after
from tests.scheduling.schedule_rules import NOW, schedule, schedule_object, utc


def fires_between(rule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    fires = []
    fire = next_fire_after(rule, start)
    while fire is not None and fire <= end:
        fires.append(fire)
        fire = next_fire_after(rule, fire)
    return fires


def test_once_fires_at_its_run_at():
    rule = schedule(frequency="once", time=None, runAt="2026-05-01T09:00:00+02:00")

    assert next_fire_after(rule, NOW) == utc(2026, 5, 1, 7, 0)


def test_once_does_not_fire_again_after_its_run_at():
    rule = schedule(frequency="once", time=None, runAt="2026-05-01T09:00:00+02:00")

    assert next_fire_after(rule, utc(2026, 5, 1, 7, 0)) is None


def test_daily_fires_at_the_wall_clock_time_of_its_zone():
    rule = schedule(time="09:00")

    assert next_fire_after(rule, NOW) == utc(2026, 1, 1, 14, 0)  # NOW is 07:00 EST


def test_daily_in_a_new_york_spring_forward_gap_fires_after_the_gap():
    rule = schedule(time="02:30")

    assert next_fire_after(rule, utc(2026, 3, 8, 5, 0)) == utc(2026, 3, 8, 7, 30)  # 03:30 EDT


def test_daily_gap_time_still_fires_when_asked_just_after_the_clocks_jumped():
    rule = schedule(time="02:30")

    assert next_fire_after(rule, utc(2026, 3, 8, 7, 10)) == utc(2026, 3, 8, 7, 30)


def test_daily_in_a_repeated_hour_fires_at_its_first_occurrence():
    rule = schedule(time="01:30")

    assert next_fire_after(rule, utc(2026, 11, 1, 4, 0)) == utc(2026, 11, 1, 5, 30)  # 01:30 EDT


def test_daily_in_a_repeated_hour_fires_only_once_that_day():
    rule = schedule(time="01:30")

    assert next_fire_after(rule, utc(2026, 11, 1, 5, 30)) == utc(2026, 11, 2, 6, 30)  # next day, 01:30 EST


def test_daily_asked_during_the_second_pass_of_a_repeated_hour_waits_for_the_next_day():
    rule = schedule(time="01:30")

    assert next_fire_after(rule, utc(2026, 11, 1, 6, 10)) == utc(2026, 11, 2, 6, 30)  # asked at 01:10 EST


def test_daily_in_a_london_spring_forward_gap_fires_after_the_gap():
    rule = schedule(timeZone="Europe/London", time="01:30")

    assert next_fire_after(rule, utc(2026, 3, 29, 0, 0)) == utc(2026, 3, 29, 1, 30)  # 02:30 BST


def test_daily_in_a_lord_howe_half_hour_gap_fires_half_an_hour_later():
    rule = schedule(timeZone="Australia/Lord_Howe", time="02:15")

    fire = next_fire_after(rule, utc(2026, 10, 3, 12, 0))

    assert fire == utc(2026, 10, 3, 15, 45)
    assert fire.astimezone(ZoneInfo("Australia/Lord_Howe")).strftime("%H:%M %z") == "02:45 +1100"


def test_daily_in_a_lord_howe_repeated_half_hour_fires_at_its_first_occurrence():
    rule = schedule(timeZone="Australia/Lord_Howe", time="01:45")

    assert next_fire_after(rule, utc(2026, 4, 4, 12, 0)) == utc(2026, 4, 4, 14, 45)  # 01:45 +11:00


def test_weekly_rolls_over_the_week_boundary_to_its_first_weekday():
    rule = schedule(frequency="weekly", weekdays=[1, 3], time="09:00")

    # Asked on Saturday 2026-01-03; the next chosen day is Monday 2026-01-05.
    assert next_fire_after(rule, utc(2026, 1, 3, 20, 0)) == utc(2026, 1, 5, 14, 0)


def test_weekly_fires_on_each_chosen_weekday_in_order():
    rule = schedule(frequency="weekly", weekdays=[1, 3, 7], time="09:00")

    assert fires_between(rule, utc(2026, 1, 5, 0, 0), utc(2026, 1, 12, 0, 0)) == [
        utc(2026, 1, 5, 14, 0),  # Monday
        utc(2026, 1, 7, 14, 0),  # Wednesday
        utc(2026, 1, 11, 14, 0),  # Sunday
    ]


def test_cron_every_fifteen_minutes_fires_on_the_next_quarter_hour():
    rule = schedule(frequency="cron", time=None, cron="*/15 * * * *")

    assert next_fire_after(rule, utc(2026, 1, 1, 12, 7, 30)) == utc(2026, 1, 1, 12, 15)


def test_cron_is_evaluated_in_the_plans_zone():
    rule = schedule(frequency="cron", time=None, timeZone="Asia/Tokyo", cron="0 9 * * 1-5")

    # Friday 09:00 in Tokyo is Friday 00:00 UTC.
    assert next_fire_after(rule, utc(2026, 1, 1, 12, 0)) == utc(2026, 1, 2, 0, 0)


def test_cron_in_a_spring_forward_gap_fires_after_the_gap_instead_of_skipping_the_day():
    rule = schedule(frequency="cron", time=None, cron="30 2 * * *")

    assert next_fire_after(rule, utc(2026, 3, 8, 5, 0)) == utc(2026, 3, 8, 7, 30)  # 03:30 EDT


def test_cron_every_fifteen_minutes_across_a_gap_fires_each_real_quarter_hour_once():
    rule = schedule(frequency="cron", time=None, cron="*/15 * * * *")

    assert fires_between(rule, utc(2026, 3, 8, 6, 40), utc(2026, 3, 8, 7, 20)) == [
        utc(2026, 3, 8, 6, 45),  # 01:45 EST
        utc(2026, 3, 8, 7, 0),  # 03:00 EDT, also where 02:00 lands
        utc(2026, 3, 8, 7, 15),  # 03:15 EDT, also where 02:15 lands
    ]


def test_cron_across_a_half_hour_gap_fires_in_time_order_not_wall_clock_order():
    rule = schedule(frequency="cron", time=None, timeZone="Australia/Lord_Howe", cron="*/20 2 * * *")

    # The walls 02:00, 02:20, 02:40 fire at 02:30, 02:50, 02:40 (+11:00): 02:20 now fires after 02:40.
    assert fires_between(rule, utc(2026, 10, 3, 15, 0), utc(2026, 10, 3, 16, 0)) == [
        utc(2026, 10, 3, 15, 30),
        utc(2026, 10, 3, 15, 40),
        utc(2026, 10, 3, 15, 50),
    ]


def test_cron_in_a_repeated_hour_fires_only_its_first_occurrence():
    rule = schedule(frequency="cron", time=None, cron="30 1 * * *")

    assert fires_between(rule, utc(2026, 11, 1, 0, 0), utc(2026, 11, 2, 0, 0)) == [utc(2026, 11, 1, 5, 30)]


def test_cron_every_fifteen_minutes_skips_the_second_pass_of_a_repeated_hour():
    rule = schedule(frequency="cron", time=None, cron="*/15 * * * *")

    assert next_fire_after(rule, utc(2026, 11, 1, 5, 45)) == utc(2026, 11, 1, 7, 0)  # 01:45 EDT → 02:00 EST


@pytest.mark.parametrize(
    ("zone", "transition_day"),
    [
        ("America/New_York", date(2026, 3, 8)),
        ("America/New_York", date(2026, 11, 1)),
        ("Australia/Lord_Howe", date(2026, 10, 4)),
        ("Australia/Lord_Howe", date(2026, 4, 5)),
        ("Pacific/Apia", date(2011, 12, 30)),  # Samoa skipped this whole day
    ],
)
@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("*/20 * * * *", lambda wall: wall.minute % 20 == 0),
        ("10,50 1-3 * * *", lambda wall: wall.minute in (10, 50) and 1 <= wall.hour <= 3),
        ("0 12 * * *", lambda wall: (wall.hour, wall.minute) == (12, 0)),
    ],
)
def test_cron_fire_times_match_a_minute_by_minute_reading_of_the_wall_clock(zone, transition_day, expression, names):
    rule = Schedule.from_json(schedule_object(frequency="cron", time=None, timeZone=zone, cron=expression))
    first_wall = datetime.combine(transition_day - timedelta(days=1), time(0, 0))
    walls = (first_wall + timedelta(minutes=minute) for minute in range(3 * 24 * 60))
    # The contract read literally: every wall minute the expression names, at its fold=0 instant, once each.
    expected = sorted({wall.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC) for wall in walls if names(wall)})

    assert fires_between(rule, expected[0] - timedelta(minutes=1), expected[-1]) == expected


def test_fire_times_refuse_a_naive_datetime():
    with pytest.raises(ValueError):
        next_fire_after(schedule(), datetime(2026, 1, 1, 12, 0))


# Catch-up


def test_a_three_day_outage_catches_up_only_the_latest_missed_occurrence():
    rule = schedule(time="09:00")

    # Last handled on Jan 1 before 09:00 EST; back on Jan 4 at 12:00 EST after missing four fire times.
    assert catch_up_fire_time(rule, utc(2026, 1, 1, 13, 0), utc(2026, 1, 4, 17, 0)) == utc(2026, 1, 4, 14, 0)


def test_after_catching_up_the_next_regular_fire_time_follows_now():
    rule = schedule(time="09:00")

    assert next_fire_after(rule, utc(2026, 1, 4, 17, 0)) == utc(2026, 1, 5, 14, 0)


def test_nothing_is_caught_up_when_no_fire_time_was_missed():
    rule = schedule(time="09:00")

    assert catch_up_fire_time(rule, utc(2026, 1, 1, 15, 0), utc(2026, 1, 2, 13, 0)) is None


def test_a_fire_time_exactly_at_now_is_the_one_to_admit():
    rule = schedule(time="09:00")

    assert catch_up_fire_time(rule, utc(2026, 1, 1, 15, 0), utc(2026, 1, 2, 14, 0)) == utc(2026, 1, 2, 14, 0)


def test_a_fire_time_already_handled_is_not_caught_up_again():
    rule = schedule(time="09:00")

    assert catch_up_fire_time(rule, utc(2026, 1, 2, 14, 0), utc(2026, 1, 2, 20, 0)) is None


def test_a_missed_once_plan_catches_up_its_run_at():
    rule = schedule(frequency="once", time=None, runAt="2026-01-02T09:00:00-05:00")

    assert catch_up_fire_time(rule, NOW, utc(2026, 1, 9, 0, 0)) == utc(2026, 1, 2, 14, 0)


def test_a_frequent_cron_after_a_month_long_outage_catches_up_only_the_latest_quarter_hour():
    rule = schedule(frequency="cron", time=None, cron="*/15 * * * *")

    assert catch_up_fire_time(rule, NOW, NOW + timedelta(days=30, minutes=20)) == NOW + timedelta(days=30, minutes=15)


def test_a_rare_fire_time_is_found_across_a_long_outage():
    rule = schedule(frequency="cron", time=None, timeZone="UTC", cron="0 0 1 1 *")

    assert catch_up_fire_time(rule, NOW, utc(2029, 6, 1, 0, 0)) == utc(2029, 1, 1, 0, 0)
