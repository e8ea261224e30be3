"""The Content-Security-Policy allows no inline script: no template may carry one (the page walk finds it later)."""

import re
from pathlib import Path

import pytest

TEMPLATES = sorted((Path(__file__).resolve().parents[2] / "templates").rglob("*.html"))
# An event handler attribute (onclick=, onsubmit=…), htmx's hx-on, a javascript: URL, or a <script> with a body.
INLINE = re.compile(r"""\son[a-z]+\s*=|\shx-on[:\-=]|javascript:|<script(?![^>]*\bsrc=)[^>]*>""", re.IGNORECASE)


def without_comments(text: str) -> str:
    return re.sub(r"\{#.*?#\}", "", text, flags=re.DOTALL)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: str(path.name))
def test_no_template_has_an_inline_script(template):
    found = INLINE.findall(without_comments(template.read_text()))
    assert not found, f"{template}: {found} (use a data- attribute wired in static/console.js)"


def test_the_check_finds_each_kind():
    samples = ('<form onsubmit="x()">', '<a hx-on::click="x">', '<a href="javascript:x()">', "<script>x()</script>")
    for sample in samples:
        assert INLINE.search(sample), sample
    assert not INLINE.search('<script src="/static/console.js" defer></script>')
