"""A process that commits and then exits at once still sends the wake-ups it committed (runtime/outbound.py flushes
its hint sender at exit, bounded): 60 messages admitted by a management command all start, with no sweeper pass to
find them (the sweeper's interval is an hour, so only the hints can wake the runs)."""

import os
import subprocess
import sys

from devtools.stack import REPO_ROOT, wait_until
from runtime.models import Run, RunState
from tests.factories import UserFactory

MESSAGES = 60

# The service layer, as a management command or a one-off script would call it, from a few threads as a web
# process's requests would: the commits come faster than their wake-ups leave, and the process ends right after the
# last, with wake-ups still in its hint sender's hands.
ADMIT = """
import os
from concurrent.futures import ThreadPoolExecutor
from django.contrib.auth import get_user_model
from django.db import connection
from runtime.services.admission import MessageCommand
from runtime.services.commands import submit_main_chat_message

def admit(owner):
    try:
        submit_main_chat_message(owner=owner, command=MessageCommand(client_message_id=f"exit-{owner.id}", text="hi"))
    finally:
        connection.close()

owners = list(get_user_model().objects.filter(id__in=os.environ["OWNER_IDS"].split(",")))
with ThreadPoolExecutor(max_workers=6) as pool:
    list(pool.map(admit, owners))
"""


def test_messages_admitted_by_a_process_that_exits_at_once_all_start_without_the_sweeper(stack):
    owners = UserFactory.create_batch(MESSAGES)
    sweeper = stack.start_sweeper(interval=3600)
    stack.start_worker()
    # Its one pass (right after this line) is over before the script below has even loaded Django.
    wait_until(lambda: "loop started" in sweeper.log_text(), timeout=60, what="the sweeper's start")

    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", ADMIT],
        cwd=REPO_ROOT,
        # As the stack starts its processes: this session's environment (its queue) under the stack's.
        env={**os.environ, **stack.env, "OWNER_IDS": ",".join(str(owner.id) for owner in owners)},
        check=True,
        timeout=120,
    )
    runs = Run.objects.filter(owner__in=owners)
    assert runs.count() == MESSAGES
    # Generous: the worker claims a few runs at a time, and each of these is its owner's first message.
    wait_until(
        lambda: not runs.filter(state=RunState.QUEUED).exists(),
        timeout=120,
        interval=0.2,
        what="every run started",
    )
