"""A small seeded chaos run in CI: real stack, concurrent clients (messages, files uploaded, sent, deleted and left
unsent, regenerations, edits, ratings, approvals decided from their push, exports, deletes of Tasks, Main Chat and an
account, browsers subscribed to push), injected faults, zero violations.

The stack runs on a PostgreSQL and a Redis of the run's own (tests/faults/instances.py), which it restarts: the
machine's are shared. This test process reads the same database as the stack (its connection is pointed at the
run's PostgreSQL for the test's length), so the invariants are checked where the stack wrote.
`make chaos` runs the same scenario longer and wider (IMPO_CHAOS_* environment); both print figures.
"""

import os
import subprocess
import sys

import pytest
from django.contrib.auth.hashers import make_password
from django.db import connection, connections
from rest_framework.authtoken.models import Token

from devtools.invariants import check_all
from devtools.lifecycle_invariants import check_lifecycle
from devtools.push_service import PushService, vapid_public_key_of
from devtools.records import ChaosUser
from devtools.stack import MAKE_RUN_WEB_PROCESSES, REPO_ROOT, Stack, free_port, settings_database_url, start_web
from tests.chaos.approvals import APPROVAL_ENV
from tests.chaos.runner import ChaosConfig, ChaosRun, Services
from tests.chaos.uploads import UPLOAD_ENV
from tests.factories import PASSWORD, UserFactory
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
def test_a_chaos_run_keeps_every_invariant(own_services, rebyte_double, capsys, tmp_path):
    postgres, redis_server = own_services
    config = ChaosConfig.from_environment(conversations=6, messages=4, seconds=25, tools=True)
    with capsys.disabled():
        print(f"\nchaos seed={config.seed} (IMPO_CHAOS_SEED), {config.seconds:.0f} s of faults")
    users = [chaos_user() for _ in range(config.users)]
    doomed = [chaos_user(deletes_itself=True) for _ in range(config.deleted_accounts)]
    stack = Stack(
        database_name=DATABASE, database_url=settings_database_url(), double=rebyte_double, redis_url=redis_server.url
    )
    attachment_dir = tmp_path / "attachments"  # the store of the run's own, which the invariants list
    stack.env.update(UPLOAD_ENV, **APPROVAL_ENV, IMPO_ATTACHMENT_DIR=str(attachment_dir))
    push = PushService(free_port(), vapid_public_key_of(stack.env["IMPO_VAPID_PRIVATE_KEY"]))
    web, web_url = start_web(stack, processes=MAKE_RUN_WEB_PROCESSES)
    services = Services(postgres=postgres, redis=redis_server, web=web, push=push, attachment_dir=attachment_dir)
    chaos = ChaosRun(config, stack, web_url, users, services, doomed)

    try:
        chaos.execute()
        chaos.settle(timeout=300)
        chaos.stop_watchers()
        # Some checks ask the web server.
        chaos.figures.violations.extend([*check_all(chaos), *check_lifecycle(chaos)])
    finally:
        chaos.stop_watchers()
        stack.stop()
        push.stop()

    with capsys.disabled():
        print("\n" + chaos.figures.summary(config.seed))
    assert sum(chaos.figures.faults.values()) > 0, "the run injected no fault: it proved nothing"
    assert chaos.figures.commands >= config.conversations
    assert chaos.figures.commands_by_kind["account_delete"] == config.deleted_accounts
    assert chaos.figures.violations == []


def chaos_user(*, deletes_itself: bool = False) -> ChaosUser:
    user = UserFactory()
    if deletes_itself:
        # The web server checks the password with the deployment's hasher, not the suite's fast one.
        user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
        user.save(update_fields=["password"])
    return ChaosUser(id=user.id, token=Token.objects.create(user=user).key)
