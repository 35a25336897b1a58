"""A Host header not in ALLOWED_HOSTS (what every scanner of an address sends, unauthenticated) is answered with the
site's own 400 — the ICA envelope under /api/, the project's page elsewhere — and logged as one INFO line without a
traceback, DEBUG or not. Before, with DEBUG on, it was Django's HTML debug page and a 14-line traceback per request."""

import httpx
import pytest

from devtools.stack import start_web, wait_until

SCANNER_HOST = "scanner.example"


@pytest.mark.parametrize("debug", ["false", "true"])
def test_a_disallowed_host_is_the_sites_own_400_and_one_info_line(stack, debug):
    web, url = start_web(stack, env={"DJANGO_DEBUG": debug})
    logged_before = len(web.log_text())

    api = httpx.get(f"{url}/api/v1/conversation", headers={"Host": SCANNER_HOST}, timeout=30)
    page = httpx.get(f"{url}/login/", headers={"Host": SCANNER_HOST}, timeout=30)

    assert api.status_code == 400
    assert api.headers["Content-Type"] == "application/json"
    assert api.json()["error"]["code"] == "host_not_allowed"
    assert api.json()["requestId"] == api.headers["X-Request-Id"]
    assert page.status_code == 400
    assert page.headers["Content-Type"].startswith("text/html")
    assert "The server could not understand this request." in page.text  # templates/400.html

    def logged() -> str:
        return web.log_text()[logged_before:]

    wait_until(lambda: logged().count(SCANNER_HOST) >= 2, timeout=30, what="the refusals' log lines")
    lines = [line for line in logged().splitlines() if SCANNER_HOST in line]
    assert len(lines) == 2, logged()
    assert all(" INFO django.security.DisallowedHost " in line for line in lines), lines
    assert "Traceback" not in logged()
