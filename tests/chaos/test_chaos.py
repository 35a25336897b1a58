"""A small seeded chaos run in CI: real stack, concurrent clients, injected faults, zero violations.

`make chaos` runs the same scenario longer and wider (IMPO_CHAOS_* environment); both print figures.
"""

import pytest
from rest_framework.authtoken.models import Token

from impo.devstack import start_web
from tests.chaos.invariants import check_all
from tests.chaos.runner import ChaosConfig, ChaosRun, ChaosUser
from tests.factories import UserFactory


@pytest.mark.timeout(900)
def test_a_chaos_run_keeps_every_invariant(stack, capsys):
    config = ChaosConfig.from_environment(conversations=6, messages=4, seconds=25, tools=True)
    users = []
    for _ in range(config.users):
        user = UserFactory()
        users.append(ChaosUser(id=user.id, token=Token.objects.create(user=user).key))
    _, web_url = start_web(stack)
    chaos = ChaosRun(config, stack, web_url, users)

    try:
        chaos.execute()
        chaos.settle(timeout=240)
    finally:
        chaos.stop_watchers()
    chaos.figures.commands = sum(len(record.commands) for record in chaos.records)
    chaos.figures.violations.extend(check_all(chaos))

    with capsys.disabled():
        print("\n" + chaos.figures.summary(config.seed))
    assert sum(chaos.figures.faults.values()) > 0, "the run injected no fault: it proved nothing"
    assert chaos.figures.commands >= config.conversations
    assert chaos.figures.violations == []
