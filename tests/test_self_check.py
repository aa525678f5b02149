"""The Check-yourself panel without a browser (issue 24): each "Show me" sets the page up as its
answer says, in the numbers the page shows; Q1's checked answer goes into the next saved run only."""

from __future__ import annotations

import re

import numpy as np
import pytest

from app.learner.self_check import Q1_CHOICES, QUESTIONS, check_answer, feedback_html
from app.learner.state import PRESETS, LearnerState, grid_texts
from app.shared.numbers import format_number

SHOWS = {show.short: (q, show) for q in QUESTIONS for show in q.shows}
# What each Show me sets: (preset, failure mode, row, highlight (row, first column, last column)).
EXPECTED = {
    "the softmax axis": ("four_token_trace", "correct", 3, (3, 1, 4)),
    "row, column, score and weight": ("worked_row", "correct", 2, (2, 2, 2)),
    "why causal rows sum to 1": ("worked_row", "correct", 2, (2, 1, 3)),
    "what a value does that a key does not": ("worked_row", "correct", 2, (2, 1, 2)),
    "the leak without a mask": ("worked_row", "no_mask", 2, (2, 3, 3)),
    "every shape from B, T, d_model, d_k, d_v": ("batch_padded", "correct", None, None),
    "why Q and K widths match": ("wide_head", "correct", 2, None),
    "the output projection is not a reshape": ("output_projection", "output_projection_transposed", 3, None),
    "batch sharing": ("batch_padded", "correct", None, None),
    "batch mixing": ("batch_padded", "batch_items_mixed", 4, (4, 1, 3)),
}


def n(x: float) -> str:
    return format_number(float(x), trim=True)


def test_every_show_me_is_listed_with_what_it_sets():
    assert set(SHOWS) == set(EXPECTED)
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)


@pytest.mark.parametrize("short", EXPECTED)
def test_show_me_sets_the_preset_mode_row_and_cells_whatever_was_chosen_before(short):
    preset, mode, row, highlight = EXPECTED[short]
    state = LearnerState()
    # A page left in another mode, input and row: Show me sets everything its answer reads.
    state.apply_preset("large_scores", failure_mode="naive_softmax")
    state.set_row(3)
    text = SHOWS[short][1].run(state)
    p = PRESETS[preset]
    assert state.input_mode == p.get("input_mode", "vectors") and state.tokens == p["tokens"]
    for field in ("queries", "keys", "x", "x_2", "w_v"):
        if field in p:
            rows = 4 if field.startswith("w_") else 8
            assert getattr(state, field) == grid_texts(p[field], rows)
    assert state.failure_mode == mode and state.input_ok
    if row is not None:
        assert state.row == row
    assert state.highlight == highlight
    assert text and "nan" not in text.lower()


def test_the_softmax_axis_answer_quotes_row_3s_weights_and_its_row_sum():
    state = LearnerState()
    text = SHOWS["the softmax axis"][1].run(state)
    r = state.result
    weights = r.weights[2, :3]
    assert " + ".join(n(w) for w in weights) in text
    assert f"sum to {n(r.row_sums[2])} over the 3 keys it can read" in text
    assert n(r.row_sums[2]) == "1"
    assert f"column 1 the weights sum to {n(r.weights[:, 0].sum())}, not 1" in text


def test_the_worked_row_answers_quote_the_lessons_numbers():
    state = LearnerState()
    assert "weight[2][2] = 0.731" in SHOWS["row, column, score and weight"][1].run(state)
    text = SHOWS["why causal rows sum to 1"][1].run(state)
    assert "0.269 + 0.731 = 1" in text and "summing to 0.00125" in text
    assert "= 17.311" in SHOWS["what a value does that a key does not"][1].run(state)
    assert "weight[2][3] = 0.999" in SHOWS["the leak without a mask"][1].run(state)


def test_batch_mixing_points_at_item_2s_weight_on_item_1():
    state = LearnerState()
    text = SHOWS["batch mixing"][1].run(state)
    across = state.result.weights[3, :3]
    assert state.layer.flattened and "batch_independence" in state.layer.failed_checks
    assert f"= {n(across.sum())} of its weight on item 1's tokens" in text
    assert text.endswith("Independence between batch items: fails.")
    assert SHOWS["batch sharing"][1].run(state).endswith("Independence between batch items: passes.")


