"""Every page's frame: the theme and time display a person chose, rendered by the server; the skip link; the menu."""

import re

import pytest

from console.web import code_spans, soft_breaks
from console.web.display import THEME_COOKIE, TIMES_COOKIE


def html_tag(response) -> str:
    return re.search(r"<html[^>]*>", response.get_data(as_text=True)).group(0)


def test_without_a_choice_the_page_follows_the_system_and_shows_utc(client, auth):
    auth.as_role("viewer")
    tag = html_tag(client.get("/runs"))
    assert "data-theme" not in tag  # the stylesheet's color-scheme follows prefers-color-scheme
    assert 'data-times="utc"' in tag


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_a_chosen_theme_is_rendered_on_the_first_paint(client, auth, theme):
    auth.as_role("viewer")
    client.set_cookie(THEME_COOKIE, theme)
    response = client.get("/runs")
    assert f'data-theme="{theme}"' in html_tag(response)
    pressed = "true" if theme == "dark" else "false"
    assert re.search(rf'data-pref="theme" aria-pressed="{pressed}"', response.get_data(as_text=True))


def test_local_times_are_rendered_as_chosen_and_the_server_still_writes_utc(client, auth):
    auth.as_role("viewer")
    client.set_cookie(TIMES_COOKIE, "local")
    response = client.get("/audit/")
    assert 'data-times="local"' in html_tag(response)
    assert 'data-pref="times" aria-pressed="true"' in response.get_data(as_text=True)
    # The page's times are UTC in datetime= and in the text; the browser's script rewrites them.
    assert re.search(r'<time datetime="[^"]+\+00:00"', response.get_data(as_text=True))


def test_a_cookie_with_anything_else_is_ignored(client, auth):
    auth.as_role("viewer")
    client.set_cookie(THEME_COOKIE, '"><script>alert(1)</script>')
    client.set_cookie(TIMES_COOKIE, "mars")
    tag = html_tag(client.get("/runs"))
    assert "data-theme" not in tag and 'data-times="utc"' in tag


def test_every_page_has_a_skip_link_to_its_content_and_a_menu_button(client, auth):
    assert '<a class="skip-link" href="#content">Skip to content</a>' in client.get("/login").get_data(as_text=True)
    auth.as_role("viewer")
    body = client.get("/runs").get_data(as_text=True)
    assert body.index('class="skip-link" href="#content"') < body.index("<header")
    assert '<main id="content"' in body
    assert re.search(r'class="menu-toggle" aria-controls="topbar-menu" aria-expanded="false"', body)
    assert 'id="topbar-menu"' in body


def test_code_spans_mark_up_only_the_backticked_names_and_escape_the_rest():
    assert str(code_spans("Sleep `seconds` <b>& then</b> `x")) == (
        "Sleep <code>seconds</code> &lt;b&gt;&amp; then&lt;/b&gt; `x")
    assert str(code_spans(None)) == ""


def test_soft_breaks_let_a_name_wrap_between_its_parts_and_escape_it():
    assert str(soft_breaks("python:demo.flaky_compensated")) == "python:<wbr>demo.<wbr>flaky_<wbr>compensated"
    assert str(soft_breaks("<b>a&b</b>/c")) == "&lt;b&gt;a&amp;b&lt;/<wbr>b&gt;/<wbr>c"
    assert str(soft_breaks(None)) == ""


@pytest.mark.parametrize(("path", "current"), [
    ("/admin/users", '"page" href="/admin/users">People</a>'),
    ("/workorders?status=open", '"true" href="/workorders?status=open">'),
    ("/runs/workflows", '"page" href="/runs/workflows">Workflows</a>'),
    ("/approvals/mine", '"page" href="/approvals/mine">My requests'),
])
def test_the_chosen_tab_says_so_not_by_colour_alone(client, auth, path, current):
    """A screen reader could not tell which tab or filter was chosen: only its fill said so (helper 117)."""
    auth.as_role("admin")
    page = client.get(path).get_data(as_text=True)
    assert f"aria-current={current}" in page, re.findall(r'<a class="button[^>]*aria-current[^>]*>', page)
