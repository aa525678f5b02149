"""The complete layer of Review, "The Complete Layer", on the learner page in a real Chromium
(issue 23): a padded batch of two whose items stay independent until *Batch items mixed*,
*Output projection transposed* with d_v = d_model (the right shape, the wrong orientation),
cross-attention with T_q = 2, T_k = 4 and both causal alignments' masks, and the W_O cells.
"""

from __future__ import annotations

import numpy as np
from playwright.sync_api import Page, expect
from workbench_server import (
    blocking_violations,
    open_learner_page,
    source,
    type_number,
    wait_for_weights,
    wait_until,
)

from app.learner.state import PRESETS
from attention_core import causal_mask
from attention_core.modes import FAILURE_MODES


def load(page: Page, preset: str) -> None:
    """Click a preset's button; the complete layer's are offered with the matrix inputs."""
    button = page.get_by_role("button", name=PRESETS[preset]["label"], exact=True)
    if not button.is_visible():
        page.get_by_label("Input mode").select_option(label="X and projections (W_Q, W_K, W_V)")
    button.click()


def choose(page: Page, name: str) -> None:
    title = FAILURE_MODES[name].title
    page.get_by_label("Failure mode").select_option(label=title)
    expect(page.get_by_label("Failure mode")).to_have_value(title)


def cells(page: Page, name: str, n: int) -> dict:
    """The source ``name`` once it holds ``n`` cells."""
    return wait_until(lambda: (d := source(page, name)) and len(d["row"]) == n and d,
                      f"{name} holds {n} cells", page=page)


