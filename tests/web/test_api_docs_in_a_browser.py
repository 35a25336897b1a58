"""/api/docs/ in a browser: Redoc draws the schema, and nothing is fetched from any other host (Redoc's footer
logo, which it always asks cdn.redoc.ly for, is refused by the page's Content-Security-Policy)."""

from urllib.parse import urlparse


def test_the_api_docs_page_draws_the_schema_from_this_server_alone(site):
    page = site.new_page()
    answered, refused = set(), {}
    page.on("response", lambda response: answered.add(urlparse(response.url).netloc))
    page.on("requestfailed", lambda request: refused.update({urlparse(request.url).netloc: request.failure}))

    page.goto("/api/docs/")
    page.get_by_text("Impo API (ICA v1)").first.wait_for()
    page.get_by_text("/api/v1/submissions/{submission_id}/stream").first.wait_for(state="attached")
    page.wait_for_load_state("networkidle")

    here = urlparse(site.base_url).netloc
    assert answered - {""} == {here}  # data: URLs have no host
    assert all(failure == "csp" for host, failure in refused.items() if host != here), refused
