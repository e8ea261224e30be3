"""The Content-Security-Policy is on every answer: pages, fragments, errors, the API, static files."""

import pytest

from console.safety import CONTENT_SECURITY_POLICY

DIRECTIVES = ["default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'", "base-uri 'self'",
              "form-action 'self'", "frame-ancestors 'none'"]


def test_the_policy_allows_no_inline_script_no_eval_and_no_framing():
    assert all(directive in CONTENT_SECURITY_POLICY for directive in DIRECTIVES)
    directives = dict(part.split(" ", 1) for part in CONTENT_SECURITY_POLICY.split("; "))
    assert not any("unsafe" in value for name, value in directives.items() if name != "style-src-attr")
    # The one exception: an empty style attribute (Plotly sets one on the Reports page), by its hash, nothing else.
    assert directives["style-src-attr"] == "'unsafe-hashes' 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"


@pytest.mark.parametrize("path", ["/login", "/overview", "/runs", "/no-such-page", "/healthz", "/internal/runs",
                                  "/static/console.js", "/vendor/plotly.css"])
def test_every_answer_carries_it(client, auth, path):
    auth.as_role("viewer")
    response = client.get(path, headers={"HX-Request": "true"} if path == "/runs" else {})
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


def test_plotlys_rules_are_served_as_a_stylesheet(client):
    response = client.get("/vendor/plotly.css")
    assert response.status_code == 200 and response.mimetype == "text/css"
    assert ".js-plotly-plot .plotly .main-svg {" in response.get_data(as_text=True)


def test_pages_with_charts_hand_plotly_its_stylesheet_instead_of_inline_styles(client, auth):
    auth.as_role("viewer")
    html = client.get("/overview").get_data(as_text=True)
    assert '<link id="plotly.js-style-global" class="no-inline-styles" rel="stylesheet" href="/vendor/plotly.css">' \
        in html
    assert "<template id=" in html
