"""Issue 14's views in a real Chromium: the contributions of the chosen row, heat maps saved as
PNG images, and the comparison of two runs of different sizes."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect
from workbench_server import (
    blocking_violations,
    open_learner_page,
    save_run,
    screenshot,
    source,
    type_number,
    wait_for_source,
    wait_for_tables_drawn,
    wait_for_weights,
)

from attention_core import scaled_dot_product_attention
from attention_core.records import ExperimentRecord


def test_contributions_of_the_worked_row_side_by_side(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    table = page.get_by_role("table", name="Contributions to row 2")
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(table.locator("tfoot")).to_contain_text("17.311")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_text("key 11.0000.26910.0002.689")
    expect(rows.nth(1)).to_have_text("key 22.0000.73120.00014.621")
    expect(rows.nth(2)).to_contain_text("masked (−∞ before softmax)")
    expect(page.get_by_test_id("contributions-lesson")).to_contain_text(
        "Largest score: key 3 (masked, so softmax never saw it) · largest weight: key 2 · "
        "largest contribution (size): key 2")
    wait_for_source(page, "contributions-components-source", "contribution_label",
                    ["2.69", "14.6", "0"])
    assert source(page, "contributions-source")["weight_label"] == ["0.27", "0.73", "0"]
    charts = page.locator(".bk-Figure").filter(has=page.locator("canvas"))
    expect(charts).not_to_have_count(0)
    page.get_by_role("heading", name="Contributions to row 2").evaluate(
        "e => e.scrollIntoView({block: 'start'})")
    screenshot(page, "contributions-worked-row.png", full_page=False)

    # Another row, from the Row control: the table and the bars follow.
    row = page.get_by_label("Row", exact=True)
    row.fill("3")
    row.press("Enter")
    expect(page.get_by_role("table", name="Contributions to row 3")).to_be_visible()
    wait_for_source(page, "contributions-components-source", "contribution_label",
                    ["3e−03", "0.02", "99.9"])

    # Without values the view says what contributions need, and the value bars go.
    page.get_by_label("Use values (adds output and contributions)", exact=True).uncheck()
    expect(page.get_by_test_id("contributions-need-values")).to_contain_text(
        "Contributions need values")
    wait_for_source(page, "contributions-components-source", "x", [])


def test_contributions_when_keys_are_mixed_instead_of_values(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Failure mode").select_option(label="Keys mixed instead of values")
    page.get_by_role("button", name="Load a preset that shows it: Worked row with values, keys mixed").click()
    expect(page.get_by_test_id("contributions-mixed-keys")).to_contain_text(
        "the weights mixed the keys kj, not the values")
    wait_for_source(page, "contributions-components-source", "value", [1, 2, 9])
    assert blocking_violations(page) == []


def test_contributions_of_the_four_token_trace_row_4_by_component(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_role("button", name="Four-token trace (seed 000)").click()
    wait_for_weights(page, 16)
    row = page.get_by_label("Row", exact=True)
    row.fill("4")
    row.press("Enter")
    table = page.get_by_role("table", name="Contributions to row 4")
    expect(table.locator("tfoot")).to_contain_text("[0.592, −1.279]")  # h_4 of the four-token trace
    expect(table.locator("tbody tr").nth(3)).to_have_text("key 41.4140.539[0, −2.000][0, −1.078]")
    # Key 1's two short bars side by side keep one label: the two "0.06" overlapped.
    wait_for_source(page, "contributions-components-source", "contribution_label",
                    ["0.06", "", "0.27", "−0.27", "0.26", "0", "0", "−1.08"])
    assert source(page, "contributions-components-source")["component"] == ["1", "2"] * 4
    assert source(page, "contributions-source")["weight_label"] == ["0.06", "0.27", "0.13", "0.54"]
    page.get_by_role("heading", name="Contributions to row 4").evaluate(
        "e => e.scrollIntoView({block: 'start'})")
    screenshot(page, "contributions-four-token-trace-row-4.png", full_page=False)
    # Back to numbers without values: the value charts go, with no page error (the watch).
    page.get_by_role("button", name="Reset").click()
    expect(page.get_by_test_id("contributions-need-values")).to_be_visible()
    wait_for_source(page, "contributions-components-source", "x", [])
    page.wait_for_function("""() => {
        const fig = Bokeh.documents[0].get_model_by_name('contributions-value-figure');
        return Bokeh.index.find_one(fig).el.getBoundingClientRect().width === 0; }""")


def png_size(path: str) -> tuple[int, int, int]:
    """(width, height, distinct colours) of a real PNG file; fails if it is not one."""
    from PIL import Image

    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"not a PNG: {data[:8]!r}"
    assert len(data) > 2_000, f"a {len(data)}-byte PNG is too small to hold a heat map"
    with Image.open(path) as image:
        image.load()
        return image.width, image.height, len(image.convert("RGB").getcolors(1 << 20) or [])


def figure_size(page: Page, name: str) -> list[int]:
    """The CSS pixel size of the Bokeh figure called ``name`` as drawn on the page."""
    return page.evaluate("""name => {
        const r = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(name)).el.getBoundingClientRect();
        return [Math.round(r.width), Math.round(r.height)]; }""", name)


def save_png(page: Page, button_name: str, *, keyboard: bool = False):
    """Click (or focus and press Enter on) the named save button; return the download."""
    button = page.get_by_role("button", name=button_name, exact=True)
    expect(button).to_be_visible()
    with page.expect_download() as download:
        if keyboard:
            button.focus()
            page.keyboard.press("Enter")
        else:
            button.click()
    return download.value


def test_each_heat_map_downloads_as_a_png_of_the_figure(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Mask after softmax (broken)").check()
    wait_for_source(page, "weights-source", "state", ["visible", "zeroed after softmax",
                                                      "zeroed after softmax", "visible", "visible",
                                                      "zeroed after softmax", "visible", "visible",
                                                      "visible"])
    figure_px = figure_size(page, "weights-figure")
    for title, keyboard in (("Scores", False), ("Weights", True)):
        download = save_png(page, f"Save {title} as PNG", keyboard=keyboard)
        assert download.suggested_filename == f"{title.lower()}-mask-after-softmax-causal-T3-dk1.png"
        width, height, colours = png_size(download.path())
        # The figure as drawn (device pixel ratio 1 here): its own size, in many colours.
        assert abs(width - figure_px[0]) <= 2 and abs(height - figure_px[1]) <= 2, (width, height, figure_px)
        assert colours > 20  # a blank canvas has one or two


def test_comparing_runs_of_different_sizes_says_why_and_saves_each_map(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Prediction").fill("p")
    save_run(page, "three tokens")
    type_number(page, "Tokens", "4")
    wait_for_weights(page, 16)
    save_run(page, "four tokens")
    # Each tick names its run's size.
    for n, label in ((1, "three"), (2, "four")):
        page.get_by_role("checkbox", name=f"Run {n} “{label} tokens”: Correct, causal · {n + 2} tokens").check()
    note = page.get_by_test_id("comparison-sizes")
    expect(note).to_contain_text("run A has 3 tokens and run B 4, so their weights (queries × keys of the first "
                                 "map) are 3×3 (3 tokens) and 4×4 (4 tokens)")
    expect(note).to_contain_text("cannot be diffed cell by cell")
    # Each run's own weights are still drawn, and no difference map or its button shows.
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('compare-a-source').data.row.length === 9 && "
                           "Bokeh.documents[0].get_model_by_name('compare-b-source').data.row.length === 16")
    expect(page.get_by_role("button", name="Save Difference A − B as PNG")).to_be_hidden()
    table = page.get_by_role("table", name="Comparison of row sums and future-token weight")
    expect(table.locator("tbody tr").first).to_contain_text("no row")
    download = save_png(page, "Save Weights of run B as PNG")
    assert download.suggested_filename.startswith("weights-run-B-correct-causal-T4-dk1-")
    png_size(download.path())

    # Two runs of the same size: the difference map and its PNG.
    page.get_by_label("Mask after softmax (broken)").check()
    save_run(page, "four broken")
    page.get_by_role("checkbox", name=re.compile(r"^Run 1 ")).uncheck()
    page.get_by_role("checkbox", name=re.compile(r"^Run 3 ")).check()
    expect(page.get_by_test_id("comparison-sizes")).to_have_count(0)
    download = save_png(page, "Save Difference A − B as PNG")
    assert download.suggested_filename.startswith(
        "weights-A-minus-B-correct-vs-mask-after-softmax-T4-dk1-")
    width, height, colours = png_size(download.path())
    assert (width, height) == tuple(figure_size(page, "compare-diff-figure"))
    assert colours > 8  # a blank canvas has one or two
    assert blocking_violations(page) == []


def test_the_instructor_table_links_each_run_to_the_workbench_opening_it(server, page, watch):
    run = ExperimentRecord.from_result(
        scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100]), label="linked <run>",
        prediction="p")
    with server.store() as store:
        store.save(run)
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(server.url + "instructor")
    link = page.get_by_role("link", name=f"Open run {run.id} “linked <run>” in the workbench")
    expect(link).to_be_visible(timeout=30_000)
    expect(link).to_have_text("Open run")
    expect(link).to_have_attribute("href", f"./?run={run.id}")
    wait_for_tables_drawn(page)  # a click during the table's first redraw is lost
    # Followed, it opens the learner page for that run in a new tab.
    with page.context.expect_page() as opened:
        link.click()
    learner = opened.value
    learner.wait_for_load_state()
    assert learner.url == f"{server.url}?run={run.id}"
    # The learner page shows that run: its label, its inputs, its weights.
    expect(learner.get_by_test_id("opened-run")).to_contain_text("Showing saved run “linked <run>”",
                                                                 timeout=30_000)
    expect(learner.get_by_label("Key 3", exact=True)).to_have_value("9")
    expect(learner.get_by_label("Value 3", exact=True)).to_have_value("100")
    expect(learner.get_by_role("table", name="Contributions to row 2").locator("tfoot")).to_contain_text(
        "17.311")
    learner.close()
