"""Every console page, and the log-in page, meets WCAG 2.0 and 2.1 at levels A and AA by Deque's axe-core, in the light
and the dark theme, at 1440 px: contrast, names and labels, links told from text by more than colour.

The page walk's arranged database, server and page list serve it (tests/browser/test_page_walk.py); a module of its
own so the two walks run side by side on the suite's two workers.
"""

import pytest
from axe_playwright_python.sync_playwright import Axe
from flask import url_for

from tests.browser import test_page_walk as page_walk
from tests.browser.test_page_walk import PAGES, WIDTHS, logged_in, visit

pytestmark = [pytest.mark.browser, pytest.mark.layout]
walk = page_walk.walk  # the walk's module-scoped fixture: this module arranges its own database and server
AXE = Axe()
# WCAG 2.0 and 2.1, levels A and AA, as axe-core tags its rules; violations only.
AXE_RULES = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
             "resultTypes": ["violations"]}


@pytest.mark.parametrize("endpoint", list(PAGES))
def test_a_page_meets_wcag_2_1_aa_by_axe_in_both_themes(walk, endpoint):
    page = logged_in(walk)
    with walk.app.test_request_context():
        path = url_for(endpoint, **PAGES[endpoint](walk.data))
    page.set_viewport_size(WIDTHS["desktop"])
    page.emulate_media(color_scheme="light")
    visit(walk, path)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # the page follows the system's theme as it changes (its charts too)
        assert inaccessible(page) == [], f"{path} in the {scheme} theme"


def inaccessible(page) -> list[str]:
    """Say what axe-core finds against WCAG 2.1 A and AA on the page: each rule, its impact and its first elements."""
    found = AXE.run(page, options=AXE_RULES).response["violations"]
    return [f"{rule['id']} ({rule['impact']}): {rule['help']}; "
            + ", ".join(" ".join(node["target"]) for node in rule["nodes"][:3]) for rule in found]


def test_the_login_page_meets_wcag_2_1_aa_in_both_themes(walk):
    page = walk.page
    page.set_viewport_size(WIDTHS["desktop"])
    page.emulate_media(color_scheme="light")
    visit(walk, "/login")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert inaccessible(page) == [], f"/login in the {scheme} theme"
