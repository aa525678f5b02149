"""axe-core on the learner page: no critical or serious violation in any failure mode (issue 13).

axe-core comes inside the ``axe-playwright-python`` package (no download at test time) and is
injected into the served page; it reads open shadow roots, where Bokeh and Panel draw.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from workbench_server import blocking_violations, open_learner_page, type_number, wait_for_weights

from app.learner.state import EXPOSING_PRESETS, PRESETS
from attention_core.modes import FAILURE_MODES


@pytest.mark.parametrize("name", list(FAILURE_MODES))
def test_no_critical_or_serious_violation_in_each_failure_mode(default_learner_page, name):
    page = default_learner_page
    mode = FAILURE_MODES[name]
    page.get_by_label("Failure mode").select_option(label=mode.title)
    expect(page.get_by_test_id("mode-description")).to_have_text(mode.description)
    assert blocking_violations(page) == []
    if name in EXPOSING_PRESETS:  # and once the input shows the failure (banner, failed checks)
        preset = PRESETS[EXPOSING_PRESETS[name]]["label"]
        page.get_by_role("button", name=f"Load a preset that shows it: {preset}").click()
        expect(page.get_by_test_id("exposure-note")).to_have_count(0)
        assert blocking_violations(page) == []


def test_no_critical_or_serious_violation_with_messages_padding_eight_tokens_and_a_saved_run(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Use values (adds output and contributions)", exact=True).check()
    page.get_by_label("Padding 1").check()
    expect(page.get_by_test_id("empty-row-note")).to_be_visible()
    type_number(page, "Key 2", "abc")
    expect(page.get_by_role("alert").filter(has_text="Key 2")).to_be_visible()
    type_number(page, "Tokens", "9")
    expect(page.get_by_role("alert").filter(has_text="Tokens:")).to_be_visible()
    assert blocking_violations(page) == []
    type_number(page, "Key 2", "2")
    type_number(page, "Tokens", "8")
    wait_for_weights(page, 64)
    page.get_by_label("Prediction").fill("p")
    page.get_by_label("Prediction").press("Tab")
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_role("status").filter(has_text="Saved run")).to_be_visible()
    expect(page.get_by_role("table", name="Saved runs").locator("tbody tr")).to_have_count(1)
    assert blocking_violations(page) == []


def test_no_critical_or_serious_violation_in_vector_and_matrix_mode_with_cell_messages(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    # The largest page: 8 tokens, d_k = d_v = 4 with values, a refused component.
    page.get_by_label("Use values (adds output and contributions)", exact=True).check()
    type_number(page, "Tokens", "8")
    page.get_by_label("Head width d_k").select_option("4")
    page.get_by_label("Value width d_v").select_option("4")
    cell = page.get_by_label("Value 8, component 4", exact=True)
    cell.fill("1,5")
    cell.press("Enter")
    expect(page.get_by_role("alert").filter(has_text="Value 8, component 4:")).to_be_visible()
    expect(cell).to_have_attribute("aria-invalid", "true")
    assert blocking_violations(page) == []
    # Matrix mode: the four-token trace, its projections shown, a refused weight.
    page.get_by_role("button", name="Four-token trace (seed 000)").click()
    expect(page.get_by_role("table", name="Q = X W_Q (4 × 2)")).to_be_visible()
    type_number(page, "W_K row 2, column 1", "x")
    expect(page.get_by_role("alert").filter(has_text="W_K row 2, column 1:")).to_be_visible()
    assert blocking_violations(page) == []


@pytest.mark.parametrize("tokens", [3, 8])
def test_the_hidden_screen_reader_tables_do_not_widen_the_page(server, page, watch, tokens):
    open_learner_page(page, server.url, at_1280=True)
    type_number(page, "Tokens", str(tokens))
    wait_for_weights(page, tokens * tokens)
    # The tables are still read: they are in the accessibility tree with every cell.
    expect(page.get_by_role("table", name="Weights table").locator("tbody tr")).to_have_count(tokens)
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= 1280, f"the page is {width} px wide at 1280 px: it scrolls sideways"
