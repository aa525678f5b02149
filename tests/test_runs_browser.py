"""Row steps, the explanation of saved runs and the Saved runs table in a real Chromium (issue 13)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import Page, expect
from workbench_server import (
    blocking_violations,
    open_learner_page,
    row_steps,
    save_run,
    saved_run_row,
    type_number,
    wait_until,
)

# Where the centre of a heat-map cell is on the page, from the figure's own scales.
CELL_JS = """([name, row, column]) => {
  const fig = Bokeh.documents[0].get_model_by_name(name);
  const view = Bokeh.index.find_one(fig);
  const box = view.canvas_view.el.getBoundingClientRect();
  return {x: box.left + view.frame.x_scale.compute(String(column)),
          y: box.top + view.frame.y_scale.compute(String(row))};
}"""


def in_order(*pieces: str) -> re.Pattern:
    """A pattern matching the pieces in this order, anything between them."""
    return re.compile(".*".join(re.escape(p) for p in pieces), re.DOTALL)


def click_cell(page: Page, figure: str, row: int, column: int) -> None:
    point = page.evaluate(CELL_JS, [figure, row, column])
    page.mouse.click(point["x"], point["y"])


def runs_table(page: Page):
    return page.get_by_role("table", name="Saved runs")


def cell(page: Page, run: int, column: str):
    """Run ``run``'s cell of ``column``, by the column's place in the table's head."""
    heads = runs_table(page).locator("thead th").all_text_contents()
    return saved_run_row(page, run).locator("td").nth(heads.index(column))


def tick(page: Page, run: int):
    """Run ``run``'s checkbox, named "Run n …"."""
    return page.get_by_role("checkbox", name=re.compile(rf"^Run {run}\b"))


def records_on_disk(server) -> dict[str, dict]:
    """Every stored run's record by id (what the store holds, read from another process)."""
    return {r["id"]: r for r in server.records()}


