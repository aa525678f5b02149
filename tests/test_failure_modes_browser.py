"""Every failure mode of Self-attention, "Common failure modes", on the learner page, in a real
Chromium (issue 13).

For each mode the learner chooses it with the ``Failure mode`` control on an input that exposes
it (the page's own preset where the default input cannot), and the checklist fails exactly the
checks the mode claims to break. Also: bidirectional attention is named and passes, "No mask"
leaks future weight, a padding tick that empties a row gives zeros and says what other libraries
do, and no NaN reaches the page or a record.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect
from workbench_server import open_learner_page, row_steps, save_run

from app.learner.checks import OTHER_LIBRARIES
from app.learner.state import EXPOSING_PRESETS, PRESETS
from attention_core.checks import CHECK_NAMES
from attention_core.modes import FAILURE_MODES, run_title

# All text on the page, shadow roots included (Bokeh and Panel draw inside them).
PAGE_TEXT_JS = """() => {
  const parts = [];
  const walk = node => {
    if (node.nodeType === Node.TEXT_NODE) { parts.push(node.textContent); return; }
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.childNodes) walk(child);
  };
  walk(document.body);
  const doc = window.Bokeh && Bokeh.documents[0];
  for (const name of ['scores-source', 'weights-source']) {
    const src = doc && doc.get_model_by_name(name);
    if (src) parts.push(...Array.from(src.data.text), ...Array.from(src.data.score_text),
                        ...Array.from(src.data.weight_text), ...Array.from(src.data.state));
  }
  return parts.join(' ');
}"""


def audit(page: Page):
    """The page's checklist of the audit steps (not the ablation panel's statements)."""
    return page.get_by_role("list", name="Checks in audit order")


def failed_checks(page: Page) -> set[str]:
    return {el.get_attribute("data-check") for el in audit(page).locator(".check-fail").all()}


def expect_failed(page: Page, names) -> None:
    """The checklist shows every check, failing exactly ``names`` (the ablation panel's statements
    are a checklist of their own, so the audit's is found by its name)."""
    expect(audit(page).locator("li")).to_have_count(len(CHECK_NAMES))
    for name in CHECK_NAMES:
        item = page.locator(f"[data-check='{name}']")
        if name in names:
            expect(item).to_contain_text("FAIL")
        else:
            expect(item).not_to_contain_text("FAIL")
    expect(audit(page).locator(".check-fail")).to_have_count(len(names))
    assert failed_checks(page) == set(names)


def choose(page: Page, title: str) -> None:
    page.get_by_label("Failure mode").select_option(label=title)
    expect(page.get_by_label("Failure mode")).to_have_value(title)


def save_and_read(page: Page, server, label: str) -> dict:
    save_run(page, label, prediction="a prediction")
    texts = server.texts()
    mine = [json.loads(t) for t in texts if json.loads(t)["label"] == label]
    assert len(mine) == 1
    assert "NaN" not in json.dumps(mine[0]) and "Infinity" not in json.dumps(mine[0])
    return mine[0]


def assert_no_nan_on_the_page(page: Page) -> None:
    text = page.evaluate(PAGE_TEXT_JS)
    # The note on other libraries names NaN as what scipy gives; nothing else may.
    text = re.sub(r"\s+", " ", text).replace(re.sub(r"\s+", " ", OTHER_LIBRARIES), "")
    assert not re.search(r"\bnan\b", text, re.IGNORECASE), text[:2000]


@pytest.mark.parametrize("name", [n for n in FAILURE_MODES if n != "correct"])
def test_each_failure_mode_chosen_on_an_input_that_exposes_it_fails_exactly_its_checks(
        server, default_learner_page, name):
    page, mode = default_learner_page, FAILURE_MODES[name]
    choose(page, mode.title)
    expect(page.get_by_test_id("mode-description")).to_have_text(mode.description)
    expect(page.get_by_test_id("mode-breaks")).to_be_visible()
    broken_box = page.get_by_label("Mask after softmax (broken)", exact=True)
    expect(broken_box).to_be_checked(checked=name == "mask_after_softmax")
    preset = EXPOSING_PRESETS.get(name)
    if preset is not None:
        expect(page.get_by_test_id("exposure-note")).to_be_visible()
        if name == "no_scaling":  # scalar queries and keys: dividing by sqrt(1) changes nothing
            expect(page.get_by_test_id("exposure-note")).to_contain_text("d_k = 1")
        expect_failed(page, set())
        page.get_by_role("button", name=f"Load a preset that shows it: {PRESETS[preset]['label']}").click()
        expect(page.get_by_test_id("exposure-note")).to_have_count(0)
        expect(page.get_by_label("Failure mode")).to_have_value(mode.title)
        expect_failed(page, mode.breaks)
    else:
        expect(page.get_by_test_id("exposure-note")).to_have_count(0)
        expect_failed(page, mode.breaks)
    if mode.breaks:
        expect(page.get_by_text(re.compile(r"^BROKEN MODE: "))).to_be_visible()
    expect(page.get_by_test_id("run-title")).to_have_text(run_title(name, True, 3))
    record = save_and_read(page, server, f"mode {name}")
    assert record["settings"]["failure_mode"] == name
    assert record["settings"]["mask_after_softmax"] is (name == "mask_after_softmax")
    assert set(record["results"]["failed_checks"]) == set(mode.breaks)
    assert_no_nan_on_the_page(page)


def test_the_broken_checkbox_and_the_failure_mode_control_agree_both_ways(server, page, watch):
    open_learner_page(page, server.url)
    box, select = page.get_by_label("Mask after softmax (broken)", exact=True), page.get_by_label("Failure mode")
    box.check()
    expect(select).to_have_value("Mask after softmax (broken)")
    box.uncheck()
    expect(select).to_have_value("Correct")
    choose(page, "Mask after softmax (broken)")
    expect(box).to_be_checked()
    choose(page, "No mask")
    expect(box).not_to_be_checked()
    box.check()
    expect(select).to_have_value("Mask after softmax (broken)")
    expect_failed(page, FAILURE_MODES["mask_after_softmax"].breaks)


def test_causal_mask_off_is_named_bidirectional_and_passes(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Causal mask", exact=True).uncheck()
    expect(page.get_by_test_id("bidirectional-note")).to_contain_text("bidirectional")
    expect(page.get_by_test_id("run-title")).to_have_text("Correct, bidirectional (no causal mask)")
    expect_failed(page, set())
    expect(page.get_by_text(re.compile(r"^BROKEN MODE"))).to_have_count(0)
    assert float(page.get_by_test_id("total-future-weight").text_content()) > 1.9
    record = save_and_read(page, server, "bidirectional")
    assert record["settings"] == {"causal": False, "mask_after_softmax": False, "failure_mode": "correct",
                                  "causal_alignment": None}
    assert record["results"]["failed_checks"] == []


def test_no_mask_is_a_decoder_that_forgot_its_causal_mask(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    choose(page, "No mask")
    expect(page.get_by_label("Causal mask", exact=True)).to_be_checked()  # it asked for the mask
    expect(page.get_by_text("BROKEN MODE: no mask.")).to_be_visible()
    expect_failed(page, {"mask", "forbidden_zeros"})
    expect(page.get_by_test_id("total-future-weight")).not_to_have_text("0")
    assert float(page.get_by_test_id("total-future-weight").text_content()) > 1.9
    expect(page.locator("table.readouts tbody tr").nth(1).locator("td").nth(1)).not_to_have_text("0")


def test_a_padding_tick_that_empties_a_row_gives_zero_weights_a_failed_check_and_the_libraries_note(
        server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    page.get_by_label("Padding 1").check()  # row 1 may read only key 1, now padding
    note = page.get_by_test_id("empty-row-note")
    expect(note).to_contain_text("Row 1: no visible key.")
    expect(note).to_contain_text("Row sums equal 1")
    for fact in ("PyTorch's scaled_dot_product_attention returns zeros",
                 "scipy.special.softmax and a plain −∞ softmax return NaN",
                 "jax.nn.dot_product_attention returns uniform weights over all keys",
                 "its output is the mean of every value"):
        expect(note).to_contain_text(fact)
    expect(page.locator("[data-check='row_sums']")).to_contain_text("FAIL")
    expect(page.locator("table.readouts tbody tr").first.locator("td").first).to_contain_text("0 ✗ not 1")
    weights = page.evaluate("""() => Array.from(Bokeh.documents[0].get_model_by_name('weights-source').data.text)""")
    assert weights[:3] == ["0\nmasked"] * 3
    assert_no_nan_on_the_page(page)
    record = save_and_read(page, server, "padding")
    assert record["inputs"]["padding_mask"] == [False, True, True]
    assert record["results"]["weights"][0] == [0.0, 0.0, 0.0]
    assert "row_sums" in record["results"]["failed_checks"]
    page.get_by_label("Padding 1").uncheck()
    expect(note).to_have_count(0)
    # "No mask" forgets only the causal mask: padding still masks key 1, and row 1 stays empty.
    page.get_by_label("Padding 1").check()
    expect(note).to_be_visible()
    choose(page, "No mask")
    expect(note).to_have_count(0)
    expect(page.get_by_label("Padding 1")).to_be_checked()
    expect(page.locator("table.readouts tbody tr").first.locator("td").first).to_contain_text("1.000")
    weights = page.evaluate("""() => Array.from(Bokeh.documents[0].get_model_by_name('weights-source').data.hatch)""")
    assert [weights[3 * r] for r in range(3)] == ["/"] * 3  # key 1 is masked in every row
    assert_no_nan_on_the_page(page)


def test_the_wide_head_preset_keeps_the_chosen_failure_mode_from_the_list_as_from_the_hint(server, page, watch):
    # README: "No sqrt(d_k) scaling (preset Wide head, d_k = 4: sharper rows)". The list's button
    # reset the mode to Correct, so the sharper rows never showed; the hint's button kept it.
    open_learner_page(page, server.url, at_1280=True)
    wide = PRESETS["wide_head"]["label"]
    mode = page.get_by_label("Failure mode")
    shown = []
    for button in (page.get_by_role("button", name=wide, exact=True),
                   page.get_by_role("button", name=f"Load a preset that shows it: {wide}")):
        page.get_by_role("button", name="Reset", exact=True).click()
        expect(page.get_by_label("Query 1", exact=True)).to_have_value("1")
        mode.select_option(label="No sqrt(d_k) scaling")
        expect(page.get_by_role("button", name=f"Load a preset that shows it: {wide}")).to_be_visible()
        button.click()
        expect(page.get_by_label("Head width d_k")).to_have_value("4")
        expect(mode).to_have_value("No sqrt(d_k) scaling")
        expect(page.locator("[data-check='score_scale']")).to_contain_text("FAIL")
        expect(row_steps(page)).to_contain_text("Correct, for comparison: scores divided by √d_k = √4 = 2.000")
        shown.append(row_steps(page).inner_text())
    assert shown[0] == shown[1]
    # In Correct it is the wide head computed correctly, scores divided by √4.
    mode.select_option(label="Correct")
    page.get_by_role("button", name=wide, exact=True).click()
    expect(mode).to_have_value("Correct")
    expect(page.locator(".check-fail")).to_have_count(0)
    expect(row_steps(page)).not_to_contain_text("Correct, for comparison")
