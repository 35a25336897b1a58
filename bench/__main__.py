"""`python -m bench [--quick]`: every figure against its baseline, at 10, 100 and 1000 conversations and again
with 100k events in the table. Prints the figures; `make bench` runs it. Results are recorded in RESULTS.md.
"""

import argparse
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import harness, sockets


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    postgres = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {postgres}"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run of every benchmark")
    parser.add_argument("--realtime", action="store_true", help="only the baselines, first-delta and socket figures")
    parser.add_argument("--inflight", action="store_true", help="only hundreds of long turns on one worker host")
    parser.add_argument(
        "--streaming", action="store_true", help="only the streaming turns on one worker host, claims bounded or not"
    )
    parser.add_argument(
        "--many-hosts", action="store_true", help="only several worker hosts on one database: its CPU per turn"
    )
    parser.add_argument(
        "--uploads", action="store_true", help="only attachments: prepare + PUT + complete on each store"
    )
    return parser.parse_args()


def main() -> None:
    args = arguments()
    # A stopped benchmark (Ctrl-C, SIGTERM, a timeout) still stops its processes and drops its database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Thousands of sockets, both ends on this machine; the servers started below inherit the limit.
    sockets.raise_descriptor_limit()
    database = harness.configure_process_environment()
    harness.create_database(database)
    import django

    django.setup()
    from bench import suite
    from devtools.stack import RebyteDouble, Stack
    from impo.celery import app

    double = RebyteDouble()
    stack = Stack(database_name=database, double=double, redis_url=os.environ["REDIS_URL"])
    app.control.purge()
    run = suite.Run(stack, database, suite.QUICK if args.quick else suite.FULL, realtime_only=args.realtime)
    started = time.monotonic()
    print(f"# Impo benchmarks, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n# {machine()}\n", flush=True)
    try:
        suite.measure(run, args)
    finally:
        stack.stop()
        double.stop()
        app.control.purge()
        harness.drop_database(database)
    print(f"\n{len(run.figures)} figures in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
