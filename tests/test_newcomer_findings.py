"""What a newcomer trying to break the learner page found (issue 13's last closing note), each
fixed where it is decided: in the state, the readouts or the row steps. Browser-only findings
(the hidden table's width, focus, a dead server, Save explanation) are in test_runs_browser.py
and test_workbench_browser.py."""

from __future__ import annotations

import re
from html import unescape

import pytest
from store_helpers import sqlite_store

from app.learner.checks import readouts_html, row_sum_html
from app.learner.page import LearnerPage
from app.learner.steps import steps_html
from attention_core import scaled_dot_product_attention


@pytest.fixture
def page(tmp_path):
    return LearnerPage(store=sqlite_store(tmp_path / "runs"))


def text_of(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


@pytest.mark.parametrize("typed", [0, 9, 4, None])
def test_a_row_outside_the_input_is_refused_in_words_and_the_shown_row_stays(page, typed):
    state = page.state  # 3 tokens, row 2
    page.row.value = typed
    assert state.row == 2
    shown = "an empty field" if typed is None else repr(typed)
    assert state.row_error == (f"Row: {shown} is not a row of this input; choose a row from 1 to 3. "
                               "Still showing row 2.")
    assert page.row_message.visible and state.row_error in page.row_message.object
    page.row.value = 3  # a good row clears the message
    assert state.row == 3 and state.row_error == "" and not page.row_message.visible


def test_a_clicked_row_after_a_refused_one_clears_the_message_and_the_field(page):
    page.row.value = 9
    page.matrices.weights.source.selected.indices = [0]  # a tap on row 1
    assert page.state.row == 1 and page.state.row_error == "" and page.row.value == 1


@pytest.mark.parametrize(("x", "shown"), [
    (1.0, "1.000"), (1 - 1e-12, "1.000"), (0.9999, "0.9999 ✗ not 1"),
    (0.99999999, "0.99999999 ✗ not 1"), (1.0004, "1.0004 ✗ not 1"), (0.269, "0.269 ✗ not 1"),
    (float("nan"), "undefined ✗ not 1"),
])
def test_a_row_sum_off_1_is_shown_with_the_digits_that_show_it_and_the_checks_tolerance(x, shown):
    assert row_sum_html(x) == shown


def test_naive_softmax_readouts_say_undefined_and_qualify_the_future_weight(page):
    page.state.apply_preset("large_scores", failure_mode="naive_softmax")
    text = text_of(readouts_html(page.state.result, True))
    assert "not finite" not in text.replace("weights are not finite numbers", "")
    assert "undefined ✗ not 1" in text
    assert "Total future-token weight: 0 (the future cells only: the other weights are undefined)" in text
    cells = page.matrices.weights.source.data["text"]
    assert "undefined" in cells and "not finite" not in cells


def test_the_same_run_id_twice_in_the_url_is_listed_once(page):
    state = page.state
    state.prediction = "p"
    first = state.save_run()
    state.set_token_text("queries", 2, "2")
    second = state.save_run()
    state.restore_runs([first.id, second.id, first.id, second.id])
    assert [r.id for r in state.saved] == [first.id, second.id]


def test_row_steps_write_negatives_with_the_minus_sign_of_minus_infinity(page):
    page.state.apply_preset("worked_row")
    text = text_of(steps_html(page.state.result, 2))
    assert "[−1.000, 0, −∞]" in text and "-" not in re.sub(r"[A-Za-z]-[A-Za-z]|d_k|q_|k_|–", "", text)


def test_one_forbidden_cell_is_one_cell():
    r = scaled_dot_product_attention([1, 1], [1, 2])
    mask = next(c for c in r.checks if c.name == "mask")
    assert mask.message == "The 1 forbidden cell was -inf before softmax."


def test_the_empty_row_note_comes_right_after_the_table_its_row_points_to(page):
    page.state.set_padding(0, True)
    html = readouts_html(page.state.result, True)
    assert "(no visible key: see the note under this table)" in html
    assert html.index("</table>") < html.index("empty-row-note") < html.index("Total future-token weight")


def test_save_explanation_says_where_it_writes_before_and_what_it_replaced_after(page):
    state, runs = page.state, page.runs
    state.prediction = "p"
    state.save_run()
    state.set_token_text("queries", 2, "2")
    state.save_run()
    assert "Save explanation writes to run 2, the latest run (no run is ticked" in runs.target.object
    runs.ticks.value = [0]
    runs.explanation.value = "first words"
    runs.attach()
    assert runs.explanation_message == "Explanation saved to run 1."
    runs.ticks.value = [0, 1]
    assert runs.target.object == ("<p>Save explanation writes to runs 1 and 2; it replaces the "
                                  "explanation run 1 already has.</p>")
    runs.explanation.value = "both runs"
    runs.attach()
    assert runs.explanation_message == ("Explanation saved to runs 1 and 2; it replaced the earlier "
                                        "explanation of run 1.")
    assert [r.explanation for r in state.saved] == ["both runs", "both runs"]
    assert runs.target.object.endswith("it replaces the explanation runs 1 and 2 already have.</p>")
