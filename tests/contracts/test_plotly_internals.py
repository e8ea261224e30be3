"""plotly.js internals the console relies on to draw charts with no inline <style> (templates/_plotly.html), and the
bundle it serves matching the `plotly` wheel that writes its figures."""

import re

from plotly.offline import get_plotlyjs_version

from console.web.plotly_css import BUNDLE, guarded_style_ids, stylesheet

REFRESH = ("npm pack plotly.js-cartesian-dist-min@{version} (a tarball holding plotly-cartesian.min.js), "
           "then copy that file over static/vendor/plotly-cartesian.min.js")


def bundled_traces() -> set[str]:
    """The trace types the served bundle registers (each trace module names itself)."""
    return set(re.findall(r'moduleType:"trace",name:"(\w+)"', BUNDLE.read_text(encoding="utf-8")))


def test_the_served_bundle_is_the_plotly_js_the_wheel_writes_figures_for():
    header = BUNDLE.read_text(encoding="utf-8")[:200]
    served = re.search(r"plotly\.js \(cartesian - minified\) v([\d.]+)", header)
    assert served, f"{BUNDLE.name} is not plotly.js's cartesian build: {header!r}"
    wanted = get_plotlyjs_version()
    assert served.group(1) == wanted, REFRESH.format(version=wanted)


def test_the_bundle_draws_the_traces_the_console_makes():
    # Each chart the console draws, its type checked on the rendered pages by tests/browser/test_page_walk.py.
    assert {"bar", "scatter", "heatmap"} <= bundled_traces()


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
