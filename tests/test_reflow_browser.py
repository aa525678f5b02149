"""The page fits the window (issue 24, "A layout that fits"): WCAG 2.1 reflow (1.4.10) at 640 px
and at 1280 px with 200 % zoom, the 700 px embed, visible focus and no Tab stop that does
nothing, and the instructor table's tick boxes named for their runs.

One shared server (conftest's ``server``); each test walks every case it covers in one page,
so the module costs a few page loads.
"""

from __future__ import annotations

import re

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect
from store_helpers import make_record
from workbench_server import (
    blocking_violations,
    open_instructor,
    open_learner_page,
    save_run,
    set_largest_vector_inputs,
)

from attention_core.modes import FAILURE_MODES

WIDTH_JS = "() => document.documentElement.scrollWidth"
# The element that has focus, inside the shadow roots Panel and Bokeh draw in, and its outline.
FOCUSED_JS = """() => {
  let a = document.activeElement
  while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement
  const s = getComputedStyle(a)
  return {name: a.getAttribute('aria-label') || a.textContent.trim().slice(0, 40),
          width: parseFloat(s.outlineWidth), style: s.outlineStyle,
          events: a.classList.contains('bk-events')}
}"""
# Parts that scroll sideways inside the page (a tab's scroll box, a table's), but for those
# matching the selector passed in (the boxes meant to scroll).
SCROLLING_SIDEWAYS_JS = """(designated) => {
  const out = []
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      // The exercise's code keeps its lines whole: its text area scrolls sideways, by design.
      if (el.tagName !== 'TEXTAREA' && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1
          && !(designated && el.matches(designated))
          && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX))
        out.push(`${el.tagName}.${String(el.className).slice(0, 40)}: ${el.scrollWidth} in ${el.clientWidth}`)
      if (el.shadowRoot) walk(el.shadowRoot)
    }
  }
  walk(document)
  return out
}"""


# Parts of a runs table's header row past the table's right edge (Panel's 1 px filler column
# clips its own content: not a column to read).
CUT_HEADER_JS = """() => { const out = []
  const walk = (root) => { for (const el of root.querySelectorAll('.tabulator')) {
      const right = el.getBoundingClientRect().right
      for (const c of el.querySelectorAll('.tabulator-col:not(.empty), .tabulator-col:not(.empty) *'))
        if (c.getBoundingClientRect().width > 0 && c.getBoundingClientRect().right > right + 0.5)
          out.push(c.className) }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot) }
  walk(document); return out }"""


# The words (split at spaces and hyphens) of the given elements' own text that the browser
# drew over two lines: a word cut inside.
BROKEN_WORDS_JS = """els => els.flatMap(el => {
  const out = []
  const texts = document.createTreeWalker(el, NodeFilter.SHOW_TEXT)
  for (let t = texts.nextNode(); t; t = texts.nextNode()) {
    for (const m of t.data.matchAll(/[^\\s-]+/g)) {
      const range = document.createRange()
      range.setStart(t, m.index)
      range.setEnd(t, m.index + m[0].length)
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)))
      if (lines.size > 1) out.push(m[0])
    }
  }
  return out
})"""
# How each named figure's canvas is clipped, as the browser computed it.
CANVAS_CLIPS_JS = """(names) => names.map(n => {
  const view = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(n))
  return [n, getComputedStyle(view.shadow_el.querySelector('.bk-Canvas')).clipPath]
})"""


def assert_fits(page, width: int, where: str) -> None:
    scroll = page.evaluate(WIDTH_JS)
    assert scroll <= width, f"{where}: the page is {scroll} px wide in a {width} px window"


def walk_failure_modes(page, width: int, where: str) -> None:
    for mode in FAILURE_MODES.values():
        page.get_by_label("Failure mode").select_option(label=mode.title)
        expect(page.get_by_test_id("mode-description")).to_have_text(mode.description)
        assert_fits(page, width, f"{where}, {mode.title}")


