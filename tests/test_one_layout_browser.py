"""One layout of the page per message from the server (app/shared/one_layout.js), in Chromium.

BokehJS lays the whole page out each time a part is shown, hidden or resized; a failure-mode
switch at a batch of three shows and hides a dozen parts in one message. The page gathers those
into one layout. These tests count the page's layouts (``compute_layout`` of a root view, the
work one_layout.js saves) around one switch, and check that the page drawn after it is the page
as it now is: the maps the new mode shows at their sizes, those it hides at none.

One shared server (conftest's ``server``).
"""

from __future__ import annotations

from playwright.sync_api import expect
from workbench_server import open_instructor, open_learner_page

from attention_core.modes import FAILURE_MODES

# Counts the layouts of the whole page from now on: each compute_layout of a root view (one that
# no layout holds). Found as one_layout.js finds BokehJS's layout class.
COUNT_LAYOUTS_JS = """() => {
  let proto = null
  for (const view of Object.values(Bokeh.index)) {
    for (let p = Object.getPrototypeOf(view); p !== null; p = Object.getPrototypeOf(p))
      if (Object.hasOwn(p, 'invalidate_layout') && Object.hasOwn(p, 'compute_layout')) { proto = p; break }
    if (proto !== null) break
  }
  window.__layouts = 0
  const compute = proto.compute_layout
  proto.compute_layout = function () {
    if (!(this.parent instanceof proto.constructor)) window.__layouts += 1
    return compute.call(this)
  }
  return typeof proto.invalidate_layout.bokeh_invalidate_layout
}"""

# Each named figure's drawn canvas size, as BokehJS laid it out.
FIGURE_SIZES_JS = """(names) => names.map(n => {
  const view = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(n))
  return [n, Math.round(view.bbox.width), Math.round(view.bbox.height)]
})"""


def layouts_after(page, settle_ms: int = 700) -> int:
    """The layouts counted once the page has drawn and stayed still for ``settle_ms``."""
    last = -1
    while True:
        page.wait_for_timeout(settle_ms)
        now = page.evaluate("() => window.__layouts")
        if now == last:
            return now
        last = now


def test_a_failure_mode_switch_at_a_batch_of_three_is_one_layout_and_draws_every_map(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Input mode").select_option(label="X and projections (W_Q, W_K, W_V)")
    page.get_by_label("Batch size").select_option("3")
    expect(page.get_by_label("X item 3 token 1, component 1", exact=True)).to_be_visible()
    figures = [f"{k}-item-{b}-figure" for k in ("scores", "weights") for b in (1, 2, 3)]
    sizes = page.evaluate(FIGURE_SIZES_JS, figures)
    assert all(w > 100 and h > 100 for _, w, h in sizes), sizes
    # BokehJS's own function is kept beside the page's (the bench compares the two).
    assert page.evaluate(COUNT_LAYOUTS_JS) == "function"
    layouts_after(page)
    page.evaluate("() => window.__layouts = 0")
    # Batch items mixed hides each item's maps and shows the batch's one map (the items' rows
    # mixed): 13 layouts without one_layout.js in this page, one or two with it (and one more
    # by BokehJS's ResizeObserver as the page's height changes).
    mode = FAILURE_MODES["batch_items_mixed"]
    page.get_by_label("Failure mode").select_option(label=mode.title)
    expect(page.get_by_test_id("mode-description")).to_have_text(mode.description)
    expect(page.get_by_test_id("mode-breaks")).to_be_visible()
    assert layouts_after(page) <= 3
    # The one layout drew the page as it now is: the items' maps hidden, the batch's map shown.
    batch = ["scores-figure", "weights-figure"]
    assert page.evaluate(FIGURE_SIZES_JS, figures) == [[n, 0, 0] for n in figures]
    assert page.evaluate(FIGURE_SIZES_JS, batch) == [[n, 400, 300] for n in batch]
    # And back: each item's maps at the size they had, the batch's map hidden.
    page.evaluate("() => window.__layouts = 0")
    page.get_by_label("Failure mode").select_option(label=FAILURE_MODES["correct"].title)
    expect(page.get_by_test_id("mode-breaks")).to_be_hidden()
    assert layouts_after(page) <= 3
    assert page.evaluate(FIGURE_SIZES_JS, figures) == sizes
    assert page.evaluate(FIGURE_SIZES_JS, batch) == [[n, 0, 0] for n in batch]


def test_the_instructor_page_is_laid_out_once_per_message_too(server, page, watch):
    open_instructor(page, server)
    assert page.evaluate(COUNT_LAYOUTS_JS) == "function"
