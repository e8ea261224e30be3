"""The plotly.js bundle the console serves, and its own style rules as a stylesheet, so charts need no inline
<style> (the CSP allows none)."""

import functools
import re
from pathlib import Path

from console import ROOT

# plotly.js's "cartesian" build (npm's plotly.js-cartesian-dist-min, at the version of the plotly.js inside the
# `plotly` wheel, which writes the figures): the bar, scatter and heat-map traces the console draws, in 1.5 MB where
# the wheel's full bundle takes 4.8 MB: a fresh browser (login, then the Overview) spent 3.9 s of CPU, now 2.8.
BUNDLE = ROOT / "static" / "vendor" / "plotly-cartesian.min.js"

# plotly.js keeps its rules in one object literal ("X" stands for the plot, "Y" for its notifier) and adds each
# to a <style> it creates, unless an element with id plotly.js-style-global carries the class no-inline-styles.
_RULES = re.compile(r'=\{("X,X div":.*?)\};for\(\w+ in', re.S)
# Other bundled CSS (maplibre's, for map charts the console never draws) goes in a <style> unless its id is taken.
_GUARDED_STYLE = re.compile(r'if\(!document\.getElementById\("([^"]+)"\)\)\{var \w+=document\.createElement\("style"\)')
_RULE = re.compile(r'"((?:[^"\\]|\\.)*)":(?:\'((?:[^\'\\]|\\.)*)\'|"((?:[^"\\]|\\.)*)")')


@functools.lru_cache(maxsize=4)
def stylesheet(bundle: Path) -> str:
    """Return plotly.js's style rules, read out of the bundle, as CSS ('' if this build keeps them elsewhere)."""
    found = _RULES.search(bundle.read_text(encoding="utf-8"))
    if found is None:
        return ""
    rules = []
    for selector, single, double in _RULE.findall(found.group(1)):
        selector = selector.replace(",", " ,", 1) if selector.startswith(",") else selector
        selector = selector.replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
        rules.append(f"{selector} {{{single or double}}}")
    return "\n".join(rules) + "\n"


@functools.lru_cache(maxsize=4)
def guarded_style_ids(bundle: Path) -> tuple[str, ...]:
    """Return the ids whose presence keeps plotly.js from adding the other <style> elements it bundles."""
    return tuple(_GUARDED_STYLE.findall(bundle.read_text(encoding="utf-8")))