def test_at_640_px_the_page_is_one_column_in_every_mode_and_at_the_largest_inputs(server, page, watch):
    page.set_viewport_size({"width": 640, "height": 720})
    open_learner_page(page, server.url)
    assert_fits(page, 640, "the first page")
    # One column: the sidebar's inputs above the main area's maps, both from the left edge.
    tokens = page.get_by_label("Tokens", exact=True).bounding_box()
    scores = page.get_by_role("button", name=re.compile("Save Scores as PNG")).bounding_box()
    assert tokens["y"] < scores["y"] and scores["x"] < 100, (tokens, scores)
    assert blocking_violations(page) == []
    walk_failure_modes(page, 640, "vectors")
    page.get_by_label("Failure mode").select_option(label=FAILURE_MODES["correct"].title)
    # 8 tokens, d_k = d_v = 4 with values: the widest grid, row steps of four-wide vectors.
    set_largest_vector_inputs(page)
    expect(page.locator("ol.row-steps")).to_contain_text("v_8")
    walk_failure_modes(page, 640, "8 tokens, d_k = 4")
    # Matrix mode with a batch of three: X per item, W_Q, W_K, W_V, a map per item.
    page.get_by_label("Input mode").select_option(label="X and projections (W_Q, W_K, W_V)")
    page.get_by_label("Batch size").select_option("3")
    page.get_by_label("Model width d_model").select_option("4")
    expect(page.get_by_label("W_V row 4, column 4", exact=True)).to_be_visible()
    walk_failure_modes(page, 640, "matrix mode, batch of 3")
    assert blocking_violations(page) == []
    # No stray marks at a map's left edge, which BokehJS never clears (app/shared/canvas_edge.css):
    # every item's maps hide that pixel. (A screenshot shows the marks only now and then.)
    figures = [f"{k}-item-{b}-figure" for k in ("scores", "weights") for b in (1, 2, 3)] + [
        f"contributions-{k}-figure" for k in ("score", "weight", "value", "contribution")]
    assert dict(page.evaluate(CANVAS_CLIPS_JS, figures)) == dict.fromkeys(figures, "inset(1px 0px 0px 1px)")


def test_at_640_px_long_unbroken_learner_text_wraps_or_scrolls_in_its_own_box(server, page, watch):
    """A URL as the prediction, 100-letter learner and label: repeated beside the outcome, in the
    save message and in Saved runs, they wrap (or the table scrolls in its box), not the page."""
    page.set_viewport_size({"width": 640, "height": 720})
    open_learner_page(page, server.url + "?predict=first")
    page.get_by_label("Prediction").fill("https://example.org/" + "a" * 100)
    page.get_by_label("Prediction").press("Tab")
    expect(page.get_by_test_id("prediction-outcome")).to_contain_text("example.org")
    assert_fits(page, 640, "a long prediction")
    page.get_by_label("Learner", exact=True).fill("L" * 100)
    save_run(page, "B" * 100)
    assert_fits(page, 640, "a long learner and label saved")
    # A broken run beside it, its failed checks named: the table fits, its Open links in view.
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    save_run(page, "broken")
    expect(page.get_by_role("table", name="Saved runs").locator("tbody tr")).to_have_count(2)
    assert page.evaluate(SCROLLING_SIDEWAYS_JS) == []
    # The long label wraps the ticks: each line of them starts where the first does.
    boxes = page.get_by_role("checkbox", name=re.compile(r"^Run \d")).evaluate_all(
        "els => els.map(e => [Math.round(e.getBoundingClientRect().top), e.getBoundingClientRect().left])")
    starts = {min(left for top, left in boxes if top == line) for line in {top for top, _ in boxes}}
    assert len(boxes) == 2 and len({top for top, _ in boxes}) == 2 and len(starts) == 1, boxes


def test_at_1280_px_with_200_percent_zoom_the_page_is_one_column(browser, server):
    # 200 % zoom of a 1280×720 window: a 640×360 CSS-pixel viewport at two device pixels each.
    context = browser.new_context(viewport={"width": 640, "height": 360}, device_scale_factor=2)
    try:
        page = context.new_page()
        open_learner_page(page, server.url)
        assert_fits(page, 640, "1280 px at 200 %")
        tokens = page.get_by_label("Tokens", exact=True).bounding_box()
        scores = page.get_by_role("button", name=re.compile("Save Scores as PNG")).bounding_box()
        assert tokens["y"] < scores["y"] and scores["x"] < 100, (tokens, scores)
    finally:
        context.close()


def test_the_700_px_embed_does_not_scroll_sideways_with_saved_runs_and_their_comparison(server, page, watch):
    page.set_viewport_size({"width": 700, "height": 610})
    page.goto(server.url + "embed?learner=Reflow")
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    for mode in FAILURE_MODES.values():
        page.get_by_label("Failure mode").select_option(label=mode.title)
        expect(page.get_by_test_id("mode-description")).to_have_text(mode.description)
        assert_fits(page, 700, f"embed, {mode.title}")
        assert page.evaluate(SCROLLING_SIDEWAYS_JS) == [], mode.title
    page.get_by_label("Failure mode").select_option(label=FAILURE_MODES["correct"].title)
    page.locator(".bk-tab", has_text="Saved runs").click()
    page.get_by_label("Prediction").fill("row 2 reads key 2")
    for label in ("correct", "broken"):
        if label == "broken":
            page.locator(".bk-tab", has_text="Workbench").click()
            page.get_by_label("Mask after softmax (broken)", exact=True).check()
        page.locator(".bk-tab", has_text="Workbench").click()
        page.get_by_role("button", name="Save run").click()
        expect(page.get_by_role("status").filter(has_text="Saved run")).to_have_count(1)
    page.locator(".bk-tab", has_text="Saved runs").click()
    for n in (1, 2):
        page.get_by_role("checkbox", name=re.compile(rf"^Run {n}\b")).check()
    expect(page.get_by_text("Comparing run 1 (A) with run 2 (B).")).to_be_visible()
    assert_fits(page, 700, "embed, Saved runs compared")
    assert page.evaluate(SCROLLING_SIDEWAYS_JS) == []


