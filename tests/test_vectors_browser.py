"""Vectors, matrices and saved runs opened again, in a real Chromium (issue 14)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from workbench_server import (
    open_learner_page,
    row_of,
    save_run,
    screenshot,
    set_largest_vector_inputs,
    source,
    type_number,
    wait_for_row,
    wait_for_weights,
    watched_session,
)

from attention_core.records import ExperimentRecord

V1_RECORDS = Path(__file__).parent / "records_v1"

TRACE_ROW_4 = {"scores": [-0.707, 0.707, 0.0, 1.414], "weights": [0.065, 0.266, 0.131, 0.539],
               "output": [0.592, -1.279]}


def close_to(expected: list[float], tol: float = 5e-4):
    return lambda values: all(v is not None and abs(v - e) < tol for v, e in zip(values, expected, strict=True))


def save(page: Page, label: str, prediction: str = "a prediction") -> str:
    """Save the run under ``label``; return its id, from the page's own message."""
    status = save_run(page, label, prediction)
    return re.search(r"\(([A-Za-z0-9_-]+)\)", status.inner_text()).group(1)


def test_the_four_token_trace_preset_shows_the_chapters_numbers_and_its_saved_record_holds_them(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Four-token trace (seed 000)").click()
    weights = wait_for_row(page, "weights-source", 4, 4, close_to(TRACE_ROW_4["weights"]))
    scores = wait_for_row(page, "scores-source", 4, 4, close_to(TRACE_ROW_4["scores"]))
    assert np.round(weights, 3).tolist() == TRACE_ROW_4["weights"]
    assert np.round(scores, 3).tolist() == TRACE_ROW_4["scores"]
    # The cells read as the chapter prints them (0.065, not 0.0646).
    assert row_of(source(page, "weights-source"), 4, 4, key="text") == ["0.065", "0.266", "0.131", "0.539"]
    assert row_of(source(page, "scores-source"), 4, 4, key="text") == ["−0.707", "0.707", "0", "1.414"]
    # The inputs are the four-token trace's X and projections, each cell named by its place.
    expect(page.get_by_label("Input mode")).to_have_value("X and projections (W_Q, W_K, W_V)")
    expect(page.get_by_label("X token 4, component 1", exact=True)).to_have_value("-1")
    expect(page.get_by_label("W_V row 2, column 2", exact=True)).to_have_value("-1")
    expect(page.get_by_label("W_Q row 1, column 1", exact=True)).to_have_value("1")
    expect(page.get_by_label("Query 1", exact=True)).to_have_count(0)
    # Q = X W_Q etc. with their shapes, and the division by √2.
    expect(page.get_by_role("table", name="Q = X W_Q (4 × 2)")).to_be_visible()
    expect(page.get_by_role("table", name="V = X W_V (4 × 2)")).to_contain_text("−2.000")
    expect(page.get_by_test_id("score-scale")).to_contain_text("q·k / √2 = q·k / 1.414")
    # Row 4's steps end with h_4.
    type_number(page, "Row", "4")
    steps = page.get_by_role("list", name="Row steps of row 4")
    expect(steps).to_contain_text("Output of row 4: the sum: [0.592, −1.279]")
    expect(steps).to_contain_text("0.539 × [0, −2.000] = [0, −1.078]")  # v_4's contribution
    run_id = save(page, "four-token trace")
    record = {r["id"]: r for r in server.records()}[run_id]
    assert record["schema_version"] == 3 and record["inputs"]["projection"]["d_model"] == 2
    results = record["results"]
    assert np.round(results["scores"][3], 3).tolist() == TRACE_ROW_4["scores"]
    assert np.round(results["weights"][3], 3).tolist() == TRACE_ROW_4["weights"]
    assert np.round(results["output"][3], 3).tolist() == TRACE_ROW_4["output"]


def test_d_k_4_scores_are_q_dot_k_over_2_and_only_no_scaling_fails_the_check(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_label("Head width d_k").select_option("4")
    expect(page.get_by_label("Query 3, component 4", exact=True)).to_be_visible()
    # Each token's query and key typed in by hand, component by component.
    queries = [[1, 0, 1, 0], [1, 1, 1, 1], [2, 1, 0, 1]]
    keys = [[1, 1, 1, 1], [0.5, 0, 0.5, 1], [1, 0, 0, 2]]
    for i in range(3):
        for c in range(4):
            type_number(page, f"Query {i + 1}, component {c + 1}", str(queries[i][c]))
            type_number(page, f"Key {i + 1}, component {c + 1}", str(keys[i][c]))
    dots = np.array(queries, float) @ np.array(keys, float).T
    row3 = wait_for_row(page, "scores-source", 3, 3, close_to((dots[2] / 2).tolist(), 1e-9))
    assert row3 == (dots[2] / 2).tolist()
    scores = source(page, "scores-source")
    assert [row_of(scores, 2, 3)[c] for c in (0, 1)] == (dots[1, :2] / 2).tolist()
    expect(page.get_by_test_id("score-scale")).to_contain_text("q·k / √4 = q·k / 2")
    expect(page.locator(".check-fail")).to_have_count(0)
    scaled = row_of(source(page, "weights-source"), 3, 3)
    page.get_by_label("Failure mode").select_option(label="No sqrt(d_k) scaling")
    unscaled = wait_for_row(page, "scores-source", 3, 3, close_to(dots[2].tolist(), 1e-9))
    assert unscaled == dots[2].tolist()
    expect(page.get_by_test_id("score-scale")).to_contain_text("not divided by √d_k = √4 = 2")
    failed = page.locator(".check-fail")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("scale")
    expect(page.locator(".check-pass").first).to_be_visible()  # the correct checks beside it
    sharper = wait_for_row(page, "weights-source", 3, 3, lambda v: v != scaled)
    assert max(sharper) > max(scaled)  # the row's largest weight grows without √d_k
    page.get_by_label("Failure mode").select_option(label="Correct")
    wait_for_row(page, "scores-source", 3, 3, close_to((dots[2] / 2).tolist(), 1e-9))
    expect(page.locator(".check-fail")).to_have_count(0)


def page_settings(page: Page) -> dict:
    """What the page shows of a run: mode, sizes, toggles, texts and both heat maps."""
    out = {name: page.get_by_label(name, exact=True).input_value()
           for name in ("Input mode", "Head width d_k", "Failure mode", "Tokens", "Prediction", "Label")}
    out["cells"] = page.evaluate("""() => {
      const found = {};
      const visit = root => root.querySelectorAll('*').forEach(el => {
        if (el.shadowRoot) visit(el.shadowRoot);
        if (el.tagName === 'INPUT' && el.getAttribute('aria-label') && el.offsetParent !== null)
          found[el.getAttribute('aria-label')] = el.type === 'checkbox' ? el.checked : el.value;
      });
      visit(document);
      return found;
    }""")
    out["causal"] = page.get_by_label("Causal mask", exact=True).is_checked()
    out["scores"] = source(page, "scores-source")["value"]
    out["weights"] = source(page, "weights-source")["value"]
    return out


def test_a_saved_run_opens_by_its_link_and_from_saved_runs_exactly_as_saved(server, browser, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Four-token trace (seed 000)").click()
    expect(page.get_by_label("X token 4, component 1", exact=True)).to_have_value("-1")
    type_number(page, "W_V row 1, column 2", "0.5")
    page.get_by_label("Padding 2", exact=True).check()
    page.get_by_label("Failure mode").select_option(label="No sqrt(d_k) scaling")
    expect(page.get_by_test_id("score-scale")).to_contain_text("not divided")
    run_id = save(page, "to open again", prediction="row 4 reads token 4")
    saved = page_settings(page)
    assert saved["cells"]["W_V row 1, column 2"] == "0.5" and saved["cells"]["Padding 2"] is True
    # Change everything (Reset: another mode, sizes, inputs; values off), then open it from
    # Saved runs. The page must log no error on the way (the watch fixture checks).
    page.get_by_role("button", name="Reset").click()
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible()
    page.get_by_role("link", name="Open run 1 in the workbench").click()
    expect(page.get_by_test_id("opened-run")).to_contain_text("Showing saved run “to open again”")
    expect(page.get_by_test_id("opened-run")).to_contain_text("Editing it makes a new run")
    expect(page.get_by_label("W_V row 1, column 2", exact=True)).to_have_value("0.5")
    wait_for_weights(page, 16)
    assert page_settings(page) == saved
    expect(page.get_by_role("table", name="Saved runs").locator("tbody tr")).to_have_count(1)
    # The same run by its link, in another browser session.
    other_context, other, other_watch = watched_session(browser, server)
    open_learner_page(other, f"{server.url}?run={run_id}")
    expect(other.get_by_test_id("opened-run")).to_contain_text(run_id)
    expect(other.get_by_label("W_V row 1, column 2", exact=True)).to_have_value("0.5")
    wait_for_weights(other, 16)
    assert page_settings(other) == saved
    # Editing it says a save makes a new run, and saving does so.
    type_number(other, "X token 1, component 2", "2")
    expect(other.get_by_test_id("opened-run")).to_contain_text("Edited from saved run")
    new_id = save(other, "edited copy")
    assert new_id != run_id
    assert {r["id"]: r for r in server.records()}[run_id]["label"] == "to open again"
    other_watch.assert_clean()
    other_context.close()


def test_a_version_1_record_opens_by_its_link(server, page, watch):
    name = "v1-vector-padding.json"
    with server.store() as store:  # as an instructor's import brings a version-1 run in
        store.import_records([ExperimentRecord.from_json((V1_RECORDS / name).read_bytes())])
    record = json.loads((V1_RECORDS / name).read_text())
    assert record["schema_version"] == 1
    open_learner_page(page, f"{server.url}?run={record['id']}")
    expect(page.get_by_test_id("opened-run")).to_contain_text("Showing saved run")
    expect(page.get_by_label("Head width d_k")).to_have_value("2")
    expect(page.get_by_label("Value width d_v")).to_have_value("3")
    expect(page.get_by_label("Query 1, component 2", exact=True)).to_have_value("0.5")
    expect(page.get_by_label("Value 3, component 3", exact=True)).to_have_value("-2")
    expect(page.get_by_label("Padding 3", exact=True)).to_be_checked()
    expect(page.get_by_label("Failure mode")).to_have_value("No sqrt(d_k) scaling")
    expect(page.get_by_label("Label", exact=True)).to_have_value(record["label"])
    # The heat map draws a masked cell as not-a-number (None here); the record holds its 0.
    saved = record["results"]["weights"][3]
    masked = [not real for real in record["inputs"]["padding_mask"]]
    shown = [None if m else w for w, m in zip(saved, masked, strict=True)]
    assert wait_for_row(page, "weights-source", 4, 4, lambda v: v == shown) == shown


@pytest.mark.parametrize(("query", "words"), [
    ("?run=20250101T000000000000Z-00000000deadbeef", "no saved run has the id"),
    ("?run=..%2F..%2Fetc%2Fpasswd", "is not a run id"),
    ("?run=%3Cscript%3Ealert(1)%3C%2Fscript%3E", "is not a run id"),
])
def test_an_unknown_or_malformed_run_id_gets_a_clear_message(server, page, watch, query, words):
    open_learner_page(page, server.url + query)
    alert = page.get_by_role("alert").filter(has_text="Run not opened")
    expect(alert).to_contain_text(words)
    assert page.locator("script", has_text="alert(1)").count() == 0
    # The workbench still works as a fresh page.
    expect(page.get_by_label("Query 1", exact=True)).to_have_value("1")
    type_number(page, "Key 2", "3")
    wait_for_row(page, "scores-source", 2, 3, lambda v: v[1] == 3.0)


def test_the_grid_works_by_keyboard_alone(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_label("Head width d_k").select_option("2")
    first = page.get_by_label("Query 1, component 1", exact=True)
    expect(first).to_be_visible()
    first.focus()
    focused = "() => { let el = document.activeElement; while (el && el.shadowRoot && " \
              "el.shadowRoot.activeElement) el = el.shadowRoot.activeElement; " \
              "return el ? el.getAttribute('aria-label') : null; }"
    order = []
    for _ in range(5):
        order.append(page.evaluate(focused))
        page.keyboard.press("Tab")
    assert order == ["Query 1, component 1", "Query 1, component 2", "Key 1, component 1",
                     "Key 1, component 2", "Padding 1"]
    # Typed by keys alone: Shift+Tab back to Key 1, component 1, a new number, Enter.
    assert page.evaluate(focused) == "Query 2, component 1"  # the next token's row
    for _ in range(3):
        page.keyboard.press("Shift+Tab")
    assert page.evaluate(focused) == "Key 1, component 1"
    page.keyboard.press("Control+A")
    page.keyboard.type("3")
    page.keyboard.press("Enter")  # q_1 = [1, 0], k_1 = [3, 0]: score 3 / √2
    wait_for_row(page, "scores-source", 1, 1, lambda v: v[0] is not None and abs(v[0] - 3 / 2 ** 0.5) < 1e-9)
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate(focused) == "Padding 1"
    page.keyboard.press("Space")
    expect(page.get_by_label("Padding 1", exact=True)).to_be_checked()


def test_at_1280_by_720_the_largest_inputs_and_both_heat_maps_fit_the_width(server, page, watch):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_learner_page(page, server.url)
    set_largest_vector_inputs(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # no sideways scrolling
    widest = max(page.get_by_label(f"Key 1, component {c}", exact=True).bounding_box()["x"] for c in range(1, 5))
    padding = page.get_by_label("Padding 8", exact=True).bounding_box()
    weights = page.get_by_role("button", name=re.compile("Save Weights as PNG")).bounding_box()
    scores = page.get_by_role("button", name=re.compile("Save Scores as PNG")).bounding_box()
    assert widest < padding["x"] < scores["x"] < weights["x"]  # inputs left of both maps
    assert weights["x"] + weights["width"] <= 1280


# Whether a cell shows its whole text, and lies whole inside its grid's visible part and the
# sidebar (no sideways scrolling needed to read it).
SHOWN_WHOLE_JS = """el => {
  const wrap = el.closest('.grid-wrap'), r = el.getBoundingClientRect(), w = wrap.getBoundingClientRect()
  return el.scrollWidth <= el.clientWidth && wrap.scrollWidth <= wrap.clientWidth
    && w.left <= r.left && r.right <= w.right && r.right <= 408 }"""


def test_a_long_number_shows_whole_in_its_cell_at_the_largest_size(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    type_number(page, "Tokens", "8")
    page.get_by_label("Head width d_k").select_option("4")
    page.get_by_label("Use values (adds output and contributions)").check()
    page.get_by_label("Value width d_v").select_option("4")
    typed = {"Key 8, component 4": "9.999", "Value 8, component 4": "-0.00125"}
    for label, text in typed.items():
        type_number(page, label, text)
    page.get_by_label("Input mode").select_option(label="X and projections (W_Q, W_K, W_V)")
    page.get_by_label("Model width d_model").select_option("4")
    matrix = {"X token 8, component 4": "9.999", "W_Q row 1, column 1": "9.999",
              "W_K row 4, column 4": "-0.00125", "W_V row 2, column 4": "123456.75"}
    for label, text in matrix.items():
        type_number(page, label, text)
    for label, text in matrix.items():
        cell = page.get_by_label(label, exact=True)
        expect(cell).to_have_value(text)
        page.wait_for_function(SHOWN_WHOLE_JS, arg=cell.element_handle())
    page.get_by_label("Input mode").select_option(label="Numbers or vectors (Q, K, V)")
    for label, text in typed.items():
        cell = page.get_by_label(label, exact=True)
        expect(cell).to_have_value(text)
        page.wait_for_function(SHOWN_WHOLE_JS, arg=cell.element_handle())
    screenshot(page, "long-numbers-1280x720.png", full_page=False)
