import functools
from zoneinfo import available_timezones


@functools.cache
def iana_time_zone_names() -> frozenset[str]:
    """The zone names a client may send. "localtime" is a copy of the host's zone that some systems keep beside
    the tz database; it is not an IANA name, and it would mean different things on different machines."""
    return frozenset(available_timezones() - {"localtime"})