def test_shapes_are_said_in_b_t_d_model_d_k_d_v():
    state = LearnerState()
    text = SHOWS["every shape from B, T, d_model, d_k, d_v"][1].run(state)
    assert state.use_w_o and state.batch_size == 2
    for part in ("B = 2, T = 3, d_model = 2, d_k = 2, d_v = 2", "S: B×T×T = 2×3×3", "Y = H W_O: B×T×d_model = 2×3×2"):
        assert part in text


def test_a_change_of_input_or_row_drops_the_highlight():
    state = LearnerState()
    SHOWS["the softmax axis"][1].run(state)
    assert state.highlight == (3, 1, 4)
    state.set_row(2)
    assert state.highlight is None
    SHOWS["the leak without a mask"][1].run(state)
    state.set_token_text("keys", 2, "3")
    assert state.highlight is None


def test_q1s_answer_is_its_choice_in_the_courses_words():
    assert check_answer(None) is None
    assert check_answer(0) == {"question": "softmax_axis", "choice": Q1_CHOICES[0], "correct": True}
    assert [check_answer(i)["correct"] for i in range(3)] == [True, False, False]
    assert "Choose one" in feedback_html(None)
    wrong = feedback_html(check_answer(2))
    assert "Not this one" in wrong and "Softmax operates across columns, the final axis." in wrong


def test_the_panel_is_built_when_first_opened_and_its_buttons_are_named(learner_page):
    panel = learner_page.self_check
    assert panel.card.collapsed and panel.answers == {}
    panel.card.collapsed = False
    names = [b.label for b in panel.buttons.values()]
    assert names == [f"Show me: {short}" for short in EXPECTED]
    panel.buttons["batch mixing"].clicks += 1
    answer = panel.answers["batch"].object
    assert "data-testid='answer-batch'" in answer and panel.answers["batch"].visible
    box = learner_page.matrices.highlight
    # Row 4 of the 6 rows (drawn top-down), columns 1 to 3.
    assert (box.visible, box.left, box.right, box.bottom, box.top) == (True, 0, 3, 2, 3)
    learner_page.state.failure_mode = "correct"
    assert not box.visible


def test_q1s_checked_answer_is_saved_with_the_next_run_only(learner_page):
    state, panel = learner_page.state, learner_page.self_check
    panel.card.collapsed = False
    state.prediction = "token 2 cannot read token 3"
    panel._check()  # nothing chosen: nothing recorded
    assert state.self_check is None and "Choose one" in panel.feedback.object
    panel.choices.active = 1
    panel._check()
    assert state.self_check == {"question": "softmax_axis", "choice": Q1_CHOICES[1], "correct": False}
    assert re.search("Not this one", panel.feedback.object)
    first = state.save_run()
    assert first.self_check == state.saved[-1].self_check == check_answer(1)
    assert state.self_check is None
    # Answered again on the same run: the answer is new, so the run saves again with it.
    panel.choices.active = 0
    panel._check()
    second = state.save_run()
    assert second is not None and second.self_check == check_answer(0)
    state.set_token_text("keys", 0, "2")
    third = state.save_run()
    assert third is not None and third.self_check is None
    assert [r.self_check for r in learner_page.store.iter_records()][-3:] == [check_answer(1), check_answer(0), None]
    assert np.isfinite(third.results["row_sums"]).all()


def test_with_predict_first_show_me_sets_the_page_up_but_keeps_the_weights_answer_for_after(learner_page):
    """?predict=first: an answer quoting the weights would give the prediction away."""
    state, panel = learner_page.state, learner_page.self_check
    state.predict_first = True
    panel.card.collapsed = False
    panel.buttons["why causal rows sum to 1"].clicks += 1
    answer = str(panel.answers["causal_rows_sum_to_1"].object)
    assert "Write your prediction at the top first" in answer and "0.731" not in answer
    assert state.failure_mode == "correct" and state.row == 2  # the page is set up all the same
    state.prediction = "Token 2 cannot attend to token 3."
    assert not panel.answers["causal_rows_sum_to_1"].visible  # the note is out of date
    panel.buttons["why causal rows sum to 1"].clicks += 1
    assert "0.731" in str(panel.answers["causal_rows_sum_to_1"].object)
    state.prediction = ""
    assert not panel.answers["causal_rows_sum_to_1"].visible
