import contextlib
import subprocess
import time
import uuid

import croniter  # noqa: F401  (imported before any test: its import asks `file` about the interpreter, a process)
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import UserFactory

# What starts a process, directly or through the fixtures that need it. A test needing none of these is `fast`.
PROCESS_FIXTURES = frozenset({"rebyte_double_process", "temporal_address", "shared_stack", "stack"})


def pytest_configure(config):
    _flush_retried_on_deadlock()


def _flush_retried_on_deadlock():
    """A transactional test ends by emptying every table in one TRUNCATE, which locks them one after another. A shared
    worker still finishing the test's run can hold one of those tables while waiting for another, and PostgreSQL
    then ends the TRUNCATE as a deadlock: the test errors at teardown though nothing it tested failed (seen in CI).
    The worker's transaction is short; the flush is tried again."""
    from django.core.management.base import CommandError
    from django.db import OperationalError
    from django.test import TransactionTestCase

    fixture_teardown = TransactionTestCase._fixture_teardown

    def fixture_teardown_retried(self):
        for attempt in range(FLUSH_ATTEMPTS):
            try:
                return fixture_teardown(self)
            except CommandError as error:
                if not isinstance(error.__cause__, OperationalError) or attempt == FLUSH_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    TransactionTestCase._fixture_teardown = fixture_teardown_retried


FLUSH_ATTEMPTS = 5


def pytest_itemcollected(item):
    if item.get_closest_marker("processes") is None and PROCESS_FIXTURES.isdisjoint(item.fixturenames):
        item.add_marker(pytest.mark.fast)


def _start_order(item) -> int:
    """Long tests first, then those with a stack of their own, then the shared stack's, then the rest: a long test
    started last is the suite's tail, and tests of one kind run together (a private stack stops the shared one)."""
    if item.get_closest_marker("slow"):
        return 0
    if item.get_closest_marker("processes") or "stack" in item.fixturenames:
        return 1
    if "shared_stack" in item.fixturenames:
        return 2
    return 3


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.sort(key=_start_order)  # stable: the collected order within each kind


# Modules whose tests share processes that a module fixture starts: the fault suite's own PostgreSQL, Redis and stack,
# the plans' Temporal worker. Handed out test by test, each module set them up again in every xdist worker that ran
# one of its tests; each goes whole to one worker instead.
ONE_WORKER_MODULES = frozenset(
    {"tests/faults/test_recovery_from_outages.py", "tests/scheduling/test_plans_on_temporal.py"}
)


def pytest_xdist_make_scheduler(config, log):
    """`--dist load` hands each test to the next free worker, except that a module of ONE_WORKER_MODULES is one unit
    (xdist's `xdist_group` marks would say so, but pytest 9 no longer reads the node ids xdist rewrites for them)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LoadKeepingModulesWhole(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else nodeid

    return LoadKeepingModulesWhole(config, log)


@pytest.fixture(autouse=True)
def fast_tests_start_no_process(request, monkeypatch):
    """A test marked `fast` is one `make test-fast` runs because it needs no process fixture: one that still starts
    a process fails here, so it cannot slip into the fast tier. Mark it `processes` (or use a process fixture)."""
    if request.node.get_closest_marker("fast") is None:
        return

    def refused(*args, **kwargs):
        raise AssertionError(
            f"{request.node.nodeid} is marked fast (it takes no process fixture) but starts a process: "
            "mark it @pytest.mark.processes"
        )

    monkeypatch.setattr(subprocess, "Popen", refused)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Real hashing costs ~0.3 s per user; tests check authorization, not hash strength. The real
    # hasher stays available for users that a server process (which hashes for real) must verify.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    ]


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture
def staff(db):
    """A staff member at the admin (the reconciliation desk)."""
    return UserFactory(username="desk-clerk", is_staff=True, is_superuser=True)


@pytest.fixture
def desk(staff) -> Client:
    """The admin, logged in as `staff`."""
    client = Client()
    client.force_login(staff)
    return client


def bearer_client(user) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    return bearer_client(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return bearer_client(other_user)


@pytest.fixture
def new_client_message_id():
    return lambda: str(uuid.uuid4())


@pytest.fixture(scope="session")
def temporal_address():
    from devtools.temporal import start_temporal_dev_server

    server, address = start_temporal_dev_server()
    yield address
    server.stop()


@pytest.fixture(scope="session")
def rebyte_double_process():
    from devtools.stack import RebyteDouble

    double = RebyteDouble()
    yield double
    double.stop()


@pytest.fixture
def rebyte_double(rebyte_double_process, settings):
    """The shared double, emptied, with this process pointed at it."""
    rebyte_double_process.reset()
    settings.REBYTE_BASE_URL = rebyte_double_process.api_url
    return rebyte_double_process


class SharedStack:
    """The worker and sweeper this test session's tests share, started on first use and kept between tests.

    Nothing of a test outlives it but what a deployment would shrug off: its database rows go (the transactional
    database empties every table), the double forgets everything (`rebyte_double`), queued wake-ups are purged.
    A run still in a worker's hands when its rows go loses its lease, as any run whose row vanished would.
    While a test runs a private stack the shared one is stopped: both would consume the session's queue."""

    started: "SharedStack | None" = None  # the session's, while its processes run

    def __init__(self, double):
        self.double = double
        self.stack = None
        self._web_url = None
        self._webhooks = None

    def running(self, *, database_name: str, redis_url: str):
        from devtools.stack import Stack

        if self.stack is not None and not all(process.alive for process in self.stack.processes):
            self.stop()  # a process died (a bug shows in its log); the next test gets a whole stack again
        if self.stack is None:
            self.stack = Stack(database_name=database_name, double=self.double, redis_url=redis_url)
            self.stack.start_worker("shared-worker")
            self.stack.start_sweeper()
            SharedStack.started = self
        return self.stack

    def web_url(self) -> str:
        """The base URL of a web server (as `make run` serves) beside the shared worker, started on first use."""
        from devtools.stack import MAKE_RUN_WEB_PROCESSES, start_web

        if self._web_url is None:
            _, self._web_url = start_web(self.stack, processes=MAKE_RUN_WEB_PROCESSES)
        return self._web_url

    def start_webhooks(self) -> None:
        """The webhooks loop beside the shared worker, started on first use."""
        if self._webhooks is None:
            self._webhooks = self.stack.start_webhooks()

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
            self.stack, self._web_url, self._webhooks = None, None, None
        SharedStack.started = None


