"""A long-running process's start-up objects (modules, settings, URL patterns, the app registry) live as long as it
does, yet every full garbage collection scanned all of them. The interpreter collects several times while it tears
its modules down at exit, and that was most of a stopped worker's time (a Celery worker took 2 to 4 s to exit after
its warm shutdown had finished, the Temporal worker about 1 s more than it needed): under `make run`, honcho kills
with SIGKILL whatever has not stopped 5 s after Ctrl-C. Frozen once the process is ready, they are never scanned
again, at exit or in between."""

import gc


def freeze_startup_heap() -> None:
    gc.collect()
    gc.freeze()
