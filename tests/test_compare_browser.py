"""The learner page's comparison of two saved runs draws its heat maps (newcomer finding: blank
maps and blank PNGs), in a real Chromium.

Assertions read the Bokeh document, the figures' own frames and a downloaded PNG's pixels,
waiting with ``expect()`` or ``wait_for_function``, never sleeping.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, expect
from workbench_server import open_learner_page

MAPS = ("compare-a", "compare-b", "compare-diff")

# Each comparison figure's factors, glyph rows and drawn frame (0×0 when never laid out).
FIGURES_JS = """(names) => names.map((name) => {
  const doc = Bokeh.documents[0];
  const fig = doc.get_model_by_name(name + '-figure');
  const source = doc.get_model_by_name(name + '-source');
  const view = fig == null ? null : Bokeh.index.find_one(fig);
  return {x: fig ? fig.x_range.factors : null, y: fig ? fig.y_range.factors : null,
          rows: source ? source.data.row.length : 0,
          frame: view ? [view.frame.bbox.width, view.frame.bbox.height] : [0, 0]};
})"""

DRAWN_JS = """(names) => names.every((name) => {
  const fig = Bokeh.documents[0].get_model_by_name(name + '-figure');
  const view = fig == null ? null : Bokeh.index.find_one(fig);
  return view != null && view.frame.bbox.width > 100 && view.frame.bbox.height > 100;
})"""


def save(page: Page, label: str = "") -> None:
    page.get_by_label("Label", exact=True).fill(label)
    page.get_by_label("Label", exact=True).press("Tab")
    page.get_by_role("button", name="Save run").click()


def coloured_pixels(png: bytes) -> int:
    """Pixels of a PNG that are neither near white nor transparent."""
    image = Image.open(io.BytesIO(png)).convert("RGBA")
    return sum(1 for r, g, b, a in image.get_flattened_data() if a > 0 and min(r, g, b) < 200)


def test_comparison_maps_are_drawn_and_name_runs_as_the_table(server, page, watch):
    warnings: list[str] = []
    page.on("console", lambda msg: msg.type == "warning" and warnings.append(msg.text))
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Prediction").fill("p")
    save(page)
    expect(page.get_by_role("status").filter(has_text="Saved run #1")).to_be_visible()
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    save(page)
    expect(page.get_by_role("status").filter(has_text="Saved run #2")).to_be_visible()
    for n in (1, 2):
        page.get_by_role("checkbox", name=re.compile(rf"^Run {n}\b")).check()
    page.wait_for_function(DRAWN_JS, arg=list(MAPS))
    for figure in page.evaluate(FIGURES_JS, list(MAPS)):
        assert figure["x"] == ["1", "2", "3"] and figure["y"] == ["3", "2", "1"]
        assert figure["rows"] == 9
    # Runs without a label are named as the Saved runs table numbers them, not by their id.
    summary = page.get_by_role("table", name="Comparison of row sums and future-token weight")
    expect(summary).to_contain_text("A: Run 1 (Correct, causal)")
    expect(summary).to_contain_text("B: Run 2 (Mask after softmax (broken))")
    # The PNG is the figure as drawn: cells in colour, not a white canvas with a stray "0".
    for title in ("Weights of run A", "Weights of run B", "Difference A − B"):
        with page.expect_download() as download:
            page.get_by_role("button", name=f"Save {title} as PNG").click()
        png = Path(download.value.path()).read_bytes()
        assert coloured_pixels(png) > 5_000, title
    # BokehJS warned this for the hidden value charts (no values, no range) on every layout.
    assert [w for w in warnings if "could not set initial ranges" in w] == []
