"""A keyboard user sees where they are: the focus ring of a selected (filled) control stands out from its fill, and
no group clips it."""

import pytest
from playwright.sync_api import expect

from tests.helpers import browser_login

pytestmark = pytest.mark.browser

# What is wrong with the focus ring `el` draws, or "ok": the browser's own (style auto: two tones, seen on any colour,
# about 2 px outside the box) or an outline at least 2 px wide whose colour, composited over what it is drawn on (the
# element's own background for a ring inside it, else its parent's), reaches 3:1 (WCAG 1.4.11); and no ancestor that
# clips its overflow cutting into it.
RING = """el => {
  const style = getComputedStyle(el), width = parseFloat(style.outlineWidth), offset = parseFloat(style.outlineOffset);
  const auto = style.outlineStyle === 'auto';
  if (style.outlineStyle === 'none' || !(auto || width >= 2)) return `no ring: ${style.outlineStyle} ${width}`;
  const rgba = text => { const [r, g, b, a = 1] = text.match(/[\\d.]+/g).map(Number); return {r, g, b, a}; };
  const under = start => {
    for (let e = start; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c.a) return c;
    }
    return rgba(getComputedStyle(document.body).backgroundColor);
  };
  const ground = under(offset + width <= 0 ? el : el.parentElement), ring = rgba(style.outlineColor);
  const mix = k => ring.a * ring[k] + (1 - ring.a) * ground[k];
  const lum = c => ['r', 'g', 'b'].map(k => c[k] / 255)
    .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const [a, b] = [lum({r: mix('r'), g: mix('g'), b: mix('b')}), lum(ground)].sort((x, y) => y - x);
  const contrast = (a + 0.05) / (b + 0.05);
  if (!auto && contrast < 3) return `ring ${style.outlineColor} on ${JSON.stringify(ground)}: ${contrast.toFixed(2)}:1`;
  const out = Math.max(0, offset + (auto ? 2 : width)), box = el.getBoundingClientRect();
  for (let e = el.parentElement; e && e !== document.documentElement; e = e.parentElement) {
    const s = getComputedStyle(e);
    if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
    const r = e.getBoundingClientRect(), left = r.left + e.clientLeft, top = r.top + e.clientTop;
    if (box.left - out < left - 0.5 || box.top - out < top - 0.5 || box.right + out > left + e.clientWidth + 0.5
        || box.bottom + out > top + e.clientHeight + 0.5) return `clipped by ${e.tagName}.${e.className}`;
  }
  return 'ok';
}"""


def test_the_dlq_view_switchs_selected_button_shows_its_focus_ring(page, live_server):
    browser_login(page, live_server.url, then="/dlq/")
    page.locator("#dlq-q").focus()
    page.keyboard.press("Shift+Tab")  # the radio group's stop: its checked button, Grouped
    grouped = page.get_by_role("radio", name="Grouped")
    expect(grouped).to_be_focused()
    expect(grouped).to_be_checked()
    # The ring is its label's: the radio itself is hidden under it.
    assert page.locator("#dlq .segmented label", has_text="Grouped").evaluate(RING) == "ok"


def test_each_reports_period_link_shows_its_whole_focus_ring(page, live_server):
    browser_login(page, live_server.url, then="/reports/?period=7d")
    links = page.locator("#reports .segmented a")
    expect(links).to_have_count(4)
    page.locator("#from").focus()
    rings = {}
    for _ in range(4):
        page.keyboard.press("Shift+Tab")
        focused = page.locator("#reports .segmented a:focus")
        rings[focused.inner_text()] = focused.evaluate(RING)
    assert rings == {name: "ok" for name in ("24h", "7d", "30d", "90d")}