def test_row_steps_of_the_worked_row_and_of_the_broken_mode(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(page.get_by_role("heading", name="Row steps")).to_be_visible()
    expect(page.get_by_label("Row", exact=True)).to_have_value("2")
    # [1, 2, 9] → [1, 2, −∞] → [−1, 0, −∞] → … → [0.269, 0.731, 0] → 17.31
    expect(row_steps(page)).to_have_text(in_order(
        "[1.000, 2.000, 9.000]", "Masked", "[1.000, 2.000, −∞]",
        "Minus the largest visible score", "[−1.000, 0, −∞]", "Divided by the row sum",
        "[0.269, 0.731, 0]", "Output of row 2", "17.311"))
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    # Softmax of [1, 2, 9] first, then the zeroing: the visible prefix sums to 0.00125.
    expect(row_steps(page)).to_have_text(in_order(
        "Not masked before softmax", "[1.000, 2.000, 9.000]", "Divided by the row sum",
        "[0.000335, 0.000911, 0.999]", "zeroed after softmax, without renormalising",
        "[0.000335, 0.000911, 0]", "Visible prefix sum (no renormalisation)", "0.00125"))
    expect(page.get_by_label("Failure mode")).to_have_value("Mask after softmax (broken)")
    page.get_by_role("button", name="Large scores (~1000)").click()
    page.get_by_label("Failure mode").select_option(label="Naive softmax")
    expect(row_steps(page)).to_contain_text("exp: overflows to ∞ (inf)")
    page.get_by_label("Failure mode").select_option(label="Softmax over the wrong axis")
    expect(page.get_by_text("Softmax normalised column 2 instead of row 2")).to_be_visible()
    assert "nan" not in row_steps(page).text_content().lower()


def test_clicking_a_heat_map_row_shows_that_rows_steps(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(row_steps(page)).to_contain_text("Output of row 2")
    click_cell(page, "weights-figure", 3, 1)
    expect(page.get_by_text("Row 3: query 3 against keys 1–3.")).to_be_visible()
    expect(row_steps(page)).to_have_text(in_order("[1.000, 2.000, 9.000]", "[0.000335, 0.000911, 0.999]",
                                              "Output of row 3"))
    expect(page.get_by_label("Row", exact=True)).to_have_value("3")
    click_cell(page, "scores-figure", 1, 3)
    expect(page.get_by_text("Row 1: query 1 against keys 1–3.")).to_be_visible()
    expect(row_steps(page)).to_contain_text("[1.000, −∞, −∞]")
    # The Row control and the steps agree both ways. First the click's own "Row 1" in the field:
    # typed before it arrived, "2" was overwritten and never sent (a fresh clone's failure).
    expect(page.get_by_label("Row", exact=True)).to_have_value("1")
    type_number(page, "Row", "2")
    expect(page.get_by_text("Row 2: query 2 against keys 1–3.")).to_be_visible()


def test_editing_the_explanation_of_a_saved_run_changes_that_record_and_adds_none(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Prediction").fill("Token 2 cannot read token 3.")
    page.get_by_label("Learner").fill("Grace")
    save_run(page, "correct")
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    save_run(page, "broken")
    expect(runs_table(page).locator("tbody tr")).to_have_count(2)
    mine = {r["label"]: name for name, r in records_on_disk(server).items() if r["learner"] == "Grace"}
    before = records_on_disk(server)
    explanation = page.get_by_label("Explanation", exact=True)
    expect(explanation).to_have_attribute(
        "placeholder",
        "What invariant did your evidence reveal, and how did the broken mode violate it? (up to 2000 characters)")

    # Ticked run 1: only its record changes, and no record is added.
    box = tick(page, 1)
    box.click()
    expect(box).to_be_checked()
    explanation.fill("Masking first keeps every row summing to 1 <b>always</b>.")
    page.get_by_role("button", name="Save explanation").click()
    expect(page.get_by_role("status").filter(has_text="Explanation saved to run 1.")).to_be_visible()
    after = wait_until(lambda: (d := records_on_disk(server))[mine["correct"]]["explanation"] and d,
                     "run 1's record holds the explanation")
    assert set(after) == set(before)
    assert after[mine["correct"]]["explanation"] == "Masking first keeps every row summing to 1 <b>always</b>."
    changed = {k for k, v in after[mine["correct"]].items() if before[mine["correct"]][k] != v}
    assert changed == {"explanation"}
    assert after[mine["broken"]] == before[mine["broken"]]
    # The table says so, as text.
    expect(cell(page, 1, "explanation")).to_have_text(
        "Masking first keeps every row summing to 1 <b>always</b>.")
    expect(cell(page, 2, "explanation")).to_have_text("—")
    assert runs_table(page).locator("b").count() == 0

    # None ticked: the latest run gets it, and the page says so.
    box.click()
    expect(box).not_to_be_checked()
    explanation.fill("Zeroing after softmax leaves 0.00125 on the visible prefix.")
    page.get_by_role("button", name="Save explanation").click()
    expect(page.get_by_role("status").filter(has_text="Explanation saved to run 2, the latest run")).to_be_visible()
    wait_until(lambda: records_on_disk(server)[mine["broken"]]["explanation"],
             "run 2's record holds the explanation")
    assert set(records_on_disk(server)) == set(before)
    expect(cell(page, 2, "explanation")).to_contain_text("0.00125")
    expect(runs_table(page).locator("tbody tr")).to_have_count(2)

    # Downloads carry the explanations; two in a row have different names.
    names = []
    for _ in range(2):
        with page.expect_download() as download:
            page.get_by_role("button", name=re.compile(r"Download my runs \(JSON\)")).click()
        names.append(download.value.suggested_filename)
        bundle = json.loads(Path(download.value.path()).read_text())
    assert [r["explanation"] for r in bundle["runs"]][1].startswith("Zeroing after softmax")
    assert names[0] != names[1] and all(n.startswith("attention-runs-") for n in names)


def test_ticking_two_runs_compares_them_and_says_which(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Prediction").fill("p")
    save_run(page, "one")
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    save_run(page, "<b>two</b>")
    expect(page.get_by_text("Tick two saved runs to compare them side by side.")).to_be_visible()
    # Learner text is text, in the table and in the checkbox's name.
    expect(tick(page, 2)).to_have_accessible_name("Run 2 “<b>two</b>”: Mask after softmax (broken) · 3 tokens")
    expect(cell(page, 2, "label")).to_have_text("<b>two</b>")
    assert page.locator(".bk-input-group b").count() == 0 and runs_table(page).locator("b").count() == 0
    expect(saved_run_row(page, 2)).to_contain_text("Mask after softmax (broken)")
    for n in (1, 2):
        tick(page, n).check()
    expect(page.get_by_text("Comparing run 1 (A) with run 2 (B).")).to_be_visible()
    expect(page.get_by_role("table", name="Comparison of row sums and future-token weight")).to_contain_text(
        "0.00125")
    page.get_by_label("Explanation", exact=True).fill("The mask must come first.")
    page.get_by_role("button", name="Save explanation").click()
    expect(page.get_by_role("status").filter(has_text="Explanation saved to runs 1 and 2.")).to_be_visible()
    # axe-core over the whole page with runs, ticks, a comparison and both status messages.
    assert blocking_violations(page) == []


def test_saved_runs_labels_wrap_whole_and_a_long_learner_name_does_not_widen_the_page(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Prediction", exact=True).fill("row 2 reads key 2")
    page.get_by_label("Learner", exact=True).fill("L" * 100)  # one unbroken word
    save_run(page, "correct")
    save_run(page, "broken")
    for label in ("correct", "broken"):
        cell = runs_table(page).get_by_role("cell", name=label, exact=True)
        lines = cell.evaluate("td => { const r = document.createRange(); r.selectNodeContents(td); "
                              "return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }")
        assert lines == 1, f"{label!r} is broken over {lines} lines"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    watch.assert_clean()
