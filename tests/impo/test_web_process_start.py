"""What a web process loads at its start: not the provider's SDK, which only workers, the sweeper and staff actions
use (it is most of a second of CPU for every web process started, and its memory for the process's life)."""

import subprocess
import sys

import pytest

from devtools.stack import REPO_ROOT

pytestmark = pytest.mark.processes

WEB_PROCESS_START = """
import sys
import django
django.setup()
import impo.asgi, impo.urls
from django.contrib import admin
from django.urls import get_resolver
get_resolver().url_patterns
admin.site.get_urls()
print(sorted(name for name in sys.modules if name == "openai" or name.startswith("openai.")))
"""


def test_a_web_process_starts_without_the_provider_sdk():
    started = subprocess.run(
        [sys.executable, "-c", WEB_PROCESS_START], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert started.stdout.strip().splitlines()[-1] == "[]", started.stderr[-2000:]
