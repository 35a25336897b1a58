"""The web chat and the data lifecycle (docs/data-lifecycle.md): a page resuming from before what the event log keeps
reloads its history instead of waiting on a hole, and "Download my data" saves the account's export."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.web.conftest import last_assistant, log_in, send


def prune_events(stack) -> str:
    """One retention pass, run as operators run it, with the window over for every settled run."""
    result = subprocess.run(
        [sys.executable, "manage.py", "prune_events"],
        env={**os.environ, **stack.env, "IMPO_EVENT_RETENTION_SECONDS": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_a_page_resuming_below_the_window_reloads_its_history_and_shows_the_same_transcript(
    site, user, stack, rebyte_double
):
    rebyte_double.configure(delta_chunks=8, delta_delay_ms=150)
    page = site.new_page()
    log_in(page, user)
    send(page, "a reply that will be compacted")
    last_assistant(page).locator(".status-completed").wait_for()
    before = page.locator("#messages").inner_text()
    assert "compacted 1 runs" in prune_events(stack)

    # A page whose snapshot is older than the log: its first history read claims no events were seen yet.
    sockets, reads = [], []
    stale = site.new_page()
    stale.on("websocket", lambda socket: sockets.append(socket.url))

    def first_read_is_stale(route):
        response = route.fetch()
        body = response.json()
        reads.append(body["lastEventSeq"])
        if len(reads) == 1:
            body["lastEventSeq"] = 0
        route.fulfill(response=response, json=body)

    stale.route("**/api/v1/conversation?*", first_read_is_stale)
    with stale.expect_websocket(predicate=lambda socket: not socket.url.endswith("after=0")):
        log_in(stale, user, wait_for_chat=False)
    stale.wait_for_selector("#connection[data-state=live]")
    last_assistant(stale).locator(".status-completed").wait_for()

    assert [url.rsplit("after=", 1)[1] for url in sockets] == ["0", str(reads[1])]  # told to reload, it resumed
    assert len(reads) == 2
    assert stale.locator("#messages").inner_text() == before


def test_download_my_data_saves_the_accounts_export(site, user):
    page = site.new_page(accept_downloads=True)
    log_in(page, user)
    send(page, "keep this")
    last_assistant(page).locator(".status-completed").wait_for()

    with page.expect_download() as download:
        page.click("text=Download my data")
    document = json.loads(Path(download.value.path()).read_text())

    assert download.value.suggested_filename.startswith("impo-export-")
    assert document["format"] == "impo.export.v1"
    [conversation] = document["conversations"]
    assert [m["text"] for m in conversation["messages"]][0] == "keep this"
