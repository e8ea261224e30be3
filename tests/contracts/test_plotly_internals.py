"""plotly.js internals the console relies on to draw charts with no inline <style> (templates/_plotly.html)."""

from pathlib import Path

import plotly

from console.web.plotly_css import guarded_style_ids, stylesheet

BUNDLE = Path(plotly.__path__[0]) / "package_data" / "plotly.min.js"


def test_plotly_skips_its_own_style_element_when_told_to():
    source = BUNDLE.read_text(encoding="utf-8")
    assert '"plotly.js-style-"' in source and 'matches(".no-inline-styles")' in source


def test_its_rules_are_read_out_of_the_bundle():
    css = stylesheet(BUNDLE)
    assert css.count("{") >= 60
    assert ".js-plotly-plot .plotly .main-svg {" in css and ".plotly-notifier .notifier-note {" in css


def test_every_other_style_element_it_adds_is_guarded_by_an_id():
    # One createElement("style") is the rules' own (skipped above); each other one must check an id we can take.
    source = BUNDLE.read_text(encoding="utf-8")
    assert source.count('createElement("style")') == 1 + len(guarded_style_ids(BUNDLE))