def test_focus_is_a_clear_ring_on_every_tab_stop_and_no_stop_does_nothing(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Tokens", exact=True).focus()
    seen = []
    for _ in range(30):  # the sidebar, both maps' PNG buttons, Row, the record form
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED_JS)
        seen.append(focused["name"])
        assert not focused["events"], f"a heat map's canvas is a Tab stop, after {seen}"
        assert focused["width"] >= 2 and focused["style"] == "solid", focused
    assert "Save Scores as PNG" in seen and "Save run" in seen, seen


def test_each_tick_box_of_the_instructor_table_is_named_for_its_run(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Learner", exact=True).fill("Reflow Ada")
    save_run(page, "named tick", prediction="p")
    # A 100-character learner name and label without a break point: the Learners table once
    # widened the main column to 1,029 px at 640 px, so everything scrolled sideways together.
    long_name = "Reflow Ada" + "L" * 90
    with server.store() as store:
        store.import_records([make_record(learner=long_name, label="X" * 100)])
    open_instructor(page, server)
    expect(page.get_by_role("table", name="Learners and their checkpoints")).to_contain_text(long_name)
    page.get_by_label("Learner contains").fill("Reflow Ada")
    page.get_by_label("Learner contains").press("Enter")
    box = page.get_by_role("checkbox", name=re.compile(
        r"^Select run: Reflow Ada, Correct, causal, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    expect(box).to_have_count(1)
    expect(page.get_by_role("checkbox", name="Select Row")).to_have_count(0)
    # The long name everywhere it shows: the class picture's key, the comparison, the table.
    box.check()
    # The server has the first tick (its run's full text is shown) before the second is made.
    expect(page.get_by_label(re.compile("Full text of run"))).to_have_count(1)
    page.get_by_role("checkbox", name=re.compile(r"^Select run: Reflow AdaL")).check()
    expect(page.get_by_label(re.compile("Full text of run"))).to_have_count(2)
    expect(page.get_by_role("table", name="Comparison of row sums and future-token weight")).to_contain_text(
        long_name)
    page.get_by_role("button", name="Learner", exact=True).click()
    expect(page.get_by_role("list", name="Groups of the class picture")).to_contain_text(long_name)
    # Only the comparison's maps (two side by side), the Learners table and the runs table (each
    # column at least 90 px, so no word of a header or a cell is cut at 640 px) may scroll, in
    # their own box.
    designated = ".scroll-box, .learners-scroll, .tabulator-tableholder"
    for width in (1280, 640):
        page.set_viewport_size({"width": width, "height": 720})
        assert_fits(page, width, "the instructor page")
        # Tabulator fits its columns to the new width a moment after the window changed.
        try:
            page.wait_for_function(f"d => ({SCROLLING_SIDEWAYS_JS})(d).length === 0", arg=designated,
                                   timeout=10_000)
        except PlaywrightTimeoutError:
            pass
        assert page.evaluate(SCROLLING_SIDEWAYS_JS, designated) == [], f"at {width} px"
        name = page.get_by_role("table", name="Learners and their checkpoints").get_by_text(long_name)
        assert name.bounding_box()["x"] + name.bounding_box()["width"] <= width, f"at {width} px"
        for figure in page.locator(".bk-Figure").all()[:2]:  # the class picture, axis titles and all
            box = figure.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, box)
        pictures = ["class-future-figure", "class-row-sum-figure"]  # no stray marks at their left edge
        assert dict(page.evaluate(CANVAS_CLIPS_JS, pictures)) == dict.fromkeys(pictures, "inset(1px 0px 0px 1px)")
        # (The learner's own words, 100 letters without a break here, wrap where they must.)
        broken = page.locator(".tabulator-col-title, .tabulator-cell:not([tabulator-field=learner])"
                              ":not([tabulator-field=label])").evaluate_all(BROKEN_WORDS_JS)
        assert broken == [], f"at {width} px, words of the runs table split over two lines: {broken}"
        # Scrolled to its end, the table shows its last column whole.
        page.locator(".tabulator-tableholder").evaluate("h => { h.scrollLeft = h.scrollWidth }")
        # Tabulator moves the header row with the rows on scroll, a moment later.
        try:
            page.wait_for_function(f"() => ({CUT_HEADER_JS})().length === 0", timeout=5_000)
        except PlaywrightTimeoutError:
            pass
        cut = page.evaluate(CUT_HEADER_JS)
        assert cut == [], f"at {width} px, header parts past the table's right edge: {cut}"
