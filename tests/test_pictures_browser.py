"""Issue 24's pictures in a real Chromium: in *No mask* a leaked cell is marked and its hover
says the mask was forgotten; in *Mask after softmax* the lost-mass bars show the row sums the
readouts print.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect
from workbench_server import open_learner_page, wait_for_cell, watched

from app.learner.matrices import LEAKED_FUTURE

# The page position of a heat-map cell's centre, from the figure's own scales (rows and columns
# are factors "1", "2", …).
CELL_JS = """([figureName, row, column]) => {
  const doc = Bokeh.documents[0];
  const view = Bokeh.index.find_one(doc.get_model_by_name(figureName));
  view.el.scrollIntoView({block: 'center', behavior: 'instant'});
  const box = view.canvas_view.el.getBoundingClientRect();
  const frame = view.frame;
  return [box.left + frame.x_scale.compute(frame.x_range.synthetic(String(column))),
          box.top + frame.y_scale.compute(frame.y_range.synthetic(String(row)))];
}"""

# The text of every Bokeh tooltip shown now (they are drawn inside shadow roots).
TOOLTIPS_JS = """() => {
  const found = [];
  const walk = node => {
    if (node.classList && node.classList.contains('bk-tooltip-content') && node.offsetParent !== null)
      found.push(node.textContent);
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.children || []) walk(child);
  };
  walk(document.body);
  return found.join(' | ');
}"""


def choose(page: Page, title: str) -> None:
    page.get_by_label("Failure mode").select_option(label=title)
    expect(page.get_by_label("Failure mode")).to_have_value(title)


def test_no_mask_marks_a_leaked_cell_and_its_hover_says_the_mask_was_forgotten(server, page):
    watch = watched(page, server)
    open_learner_page(page, server.url, at_1280=True)
    choose(page, "No mask")
    expect(page.get_by_label("Causal mask", exact=True)).to_be_checked()
    wait_for_cell(page, "weights-source", 1, 3, lambda kind: kind == "leaked", key="kind")
    legend = page.get_by_test_id("cell-legend")
    expect(legend).to_be_visible()
    expect(legend).to_contain_text("leaked")
    x, y = page.evaluate(CELL_JS, ["weights-figure", 1, 3])
    page.mouse.move(x, y)
    page.wait_for_function(f"() => ({TOOLTIPS_JS})().includes('mask was not applied')")
    shown = page.evaluate(TOOLTIPS_JS)
    assert f"leaked: {LEAKED_FUTURE}" in shown and "visible" not in shown
    assert " | " not in shown  # one tooltip, not one per mark drawn over the cell
    watch.assert_clean()


def test_mask_after_softmax_bars_show_the_row_sums_the_readouts_print(server, page):
    watch = watched(page, server)
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    bars = page.get_by_test_id("lost-mass")
    expect(bars).to_be_visible()
    expect(bars.locator("tr")).to_have_count(3)
    kept = bars.locator("b.kept").all_inner_texts()
    readouts = [t.split(" (no visible key")[0] for t in
                page.locator("table.readouts tbody tr").locator("td:nth-of-type(1)").all_inner_texts()]
    assert kept == readouts and any("not 1" in k for k in kept), (kept, readouts)
    choose(page, "Correct")
    expect(bars).to_be_hidden()
    watch.assert_clean()
