"""A small seeded chaos run in CI: real stack, concurrent clients, injected faults, zero violations.

The stack runs on a PostgreSQL and a Redis of the run's own (tests/faults/instances.py), which it restarts: the
machine's are shared. This test process reads the same database as the stack (its connection is pointed at the
run's PostgreSQL for the test's length), so the invariants are checked where the stack wrote.
`make chaos` runs the same scenario longer and wider (IMPO_CHAOS_* environment); both print figures.
"""

import os
import subprocess
import sys

import pytest
from django.db import connection, connections
from rest_framework.authtoken.models import Token

from impo.devstack import MAKE_RUN_WEB_PROCESSES, REPO_ROOT, Stack, settings_database_url, start_web
from impo.devtools.invariants import check_all
from impo.devtools.records import ChaosUser
from tests.chaos.runner import ChaosConfig, ChaosRun, Services
from tests.factories import UserFactory
from tests.faults.instances import PrivatePostgres, PrivateRedis

DATABASE = "impo_chaos"


@pytest.fixture
def own_services(transactional_db, settings):
    """A PostgreSQL and a Redis of the run's own, migrated, with this process's database connection on them."""
    postgres, redis_server = PrivatePostgres(), PrivateRedis()
    try:
        postgres.create_database(DATABASE)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
            cwd=REPO_ROOT,
            env={**os.environ, "DATABASE_URL": postgres.url(DATABASE), "REDIS_URL": redis_server.url},
            check=True,
            timeout=300,
        )
        test_database = dict(connection.settings_dict)
        connections.close_all()
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(postgres.port), NAME=DATABASE)
        settings.REDIS_URL = redis_server.url
        try:
            yield postgres, redis_server
        finally:
            connections.close_all()
            connection.settings_dict.update(test_database)
    finally:
        redis_server.stop()
        postgres.destroy()


@pytest.mark.timeout(1800)
def test_a_chaos_run_keeps_every_invariant(own_services, rebyte_double, capsys):
    postgres, redis_server = own_services
    config = ChaosConfig.from_environment(conversations=6, messages=4, seconds=25, tools=True)
    with capsys.disabled():
        print(f"\nchaos seed={config.seed} (IMPO_CHAOS_SEED), {config.seconds:.0f} s of faults")
    users = []
    for _ in range(config.users):
        user = UserFactory()
        users.append(ChaosUser(id=user.id, token=Token.objects.create(user=user).key))
    stack = Stack(
        database_name=DATABASE, database_url=settings_database_url(), double=rebyte_double, redis_url=redis_server.url
    )
    web, web_url = start_web(stack, processes=MAKE_RUN_WEB_PROCESSES)
    chaos = ChaosRun(config, stack, web_url, users, Services(postgres=postgres, redis=redis_server, web=web))

    try:
        chaos.execute()
        chaos.settle(timeout=300)
        chaos.stop_watchers()
        chaos.figures.commands = sum(len(record.commands) for record in chaos.records)
        chaos.figures.violations.extend(check_all(chaos))  # some checks ask the web server
    finally:
        chaos.stop_watchers()
        stack.stop()

    with capsys.disabled():
        print("\n" + chaos.figures.summary(config.seed))
    assert sum(chaos.figures.faults.values()) > 0, "the run injected no fault: it proved nothing"
    assert chaos.figures.commands >= config.conversations
    assert chaos.figures.violations == []
