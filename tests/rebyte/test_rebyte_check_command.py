"""`manage.py rebyte_check`, the round trip a user with a real key runs, here against the double."""

import os
import subprocess
import sys

from devtools.stack import REPO_ROOT


def run_check(double, *args):
    env = {**os.environ, "REBYTE_BASE_URL": double.api_url, "REBYTE_API_KEY": "check-key"}
    return subprocess.run(
        [sys.executable, "manage.py", "rebyte_check", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_check_prints_the_reply_and_what_it_created_then_reuses_its_agent(rebyte_double):
    first = run_check(rebyte_double, "--message", "ping from the check")
    second = run_check(rebyte_double, "--message", "again")

    assert first.returncode == 0, first.stderr
    assert "agent: agent_" in first.stdout and "(created)" in first.stdout
    assert "reply: Echo: ping from the check" in first.stdout
    assert second.returncode == 0, second.stderr
    assert "(reused)" in second.stdout
    counts = rebyte_double.state()["counts"]
    assert (counts["agents"], counts["sessions"]) == (1, 2)


def test_a_failing_turn_makes_the_check_fail_with_the_reason(rebyte_double):
    result = run_check(rebyte_double, "--message", "/fail no model here")

    assert result.returncode != 0
    assert "internal_error: no model here" in result.stderr
