"""The learner page in a real Chromium, driven as a learner drives it (issues 3 and 13)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from workbench_server import (
    SCREENSHOTS,
    cell,
    open_learner_page,
    saved_run_row,
    saved_runs,
    screenshot,
    source,
    start_server,
    type_number,
    wait_for_cell,
    wait_for_weights,
    watched_session,
)

from attention_core.records import validate_record


def test_typing_queries_and_keys_updates_both_heat_maps_and_readouts(server, page, watch):
    open_learner_page(page, server.url)
    # Start from something else, then type the lesson's worked row in by hand.
    page.get_by_role("button", name="All equal").click()
    wait_for_cell(page, "weights-source", 2, 1, lambda v: v is not None and abs(v - 0.5) < 1e-9)
    for i, (q, k) in enumerate([("1", "1"), ("1", "2"), ("1", "9")], start=1):
        type_number(page, f"Query {i}", q)
        type_number(page, f"Key {i}", k)
    weights = wait_for_cell(page, "weights-source", 2, 2, lambda v: v is not None and abs(v - 0.731) < 5e-4)
    assert round(cell(weights, 2, 1), 3) == 0.269
    assert cell(weights, 2, 3) is None  # masked: drawn as a not-a-number cell
    assert cell(weights, 2, 3, "text") == "0\nmasked"
    assert cell(weights, 2, 3, "hatch") == "/"
    scores = wait_for_cell(page, "scores-source", 2, 2, lambda v: v == 2.0)
    assert cell(scores, 2, 1) == 1.0
    assert cell(scores, 2, 3, "text").startswith("−∞")  # softmax received -inf
    # The mirrored table a screen reader reads says the same.
    table = page.get_by_role("table", name="Weights table")
    expect(table).to_contain_text("0.269")
    expect(table).to_contain_text("0.731")
    # The worked row preset adds values: output of row 2 is 17.31.
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(page.locator("table.readouts")).to_contain_text("17.311")
    # Row 2: sum 1, future-token weight 0, output 17.311.
    expect(page.locator("table.readouts tbody tr").nth(1).locator("td")).to_have_text(["1.000", "0", "17.311"])
    expect(page.get_by_test_id("total-future-weight")).to_have_text("0")


# Counts the Bokeh protocol messages the page receives, by type, from the moment it is armed.
COUNT_MESSAGES_JS = """(() => {
  window.__received = null;
  const Original = window.WebSocket;
  window.WebSocket = function (...args) {
    const socket = new Original(...args);
    socket.addEventListener('message', e => {
      if (window.__received === null || typeof e.data !== 'string') return;
      const m = e.data.match(/"msgtype": ?"([A-Z-]+)"/);
      if (m) window.__received.push(m[1]);
    });
    return socket;
  };
  window.WebSocket.prototype = Original.prototype;
  Object.assign(window.WebSocket, Original);
})()"""


def test_an_edit_reaches_the_page_as_one_patch(server, page, watch):
    # Each message is applied and drawn by BokehJS before the next is read: an edit that came as
    # three patches (readouts, then each heat map) drew the page three times.
    page.add_init_script(COUNT_MESSAGES_JS)
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(page.locator("table.readouts")).to_contain_text("17.311")
    page.wait_for_timeout(500)  # whatever the preset sent has arrived
    for q in ("1.05", "0.5"):
        page.evaluate("() => { window.__received = []; }")
        type_number(page, "Query 3", q)
        wait_for_cell(page, "weights-source", 3, 3, lambda v, q=q: v is not None and abs(
            v - float(np.exp(9 * float(q)) / np.exp(np.array([1, 2, 9]) * float(q)).sum())) < 1e-9)
        page.wait_for_timeout(500)  # a second patch, if any, would have come by now
        received = page.evaluate("() => window.__received")
        assert received.count("PATCH-DOC") == 1, received


def test_mask_toggles_change_row_sums_and_future_weight_as_the_lesson_says(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(page.get_by_test_id("min-row-sum")).to_have_text("1.000")
    # Broken mode: future weight still 0, but row 2's visible prefix sums to about 0.00125.
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_visible()
    expect(page.get_by_test_id("total-future-weight")).to_have_text("0")
    expect(page.locator("table.readouts")).to_contain_text("0.00125")
    weights = wait_for_cell(page, "weights-source", 2, 2, lambda v: v is not None and v < 0.001)
    assert math.isclose(cell(weights, 2, 1) + cell(weights, 2, 2), 0.0012457907, rel_tol=1e-6)
    assert cell(weights, 2, 3, "text") == "0\nzeroed"
    assert cell(weights, 2, 3, "state") == "zeroed after softmax"
    expect(page.locator("[data-check='row_sums']")).to_contain_text("FAIL")
    expect(page.locator("[data-check='mask']")).to_contain_text("FAIL")
    # The score heat map shows what softmax received: the future score 9, not -inf.
    wait_for_cell(page, "scores-source", 2, 3, lambda v: v == 9.0)
    # Causal mask off: the broken toggle has nothing to act on, and future tokens get weight.
    page.get_by_label("Causal mask", exact=True).uncheck()
    expect(page.get_by_text("has nothing to act on")).to_be_visible()
    expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_hidden()
    weights = wait_for_cell(page, "weights-source", 2, 3, lambda v: v is not None and v > 0.99)
    expect(page.get_by_test_id("min-row-sum")).to_have_text("1.000")
    future = float(page.get_by_test_id("total-future-weight").text_content())
    assert future > 1.9  # rows 1 and 2 both put nearly all weight on token 3
    # Back to correct causal: every check passes.
    page.get_by_label("Causal mask", exact=True).check()
    page.get_by_label("Mask after softmax (broken)", exact=True).uncheck()
    expect(page.locator(".check-fail")).to_have_count(0)
    # The ten checks of the nine audit steps: W_O and a second batch item do not apply here.
    expect(page.locator(".check-pass")).to_have_count(8)
    expect(page.locator(".check-na")).to_have_count(2)


def save(page: Page, label: str) -> None:
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_text(re.compile(rf"Saved run “{re.escape(label)}”"))).to_be_visible()


def test_save_run_writes_the_record_the_page_showed_and_compares_two_runs(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    # Saving needs a prediction first: the lesson's checkpoint.
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_text("Not saved: write your prediction first")).to_be_visible()
    page.get_by_label("Prediction").fill("No: token 2 cannot read token 3; masking later breaks row sums.")
    page.get_by_label("Learner").fill("Ada")
    page.get_by_label("Label").fill("correct")
    page.get_by_label("Label").press("Tab")
    save(page, "correct")
    shown = wait_for_cell(page, "weights-source", 2, 2, lambda v: v is not None and abs(v - 0.731) < 5e-4)
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_visible()
    page.get_by_label("Label").fill("broken")
    page.get_by_label("Label").press("Tab")
    save(page, "broken")

    texts = server.texts()
    records = [json.loads(t) for t in texts]
    mine = {r["label"]: r for r in records if r["learner"] == "Ada"}
    assert set(mine) == {"correct", "broken"}
    for text in texts:
        assert "NaN" not in text and "Infinity" not in text
    for r in mine.values():
        validate_record(r)
    good, bad = mine["correct"], mine["broken"]
    assert good["inputs"]["queries"] == [1.0, 1.0, 1.0] and good["inputs"]["keys"] == [1.0, 2.0, 9.0]
    assert good["inputs"]["values"] == [10.0, 20.0, 100.0]
    assert good["settings"] == {"causal": True, "mask_after_softmax": False, "failure_mode": "correct",
                                "causal_alignment": None}
    assert bad["settings"]["mask_after_softmax"] is True
    assert bad["settings"]["failure_mode"] == "mask_after_softmax"
    assert good["prediction"].startswith("No: token 2")
    # The matrices equal what the page showed.
    for i in range(3):
        for j in range(3):
            page_value = cell(shown, i + 1, j + 1)
            expected = good["results"]["weights"][i][j]
            if page_value is None:
                assert expected == 0.0 and good["results"]["mask"][i][j] is False
            else:
                assert page_value == expected
    assert good["results"]["masked_scores"][1] == [1.0, 2.0, None]
    assert bad["results"]["min_row_sum"] < 0.002
    assert "row_sums" in bad["results"]["failed_checks"]

    # The saved-runs table lists both; ticking both shows the comparison.
    expect(saved_runs(page)).to_have_count(2)
    expect(saved_run_row(page, 1)).to_contain_text("Correct, causal")
    expect(saved_run_row(page, 2)).to_contain_text("Mask after softmax (broken)")
    expect(page.get_by_text("Tick two saved runs to compare them side by side.")).to_be_visible()
    for n in (1, 2):
        box = page.get_by_role("checkbox", name=re.compile(rf"^Run {n}\b"))
        box.click()
        expect(box).to_be_checked()
    expect(page.get_by_role("table", name="Comparison of row sums and future-token weight")).to_be_visible()
    expect(page.get_by_text("Comparing run 1 (A) with run 2 (B).")).to_be_visible()
    a = wait_for_cell(page, "compare-a-source", 2, 2, lambda v: v is not None and abs(v - 0.731) < 5e-4)
    b = wait_for_cell(page, "compare-b-source", 2, 2, lambda v: v is not None and v < 0.001)
    diff = wait_for_cell(page, "compare-diff-source", 2, 2, lambda v: v is not None and v > 0.7)
    assert round(cell(a, 2, 2), 3) == 0.731 and cell(b, 2, 2) < 0.001
    assert math.isclose(cell(diff, 2, 2), cell(a, 2, 2) - cell(b, 2, 2))
    page.get_by_role("heading", name="Comparison").evaluate("el => el.scrollIntoView({block: 'start'})")
    screenshot(page, "workbench-compare.png")

    # Downloads hold this learner's runs, fresh on every click.
    with page.expect_download() as first:
        page.get_by_role("button", name=re.compile("Download my runs \\(JSON\\)")).click()
    bundle = json.loads(Path(first.value.path()).read_text())
    assert [r["label"] for r in bundle["runs"]] == ["correct", "broken"]
    assert first.value.suggested_filename.startswith("attention-runs-")


def test_bad_input_shows_a_message_keeps_the_last_good_matrices_and_cannot_be_saved(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    before = wait_for_cell(page, "weights-source", 2, 2, lambda v: v is not None and abs(v - 0.731) < 5e-4)
    off = page.get_by_text("Save run is off until the highlighted inputs are fixed: Key 2: ")
    for text, message in [("abc", "'abc' is not a number"), ("nan", "not a finite number"),
                          ("1e400", "too large for float64"), ("", "empty"),
                          ("1,5", "decimal comma; type 1.5")]:
        type_number(page, "Key 2", text)
        expect(page.get_by_role("alert").filter(has_text="Key 2")).to_contain_text(message)
        expect(page.get_by_role("button", name="Save run")).to_be_disabled()
        # Under the greyed button, why: the refused field may be out of view.
        expect(off).to_be_visible()
        expect(off).to_contain_text(message)
        assert source(page, "weights-source") == before
    # Scores that overflow float64 are refused too, naming the query.
    type_number(page, "Key 2", "2")
    type_number(page, "Query 3", "1e300")
    type_number(page, "Key 3", "1e300")
    expect(page.get_by_role("alert").filter(has_text="overflows float64")).to_be_visible()
    type_number(page, "Query 3", "1")
    type_number(page, "Key 3", "9")
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_role("button", name="Save run")).to_be_enabled()
    expect(page.get_by_text("Save run is off")).to_be_hidden()


# Holds back every message from the server while window.__held is an array (a slow connection,
# made deterministic); window.__release() hands them to the page in order.
HOLD_INCOMING_JS = """(() => {
  window.__held = null;
  const Original = window.WebSocket;
  window.WebSocket = function (...args) {
    const socket = new Original(...args);
    let handler = null;
    Object.defineProperty(socket, 'onmessage', {get: () => handler, set: f => { handler = f; }});
    const deliver = e => handler && handler(e);
    socket.addEventListener('message', e => {
      if (window.__held !== null) window.__held.push(e); else deliver(e);
    });
    window.__release = () => {
      const held = window.__held || [];
      window.__held = null;
      held.forEach(deliver);
    };
    return socket;
  };
  window.WebSocket.prototype = Original.prototype;
  Object.assign(window.WebSocket, Original);
})()"""

# A held message that sets a grid's texts (the server's answer to a preset or a token count).
HELD_GRID_VALUE_JS = """() => (window.__held || []).some(
  e => typeof e.data === 'string' && /"attr": ?"value"/.test(e.data))"""


def test_typing_while_a_presets_numbers_are_on_their_way_keeps_what_was_typed(server, page, watch):
    page.add_init_script(HOLD_INCOMING_JS)
    open_learner_page(page, server.url)
    page.evaluate("() => { window.__held = []; }")
    page.get_by_role("button", name="All equal").click()
    type_number(page, "Key 2", "abc")  # sent after the click, before its answer is in the page
    page.wait_for_function(HELD_GRID_VALUE_JS)
    page.evaluate("() => window.__release()")
    expect(page.get_by_label("Key 3", exact=True)).to_have_value("2")  # the preset's (was 9)
    expect(page.get_by_label("Key 2", exact=True)).to_have_value("abc")
    expect(page.get_by_role("alert").filter(has_text="Key 2")).to_contain_text("'abc' is not a number")
    expect(page.get_by_role("button", name="Save run")).to_be_disabled()
    type_number(page, "Key 2", "2")
    expect(page.get_by_role("alert")).to_have_count(0)
    wait_for_cell(page, "weights-source", 2, 2, lambda v: v is not None and abs(v - 0.5) < 5e-4)


def test_a_cell_being_typed_in_keeps_focus_caret_and_text_when_the_grid_changes_around_it(
        server, page, watch):
    page.add_init_script(HOLD_INCOMING_JS)
    open_learner_page(page, server.url)
    query = page.get_by_label("Query 1", exact=True)
    query.evaluate("e => { e.dataset.marked = 'yes'; }")
    page.evaluate("() => { window.__held = []; }")
    tokens = page.get_by_label("Tokens", exact=True)
    tokens.fill("4")
    tokens.press("Enter")
    query.click()
    query.press("Control+A")
    page.keyboard.type("7")  # typed, not sent: the grid grows a row while the cell has focus
    page.wait_for_function(HELD_GRID_VALUE_JS)
    page.evaluate("() => window.__release()")
    expect(page.get_by_label("Key 4", exact=True)).to_be_visible()
    expect(query).to_be_focused()
    expect(query).to_have_value("7")
    assert query.evaluate("e => e.dataset.marked") == "yes"  # the same <input>, not a new one
    page.keyboard.type("5")  # the caret stayed at the end of what was typed
    expect(query).to_have_value("75")
    page.keyboard.press("Enter")
    wait_for_cell(page, "scores-source", 1, 1, lambda v: v == 75.0)  # query 1 · key 1 = 75 × 1


def test_token_count_keeps_what_was_typed(server, page, watch):
    open_learner_page(page, server.url)
    type_number(page, "Query 3", "4.5")
    type_number(page, "Tokens", "5")
    expect(page.get_by_label("Key 5", exact=True)).to_be_visible()
    wait_for_weights(page, 25)
    type_number(page, "Tokens", "2")
    expect(page.get_by_label("Query 3", exact=True)).to_be_hidden()
    type_number(page, "Tokens", "3")
    expect(page.get_by_label("Query 3", exact=True)).to_have_value("4.5")


def test_two_browser_contexts_do_not_share_inputs_or_runs(server, browser, page, watch):
    open_learner_page(page, server.url)
    other_context, other, other_watch = watched_session(browser, server)
    open_learner_page(other, server.url)
    type_number(page, "Key 1", "7")
    page.get_by_label("Prediction").fill("mine")
    page.get_by_label("Label").fill("first tab")
    page.get_by_label("Label").press("Tab")
    save(page, "first tab")
    expect(other.get_by_label("Key 1", exact=True)).to_have_value("1")
    expect(saved_runs(other)).to_have_count(0)
    expect(saved_runs(page)).to_have_count(1)
    other_watch.assert_clean()
    other_context.close()


FIGURE_BOX_JS = """name => {
  const view = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name(name));
  const r = view.canvas_view.el.getBoundingClientRect();
  return {x: r.left, y: r.top, width: r.width, height: r.height};
}"""


def in_view(page: Page, locator) -> None:
    """Assert ``locator`` (or a box) is drawn whole inside the 1280×720 viewport."""
    box = locator if isinstance(locator, dict) else locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["y"] >= 0, box
    assert box["x"] + box["width"] <= 1280 and box["y"] + box["height"] <= 720, box


@pytest.mark.parametrize("tokens", [3, 4])
def test_at_1280_by_720_the_inputs_and_both_heat_maps_show_side_by_side(server, page, watch, tokens):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_learner_page(page, server.url)
    type_number(page, "Tokens", str(tokens))
    wait_for_weights(page, tokens ** 2)
    for label in ("Tokens", "Failure mode", f"Query {tokens}", f"Key {tokens}", f"Padding {tokens}",
                  "Causal mask", "Mask after softmax (broken)"):
        in_view(page, page.get_by_label(label, exact=True))
    for name in ("Worked row (seed 003)", "Reset"):
        in_view(page, page.get_by_role("button", name=name))
    scores, weights = (page.evaluate(FIGURE_BOX_JS, name) for name in ("scores-figure", "weights-figure"))
    in_view(page, scores)
    in_view(page, weights)
    assert scores["x"] + scores["width"] <= weights["x"] + 1 and abs(scores["y"] - weights["y"]) < 2
    assert page.evaluate("() => document.scrollingElement.scrollTop") == 0
    screenshot(page, f"learner-1280x720-T{tokens}.png", full_page=False)


def test_screenshots_of_correct_and_broken_mode_and_of_eight_tokens(server, page, watch):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_learner_page(page, server.url)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(page.locator("table.readouts")).to_contain_text("17.311")
    screenshot(page, "workbench-correct.png")
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_visible()
    screenshot(page, "workbench-broken.png")
    assert (SCREENSHOTS / "workbench-broken.png").stat().st_size > 10_000
    type_number(page, "Tokens", "8")
    data = None
    wait_for_weights(page, 64)
    for name in ("weights-source", "scores-source"):
        data = source(page, name)
        assert all(len(text) <= 6 for text in data["text"]), data["text"]
    screenshot(page, "learner-8-tokens.png", full_page=False)


def test_hostile_text_is_shown_literally_and_never_runs(server, page, watch):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_learner_page(page, server.url)
    hostile = "<img src=x onerror=alert(1)>"
    page.get_by_label("Prediction").fill("[click](javascript:alert(2)) **bold** <script>alert(3)</script>")
    page.get_by_label("Learner").fill(hostile)
    page.get_by_label("Label").fill("<b>x</b> **y**")
    page.get_by_label("Label").press("Tab")
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"Saved run “<b>x</b> \*\*y\*\*”"))
    row = saved_runs(page).first
    expect(row).to_contain_text(hostile)
    expect(row).to_contain_text("<b>x</b> **y**")
    assert saved_runs(page).locator("img").count() == 0
    assert saved_runs(page).locator("b").count() == 0
    assert dialogs == []


def test_the_workbench_works_by_keyboard_alone(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_label("Query 1", exact=True).focus()

    def tab_to(name: str, limit: int = 60) -> None:
        for _ in range(limit):
            page.keyboard.press("Tab")
            focused = page.evaluate("""() => { let el = document.activeElement;
                while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
                if (!el) return '';
                const label = el.closest('label');
                const labelled = el.id && el.getRootNode().querySelector(`label[for="${el.id}"]`);
            return el.getAttribute('aria-label') || (label && label.textContent) ||
                   (labelled && labelled.textContent) || el.textContent || ''; }""")
            if name in focused:
                return
        raise AssertionError(f"Tab never reached {name!r}")

    tab_to("Padding 1")
    page.keyboard.press("Space")
    expect(page.get_by_test_id("empty-row-note")).to_be_visible()
    page.keyboard.press("Space")
    expect(page.get_by_test_id("empty-row-note")).to_be_hidden()
    tab_to("Mask after softmax (broken)")
    page.keyboard.press("Space")
    expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_visible()
    expect(page.get_by_label("Failure mode")).to_have_value("Mask after softmax (broken)")
    tab_to("Worked row (seed 003)")
    page.keyboard.press("Enter")
    expect(page.locator("table.readouts")).to_contain_text("17.311")  # the preset sets the mode too
    expect(page.get_by_label("Mask after softmax (broken)", exact=True)).not_to_be_checked()
    # The failure mode is chosen by keyboard too: focus the select and step through its options.
    page.get_by_label("Tokens").focus()
    tab_to("Failure mode")
    expect(page.get_by_label("Failure mode")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_label("Failure mode")).to_have_value("Mask after softmax (broken)")
    expect(page.get_by_label("Mask after softmax (broken)", exact=True)).to_be_checked()
    expect(page.locator("table.readouts")).to_contain_text("0.00125")


def test_values_presets_reset_explanation_and_csv_download(server, page, watch):
    open_learner_page(page, server.url)
    # Values: off at first; ticking shows Value i fields and an output column.
    expect(page.get_by_label("Value 1", exact=True)).to_be_hidden()
    page.get_by_label("Use values (adds output and contributions)", exact=True).check()
    expect(page.get_by_label("Value 1", exact=True)).to_be_visible()
    expect(page.locator("table.readouts thead")).to_contain_text("output")
    type_number(page, "Value 2", "40")  # worked row keys with values 10, 40, 100
    expect(page.locator("table.readouts tbody tr").nth(1).locator("td").nth(2)).to_have_text("31.932")
    page.get_by_label("Use values (adds output and contributions)", exact=True).uncheck()
    expect(page.locator("table.readouts thead")).not_to_contain_text("output")
    # Large scores (~1000): stable softmax keeps every weight finite and every row summing to 1.
    page.get_by_role("button", name="Large scores (~1000)").click()
    scores = wait_for_cell(page, "scores-source", 3, 2, lambda v: v is not None and v > 1000)
    assert cell(scores, 3, 2) == pytest.approx(1001.0)
    expect(page.get_by_test_id("min-row-sum")).to_have_text("1.000")
    expect(page.locator(".check-fail")).to_have_count(0)
    # Reset: back to the starting inputs and toggles.
    page.get_by_label("Causal mask", exact=True).uncheck()
    page.get_by_label("Padding 2").check()
    page.get_by_label("Failure mode").select_option(label="No mask")
    page.get_by_role("button", name="Reset").click()
    expect(page.get_by_label("Causal mask", exact=True)).to_be_checked()
    expect(page.get_by_label("Padding 2")).not_to_be_checked()
    expect(page.get_by_label("Failure mode")).to_have_value("Correct")
    expect(page.get_by_label("Key 3", exact=True)).to_have_value("9")
    wait_for_cell(page, "weights-source", 2, 1, lambda v: v is not None and round(v, 3) == 0.269)
    # The explanation is attached to the saved run it explains; the CSV download lists it.
    page.get_by_label("Prediction").fill("row 2 keeps 0.269 and 0.731")
    page.get_by_label("Label").fill("with explanation")
    page.get_by_label("Label").press("Tab")
    save(page, "with explanation")
    page.get_by_label("Explanation", exact=True).fill("Rows sum to 1 only when the mask comes first.")
    page.get_by_label("Explanation", exact=True).press("Tab")
    page.get_by_role("button", name="Save explanation").click()
    expect(page.get_by_text(re.compile("Explanation saved to run 1"))).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("button", name=re.compile("Download my runs \\(CSV\\)")).click()
    text = Path(download.value.path()).read_text()
    assert download.value.suggested_filename.endswith(".csv")
    assert "with explanation" in text and "Rows sum to 1 only when the mask comes first." in text
    saved = server.records()
    mine = [r for r in saved if r["label"] == "with explanation"]
    assert len(mine) == 1 and mine[0]["explanation"] == "Rows sum to 1 only when the mask comes first."


def test_a_token_count_outside_1_to_8_gets_a_message_changes_nothing_and_blocks_saving(server, page, watch):
    open_learner_page(page, server.url)
    for text in ["9", "0", "-1"]:
        type_number(page, "Tokens", text)
        message = page.get_by_role("alert").filter(has_text="Tokens:")
        expect(message).to_contain_text("choose a whole number from 1 to 8")
        expect(page.get_by_label("Query 3", exact=True)).to_be_visible()
        expect(page.get_by_label("Query 4", exact=True)).to_be_hidden()
        # The field shows a count the page is not using, so a save now would not be what it shows.
        expect(page.get_by_role("button", name="Save run")).to_be_disabled()
        expect(page.get_by_text("Save run is off until the highlighted inputs are fixed: Tokens: "
                                f"{text} is not a token count; choose a whole number from 1 to 8. "
                                "Still showing 3 tokens.", exact=True)).to_be_visible()
    type_number(page, "Tokens", "4")
    expect(page.get_by_label("Query 4", exact=True)).to_be_visible()
    expect(page.get_by_role("alert").filter(has_text="Tokens:")).to_have_count(0)
    expect(page.get_by_role("button", name="Save run")).to_be_enabled()


def test_a_reload_keeps_this_pages_saved_runs(server, page, watch):
    open_learner_page(page, server.url)
    page.get_by_label("Prediction").fill("p")
    page.get_by_label("Label").fill("before reload")
    page.get_by_label("Label").press("Tab")
    save(page, "before reload")
    expect(page).to_have_url(re.compile(r"[?&]runs=[A-Za-z0-9_-]+"))
    page.reload()
    expect(saved_runs(page)).to_have_count(1)
    expect(saved_runs(page).first).to_contain_text("before reload")
    # Anything else in the URL is only looked up as a run id, never as a path; the page's own
    # run is listed from its key all the same.
    page.goto(server.url + "?runs=..%2F..%2Fetc%2Fpasswd,nope")
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible()
    expect(page.get_by_role("status").filter(
        has_text="2 of the 2 run ids in this page's address (?runs=) are not listed below: "
                 "'../../etc/passwd' is not a run id (a run id is up to 64 letters, digits, '-' and '_'); "
                 "'nope' was not found in the store.")).to_be_visible()
    expect(saved_runs(page)).to_have_count(1)
    expect(saved_runs(page).first).to_contain_text("before reload")


def test_a_dead_server_is_announced_instead_of_saving_silently(tmp_path, page):
    own = start_server(tmp_path / "runs", tmp_path / "server.log")
    try:
        open_learner_page(page, own.url)
        page.get_by_label("Prediction").fill("p")
        page.get_by_label("Prediction").press("Tab")
        page.get_by_role("button", name="Save run").click()
        saved = page.get_by_role("status").filter(has_text="Saved run #1")
        expect(saved).to_have_class(re.compile(r"\bok\b"))
        own.process.kill()
        own.process.wait(timeout=30)
        # The toast's message; notyf also copies it, for a moment, into a screen readers' live region.
        notice = page.locator(".notyf__message").filter(has_text="Connection to the workbench server lost")
        expect(notice).to_be_visible()
        # The green "Saved run #1" no longer sits beside Save run as if the next click saved too.
        expect(saved).to_contain_text("nothing you do now is saved. If you pressed Save run as it was lost, reload")
        expect(saved).not_to_have_class(re.compile(r"\bok\b"))
    finally:
        own.stop()


def test_a_field_message_keeps_each_tokens_query_and_key_side_by_side(server, page, watch):
    open_learner_page(page, server.url)
    type_number(page, "Query 2", "1,5")
    expect(page.get_by_role("alert").filter(has_text="Query 2:")).to_be_visible()
    # The message sits under token 2's row; token 3's query and key stay on one line below it.
    message = page.get_by_role("alert").filter(has_text="Query 2:").bounding_box()
    query3 = page.get_by_label("Query 3", exact=True).bounding_box()
    key3 = page.get_by_label("Key 3", exact=True).bounding_box()
    key2 = page.get_by_label("Key 2", exact=True).bounding_box()
    assert abs(query3["y"] - key3["y"]) < 2, (query3, key3)
    assert key2["y"] < message["y"] < query3["y"]
    watch.assert_clean()


def overlaps(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def test_the_lost_connection_notice_sits_in_the_header_bar_and_hides_no_saved_run(tmp_path, page):
    # In Panel's corner (bottom right, 300 × 180 px) it covered the Saved runs' Open links.
    own = start_server(tmp_path / "runs", tmp_path / "server.log")
    try:
        open_learner_page(page, own.url, at_1280=True)
        page.get_by_label("Prediction").fill("p")
        page.get_by_label("Prediction").press("Tab")
        for n in range(1, 5):
            type_number(page, "Query 1", str(n))
            page.get_by_role("button", name="Save run").click()
            expect(page.get_by_role("status").filter(has_text=f"Saved run #{n}")).to_be_visible()
        opens = page.get_by_role("link", name=re.compile(r"^Open run \d in the workbench$"))
        expect(opens).to_have_count(4)
        own.process.kill()
        own.process.wait(timeout=30)
        notice = page.locator(".notyf__toast").filter(has_text="Connection to the workbench server lost")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("your saved runs are kept")
        # Save run goes grey (a click would do nothing), saying why on hover.
        save_button = page.get_by_role("button", name="Save run")
        expect(save_button).to_be_disabled()
        expect(save_button).to_have_attribute("title", re.compile("Not connected to the workbench server"))
        # At the top of the page it lies inside the header bar, which holds no control.
        page.evaluate("window.scrollTo(0, 0)")
        notice.evaluate("el => Promise.all(el.getAnimations({subtree: true}).map((a) => a.finished))")
        # The bar is the header pane's host (Panel draws the pane's HTML in its shadow root).
        header = page.locator("header").evaluate(
            "el => { const r = el.getRootNode().host.getBoundingClientRect(); "
            "return {x: r.x, y: r.y, width: r.width, height: r.height} }")
        expect(notice).to_be_in_viewport(ratio=1)
        box = notice.bounding_box()
        assert header["y"] <= box["y"] and box["y"] + box["height"] <= header["y"] + header["height"], (box, header)
        screenshot(page, "lost-connection-1280x720.png", full_page=False)
        # Read down to the Saved runs: every Open link and tick box in view is clear of it.
        page.get_by_role("table", name="Saved runs").evaluate("el => el.scrollIntoView({block: 'end'})")
        box = notice.bounding_box()
        controls = [opens.nth(i) for i in range(4)] + [
            page.get_by_label(re.compile(rf"^Run {i}\b")) for i in range(1, 5)]
        for control in controls:
            assert not overlaps(control.bounding_box(), box), control
        screenshot(page, "lost-connection-saved-runs-1280x720.png", full_page=False)
        # In a 640 px window it takes the window's width (at 220 px it was seven lines over the
        # page), and its × closes it.
        page.set_viewport_size({"width": 640, "height": 720})
        box = notice.bounding_box()
        assert box["width"] >= 560 and box["height"] <= 100, box
        notice.locator(".notyf__dismiss-btn").click()
        expect(notice).to_have_count(0)
    finally:
        own.stop()