@pytest.fixture(autouse=True)
def no_shared_stack_unless_asked(request):
    """A test that did not ask for the shared stack runs without it, as before there was one: its worker would take
    the test's runs (a queued run stays queued only with no worker) and its sweeper would wake them. Stopping it
    is a SIGKILL; the collection order (`_start_order`) runs the shared stack's tests together, so it is rarely
    started again."""
    if SharedStack.started is not None and "shared_stack" not in request.fixturenames:
        SharedStack.started.stop()


def _other_connections_gone() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] == 0


@pytest.fixture(scope="session")
def shared_stack(django_db_setup, django_db_blocker, rebyte_double_process):
    """Set up after the test database, so torn down before it is dropped: every stack's processes are gone by
    then (a private stack stops with its test), but a SIGKILLed process's server backends may end a moment later,
    and the drop fails while one is still there. A connection that stays (not a stack's) is left to the drop."""
    from devtools.stack import wait_until

    shared = SharedStack(rebyte_double_process)
    yield shared
    shared.stop()
    with django_db_blocker.unblock(), contextlib.suppress(TimeoutError):
        wait_until(_other_connections_gone, timeout=10, interval=0.2, what="the killed processes' connections to end")


@pytest.fixture
def workers(transactional_db, rebyte_double, shared_stack, settings):
    """A worker and a sweeper, shared with the other tests of this session: for tests that start, stop, kill or
    reconfigure no process (those take `stack`, their own). Real worker processes need committed data, hence the
    transactional database."""
    from django.db import connection

    from impo.celery import app

    app.control.purge()
    return shared_stack.running(database_name=connection.settings_dict["NAME"], redis_url=settings.REDIS_URL)


@pytest.fixture
def shared_web(workers, shared_stack) -> str:
    """The shared stack's web server (base URL)."""
    return shared_stack.web_url()


@pytest.fixture
def shared_webhooks(workers, shared_stack):
    """The shared stack with its webhooks loop running."""
    shared_stack.start_webhooks()
    return workers


@pytest.fixture
def web(stack) -> str:
    """A web server of the test's own stack (base URL), as the stack's environment configures it."""
    from devtools.stack import start_web

    return start_web(stack)[1]


@pytest.fixture
def stack(transactional_db, rebyte_double, shared_stack, settings):
    """A stack of this test's own, empty: the test starts what it needs, and may kill, restart or reconfigure it.
    Stopped cold (SIGKILL) after the test."""
    from django.db import connection

    from devtools.stack import Stack
    from impo.celery import app

    shared_stack.stop()
    app.control.purge()
    running = Stack(database_name=connection.settings_dict["NAME"], double=rebyte_double, redis_url=settings.REDIS_URL)
    yield running
    running.stop()
