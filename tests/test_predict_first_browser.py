"""Predict first (issue 24), in a real browser: ``/?predict=first`` and ``/embed`` keep the
weights, the checks and the readouts back until a prediction is written, then show them and the
prediction beside row 2's outcome; Save run stores that prediction. On the shared server."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect
from workbench_server import blocking_violations, open_learner_page, screenshot, wait_until

# Whether a heat map's canvas is drawn with a size (a hidden map's view has none, or no view).
DRAWN_JS = """name => {
  const model = Bokeh.documents[0].get_model_by_name(name);
  const view = model && Bokeh.index.find_one(model);
  if (!view) return false;
  const r = view.canvas_view.el.getBoundingClientRect();
  return r.width > 0 && r.height > 0;
}"""

WEIGHT_HOVER_JS = "() => Bokeh.documents[0].get_model_by_name('scores-source').data.weight_text"
PREDICTION = "Token 2 cannot attend to token 3; after softmax the row no longer sums to 1."


def drawn(page, name: str) -> bool:
    return page.evaluate(DRAWN_JS, name)


def write_prediction(page, text: str) -> None:
    page.get_by_label("Prediction").fill(text)
    page.get_by_label("Prediction").press("Tab")  # its value is sent when the field is left


def test_predict_first_hides_the_weights_until_a_prediction_then_shows_it_beside_the_outcome_and_saves_it(
        server, page: Page, watch):
    open_learner_page(page, server.url + "?predict=first", at_1280=True)
    note = page.get_by_test_id("predict-first-note")
    expect(note).to_have_text("Write your prediction above to see the weights and checks.")
    # The prediction comes first in the main area, above the maps.
    prediction_box = page.get_by_label("Prediction").bounding_box()
    scores_top = page.evaluate("""() => Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(
        'scores-figure')).canvas_view.el.getBoundingClientRect().top""")
    assert prediction_box["y"] + prediction_box["height"] <= scores_top
    assert drawn(page, "scores-figure") and not drawn(page, "weights-figure")
    assert set(page.evaluate(WEIGHT_HOVER_JS)) == {"shown once you predict"}  # the Scores map's hover
    for hidden in (page.locator("table.readouts"), page.locator("ol.checklist"),
                   page.get_by_test_id("prediction-outcome")):
        expect(hidden).to_have_count(0)
    expect(page.locator("ol.row-steps")).not_to_contain_text("Weights of row 2")
    expect(page.get_by_text("The steps after the scores show once your prediction is written.")).to_be_visible()
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    expect(page.get_by_text("BROKEN MODE")).to_have_count(0)  # the banner would tell the answer
    screenshot(page, "predict-first-hidden-1280x720.png", full_page=False)
    assert blocking_violations(page) == []  # axe-core: nothing critical or serious
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_role("status")).to_contain_text("Not saved: write your prediction first")

    write_prediction(page, PREDICTION)
    expect(note).to_be_hidden()
    wait_until(lambda: drawn(page, "weights-figure"), "the Weights map shows", page=page)
    expect(page.locator("table.readouts")).to_be_visible()
    wait_until(lambda: page.evaluate(WEIGHT_HOVER_JS)[:3] == ["0.000335", "0", "0"],
               "the Scores map's hover gives the weights", page=page)
    expect(page.locator("ol.checklist").locator("[data-check='row_sums']")).to_contain_text("FAIL")
    expect(page.locator("ol.row-steps")).to_contain_text("Weights of row 2")
    outcome = page.get_by_test_id("prediction-outcome")
    expect(outcome).to_contain_text(f"You predicted: {PREDICTION}")
    expect(outcome).to_contain_text("Mask after softmax (broken)")
    expect(outcome).to_contain_text("row 2's weight on token 3: 0; row 2's future-token weight: 0")
    expect(outcome).to_contain_text("row sums: 0.000335 ✗ not 1, 0.00125 ✗ not 1, 1.000")
    page.get_by_label("Mask after softmax (broken)", exact=True).uncheck()
    expect(outcome).to_contain_text("row sums: 1.000, 1.000, 1.000")
    screenshot(page, "predict-first-revealed-1280x720.png", full_page=False)

    page.get_by_label("Label").fill("predict-first run")
    page.get_by_label("Label").press("Tab")
    page.get_by_role("button", name="Save run").click()
    status = page.get_by_role("status").filter(has_text="Saved run “predict-first run”")
    expect(status).to_be_visible()
    run_id = re.search(r"\(([^)]+)\)\.$", status.inner_text()).group(1)
    saved = {r["id"]: r for r in server.records()}[run_id]
    assert saved["prediction"] == PREDICTION and saved["settings"]["failure_mode"] == "correct"


def test_the_embed_waits_for_a_prediction_unless_the_course_page_passed_one_in(server, page: Page, watch):
    page.set_viewport_size({"width": 640, "height": 610})
    page.goto(server.url + "embed")
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                           "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")
    expect(page.get_by_test_id("predict-first-note")).to_have_text(
        "Write your prediction in the Prediction and saved runs tab to see the weights and checks.")
    assert drawn(page, "scores-figure") and not drawn(page, "weights-figure")
    expect(page.get_by_test_id("invariants")).to_have_count(0)
    screenshot(page, "embed-predict-first-hidden-640x610.png", full_page=False)
    page.locator(".bk-tab", has_text="Saved runs").click()
    write_prediction(page, PREDICTION)
    expect(page.get_by_test_id("prediction-outcome")).to_contain_text("row 2's future-token weight: 0")
    page.locator(".bk-tab", has_text="Workbench").click()
    expect(page.get_by_test_id("invariants").locator("[data-check='row_sums']")).to_contain_text("pass")
    wait_until(lambda: drawn(page, "weights-figure"), "the Weights map shows", page=page)
    expect(page.get_by_test_id("predict-first-note")).to_be_hidden()

    # A prediction passed in by the course page shows everything at once.
    page.goto(server.url + "embed?prediction=It%20cannot.")
    expect(page.get_by_test_id("invariants").locator("[data-check='row_sums']")).to_contain_text(
        "pass", timeout=30_000)
    wait_until(lambda: drawn(page, "weights-figure"), "the Weights map shows", page=page)
    expect(page.get_by_test_id("predict-first-note")).to_be_hidden()