def test_a_padded_batch_of_two_stays_independent_until_its_items_are_mixed(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    load(page, "batch_padded")
    expect(page.get_by_label("Batch size")).to_have_value("2")
    # Two sequences of different lengths: item 2's third token is padding.
    expect(page.get_by_label("Padding 3, item 2", exact=True)).to_be_checked()
    expect(page.get_by_label("Padding 3, item 1", exact=True)).not_to_be_checked()
    second = cells(page, "weights-item-2-source", 9)
    assert [second["hatch"][i] for i in range(9) if second["column"][i] == "3"] == ["/"] * 3
    expect(page.locator("[data-check='batch_independence']")).to_contain_text("pass")
    expect(page.get_by_test_id("first-incorrect")).to_contain_text("No check failed")
    expect(page.get_by_test_id("shapes")).to_contain_text("S: B×T×T = 2×3×3")
    assert blocking_violations(page) == []

    choose(page, "batch_items_mixed")
    wait_for_weights(page, 36)  # one map over the 2·3 tokens of the flattened batch
    independence = page.locator("[data-check='batch_independence']")
    expect(independence).to_contain_text("FAIL")
    expect(independence).to_contain_text("a sequence reads another sequence's tokens")
    expect(page.get_by_test_id("first-incorrect")).to_contain_text("the scores S")
    boundaries = source(page, "weights-boundaries")
    assert boundaries["x0"] == [3.0, 0.0] and boundaries["y0"] == [0.0, 3.0]
    # Item 2's first token reads item 1's tokens: weight across the boundary.
    flat = source(page, "weights-source")
    across = [(v, k) for r, c, v, k in zip(flat["row"], flat["column"], flat["value"], flat["kind"], strict=True)
              if int(r) == 4 and int(c) <= 3]
    # Forbidden cells that got weight: coloured by it and marked leaked, not hatched as masked.
    assert all(v is not None and k == "leaked" for v, k in across), across
    assert sum(float(t.split("\n")[0]) for r, c, t in zip(flat["row"], flat["column"], flat["text"], strict=True)
               if int(r) == 4 and int(c) <= 3) > 0


def test_output_projection_transposed_keeps_ys_shape_and_fails_the_orientation_check(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    choose(page, "output_projection_transposed")
    page.get_by_role("button", name=f"Load a preset that shows it: {PRESETS['output_projection']['label']}").click()
    expect(page.get_by_label("Failure mode")).to_have_value(FAILURE_MODES["output_projection_transposed"].title)
    expect(page.get_by_role("table", name="Y = H W_O (3 × 2): T×d_model")).to_be_visible()
    expect(page.get_by_test_id("shapes")).to_contain_text("Y = H W_O: B×T×d_model = 1×3×2")
    orientation = page.locator("[data-check='output_projection']")
    expect(orientation).to_contain_text("FAIL")
    expect(orientation).to_contain_text("right shape, 3×2")
    expect(page.locator(".check-fail")).to_have_count(1)
    expect(page.get_by_test_id("first-incorrect")).to_contain_text("the output Y = H W_O")


def test_causal_cross_attention_of_2_queries_and_4_keys_shows_both_alignments_masks(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    load(page, "cross_attention")
    expect(page.get_by_label("Cross-attention", exact=True)).to_be_checked()
    wait_for_weights(page, 8)  # T_q × T_k = 2 × 4
    expect(page.get_by_test_id("shapes")).to_contain_text("S: B×T_q×T_k = 1×2×4")
    hatches = {}
    for alignment in ("top_left", "bottom_right"):
        data = cells(page, f"mask-{alignment.replace('_', '-')}-source", 8)
        allowed = causal_mask(2, 4, alignment)
        expected = ["/" if not allowed[int(r) - 1, int(c) - 1] else " "
                    for r, c in zip(data["row"], data["column"], strict=True)]
        assert data["hatch"] == expected
        hatches[alignment] = data["hatch"]
    assert hatches["top_left"] != hatches["bottom_right"]
    expect(page.get_by_test_id("alignment-masks")).to_contain_text("differ in 4 cells")
    assert blocking_violations(page) == []
    title = "() => Bokeh.documents[0].get_model_by_name('mask-bottom-right-figure').title.text"
    assert page.evaluate(title) == "Causal mask, bottom-right"
    # The weights follow the chosen alignment: bottom-right lets query 1 read keys 1 to 3.
    page.get_by_label("Bottom-right", exact=True).check()
    page.wait_for_function(f"() => ({title[6:]}) === 'Causal mask, bottom-right (chosen)'")
    weights = source(page, "weights-source")
    row_1 = [v for r, v in zip(weights["row"], weights["value"], strict=True) if r == "1"]
    assert row_1[3] is None and all(v is not None for v in row_1[:3])
    np.testing.assert_allclose(sum(row_1[:3]), 1.0)


def test_w_o_cells_are_named_take_typing_and_refuse_bad_input_naming_the_cell(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_label("Input mode").select_option(label="X and projections (W_Q, W_K, W_V)")
    page.get_by_label("Output projection W_O", exact=True).check()
    expect(page.get_by_label("Use values (adds output and contributions)", exact=True)).to_be_checked()
    cell = page.get_by_label("W_O row 1, column 2", exact=True)
    expect(cell).to_be_visible()
    y = page.get_by_role("table", name="Y = H W_O (3 × 2): T×d_model")  # 3 tokens, d_model = 2
    expect(y).to_be_visible()
    before = y.inner_text()
    type_number(page, "W_O row 1, column 2", "5")
    expect(y).not_to_have_text(before)
    type_number(page, "W_O row 1, column 1", "x")
    alert = page.get_by_role("alert").filter(has_text="W_O row 1, column 1")
    expect(alert).to_be_visible()
    expect(page.get_by_label("W_O row 1, column 1", exact=True)).to_have_attribute("aria-invalid", "true")
    type_number(page, "W_O row 1, column 1", "0")
    expect(alert).to_have_count(0)


def test_the_embed_runs_a_batch_and_cross_attention(server, page, watch):
    page.set_viewport_size({"width": 640, "height": 610})  # the course page's frame
    # A prediction passed in, as the course page does: without one the embed hides the weights.
    page.goto(f"{server.url}embed?prediction=Each%20item%20reads%20only%20itself.")
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.locator(".bk-tab", has_text="Input mode and presets").click()
    load(page, "batch_padded")
    page.locator(".bk-tab", has_text="Workbench").click()
    cells(page, "weights-item-2-source", 9)
    brief = page.get_by_test_id("invariants")
    expect(brief.locator("[data-check='batch_independence']")).to_contain_text("pass")
    page.locator(".bk-tab", has_text="Input mode and presets").click()
    load(page, "cross_attention")
    page.locator(".bk-tab", has_text="Workbench").click()
    cells(page, "weights-source", 8)
    cells(page, "mask-bottom-right-source", 8)
    expect(brief.locator("[data-check~='batch_independence']")).to_contain_text("n/a")


def test_the_w_v_ablation_on_the_page_keeps_every_weight_moves_the_output_and_saves_as_a_run(server, page, watch):
    """Review, "What the Projection Ablations Establish", on the learner page: W_V scaled by 2."""
    open_learner_page(page, server.url, at_1280=True)
    ablation = page.get_by_test_id("ablation-weights")
    expect(page.get_by_text("so they need matrix mode")).to_be_visible()  # no panel in vector mode
    page.get_by_role("button", name=PRESETS["four_token_trace"]["label"], exact=True).click()
    page.get_by_label("Ablation target").select_option("W_V")
    page.get_by_label("Change").select_option(label="Scale by a factor")
    type_number(page, "Factor", "2")
    statement = page.locator("li[data-statement='ablation_w_v']")
    expect(statement).to_contain_text("holds")
    expect(ablation).to_contain_text("every weight is exactly the same before and after")
    before = source(page, "ablation-weights-before-source")["value"]
    assert len(before) == 16 and before == source(page, "ablation-weights-after-source")["value"]
    outputs = page.get_by_role("table", name="H before and after")  # no W_O here, so no Y
    expect(outputs.locator("tbody tr").nth(3)).to_contain_text("[0.592, −1.279][1.184, −2.557]")

    page.get_by_label("Prediction").fill("W_V moves the output, not the weights")
    before_count = len(server.records())
    page.get_by_role("button", name="Save ablation as a run").click()
    # Said beside the panel's button and in the record form's status.
    expect(page.get_by_role("status").filter(has_text="Saved run #1")).to_have_count(2)
    wait_until(lambda: len(server.records()) == before_count + 1, "the ablation run is stored", page=page)
    record = server.records()[-1]
    assert record["schema_version"] == 3
    assert (record["inputs"]["ablation"]["target"], record["inputs"]["ablation"]["change"],
            record["inputs"]["ablation"]["factor"]) == ("W_V", "scale", 2.0)
    assert [s["passed"] for s in record["results"]["ablation"]["statements"]] == [True]
    assert blocking_violations(page) == []
