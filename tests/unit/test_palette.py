"""The console's palette: text at WCAG AA contrast in both themes, and every colour in the palette block."""

import re

from tests.helpers import ROOT

CSS = (ROOT / "static" / "console.css").read_text()
AA = 4.5  # WCAG 2.x AA for text under 18.66 px bold / 24 px: the pills are 12 px, the muted text 12-14 px

# (text, ground): what the console writes on what.
PAIRS = [
    ("ink", "bg"), ("ink", "panel"), ("ink", "panel-2"), ("ink", "hover"), ("ink", "field-bg"),
    ("muted", "bg"), ("muted", "panel"), ("muted", "panel-2"), ("muted", "hover"), ("muted", "idle-bg"),
    ("muted", "bad-row"), ("muted", "ok-row"), ("muted", "warn-row"),
    ("brand", "panel"), ("brand", "bg"), ("brand", "panel-2"), ("brand-ink", "brand"),
    ("ok", "ok-bg"), ("info", "info-bg"), ("warn", "warn-bg"), ("bad", "bad-bg"),
    ("ok", "panel"), ("info", "panel"), ("warn", "panel"), ("bad", "panel"),
    ("ok-ink", "ok-bg"), ("info-ink", "info-bg"), ("warn-ink", "warn-bg"), ("bad-ink", "bad-bg"),
    ("alert-ink", "alert"), ("top-ink", "top-bg"), ("code-ink", "code-bg"),
]


def palette() -> dict[str, tuple[str, str]]:
    """Return each colour variable of :root as (light, dark); a plain colour is the same in both."""
    block = re.search(r":root \{(.*?)\n\}", CSS, re.S).group(1)
    colours = {}
    for name, value in re.findall(r"--([a-z0-9-]+):\s*([^;]+);", block):
        if match := re.fullmatch(r"light-dark\((#[0-9a-f]{6}),\s*(#[0-9a-f]{6})\)", value.strip()):
            colours[name] = match.groups()
        elif re.fullmatch(r"#[0-9a-f]{6}", value.strip()):
            colours[name] = (value.strip(), value.strip())
    return colours


def luminance(colour: str) -> float:
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_text_reaches_wcag_aa_in_both_themes():
    colours = palette()
    short = []
    for text, ground in PAIRS:
        for theme, index in (("light", 0), ("dark", 1)):
            ratio = contrast(colours[text][index], colours[ground][index])
            if ratio < AA:
                short.append(f"{theme}: --{text} on --{ground} is {ratio:.2f}:1")
    assert short == []


def test_the_dark_theme_is_dark_and_the_light_one_light():
    colours = palette()
    for ground in ("bg", "panel", "panel-2", "field-bg"):
        assert luminance(colours[ground][0]) > 0.8 and luminance(colours[ground][1]) < 0.05, ground


def test_every_colour_lives_in_the_palette():
    """A colour written into a rule would stay the same in the other theme; use a variable of :root."""
    rules = CSS[re.search(r":root \{.*?\n\}", CSS, re.S).end():]
    assert re.findall(r"#[0-9a-fA-F]{3,8}\b", rules) == []
