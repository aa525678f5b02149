"""The learner page's row steps, record form and saved runs, without a browser.

Each test builds a :class:`LearnerState` over a fresh run store, sets inputs and modes as the
page's controls would, and reads what the views render (the steps' text, the table's rows,
the comparison's maps) and what lands on disk.
"""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
from store_helpers import delete_run, sqlite_store, stored

from app.learner.record import PREDICT_QUESTION, PredictionView, RecordView
from app.learner.runs import EXPLAIN_QUESTION, SavedRunsView
from app.learner.state import LearnerState
from app.learner.steps import RowStepsView, steps_html


@pytest.fixture
def state(tmp_path):
    return LearnerState(store=sqlite_store(tmp_path / "runs"))


def text_of(markup: str) -> str:
    """HTML as a reader gets it: its text, one space between pieces."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", markup))).strip()


def text(view: RowStepsView) -> str:
    """The steps as a reader gets them."""
    return text_of(view.pane.object)


def in_order(haystack: str, *needles: str) -> bool:
    """Whether every needle occurs in ``haystack``, each after the one before."""
    at = 0
    for needle in needles:
        found = haystack.find(needle, at)
        if found < 0:
            return False
        at = found + len(needle)
    return True


def steps_of(state: LearnerState, row: int) -> str:
    state.row = row
    return text(RowStepsView(state=state))


def test_the_worked_row_reads_as_the_lesson_writes_it(state):
    state.apply_preset("worked_row")
    shown = steps_of(state, 2)
    assert shown.startswith("Row steps")
    # [1, 2, 9] → [1, 2, −∞] → [−1, 0, −∞] → … → [0.269, 0.731, 0] → 17.31
    assert in_order(shown, "Raw scores", "[1.000, 2.000, 9.000]",
                    "Divided by √d_k = √1", "[1.000, 2.000, 9.000]",
                    "Masked", "[1.000, 2.000, −∞]",
                    "Minus the largest visible score (2.000)", "[−1.000, 0, −∞]",
                    "exp", "[0.368, 1.000, 0]",
                    "Divided by the row sum (1.368)", "[0.269, 0.731, 0]",
                    "Weights of row 2 (row sum 1.000)", "[0.269, 0.731, 0]",
                    "Weighted values", "[2.689, 14.621, 0]",
                    "Output of row 2", "17.311"), shown
    assert "nan" not in shown.lower() and "not finite" not in shown


def test_the_steps_follow_the_row_and_the_input(state):
    view = RowStepsView(state=state)
    state.apply_preset("worked_row")
    state.row = 3
    assert "Row 3: query 3" in text(view) and "[0.000335, 0.000911, 0.999]" in text(view)
    state.set_token_text("keys", 2, "2")
    assert "[0.155, 0.422, 0.422]" in text(view)
    state.set_tokens(2)  # the shown row follows the token count down
    assert "Row 2: query 2" in text(view)


def test_mask_after_softmax_shows_softmax_of_the_whole_row_then_the_zeroing(state):
    state.apply_preset("worked_row")
    state.mask_after_softmax = True
    shown = steps_of(state, 2)
    assert in_order(shown, "Not masked before softmax", "[1.000, 2.000, 9.000]",
                    "Minus the largest score softmax sees (9.000)", "[−8.000, −7.000, 0]",
                    "Divided by the row sum", "[0.000335, 0.000911, 0.999]",
                    "zeroed after softmax, without renormalising", "[0.000335, 0.000911, 0]",
                    "Visible prefix sum (no renormalisation)", "0.00125",
                    "Weights of row 2 (row sum 0.00125)"), shown
    # The last row has no future cell: the zeroing takes nothing and its row sums to 1.
    assert in_order(steps_of(state, 3), "zeroed after softmax (row 3 has none)",
                    "Visible prefix sum (no renormalisation)", "1.000")


def test_naive_softmax_shows_the_exponentials_that_overflow(state):
    state.apply_preset("large_scores", failure_mode="naive_softmax")
    shown = steps_of(state, 3)
    assert in_order(shown, "Not shifted: naive softmax", "[1000.000, 1001.000, 999.000]",
                    "exp: overflows to ∞ (inf)", "[∞, ∞, ∞]",
                    "Divided by the row sum (∞): ∞/∞ is undefined",
                    "[undefined, undefined, undefined]"), shown
    assert "nan" not in shown.lower()


def test_wrong_axis_shows_the_column_it_normalised(state):
    state.apply_preset("worked_row", failure_mode="wrong_axis")
    shown = steps_of(state, 2)
    assert "Softmax normalised column 2 instead of row 2" in shown
    # Column 2: q_i · k_2 = 2 for every query; query 1 may not read key 2 (future).
    assert in_order(shown, "Raw scores q_i·k_2 of column 2", "[2.000, 2.000, 2.000]",
                    "Masked", "[−∞, 2.000, 2.000]", "Divided by the column sum (2.000)",
                    "[0, 0.500, 0.500]", "Weights of row 2"), shown


def test_the_other_modes_say_what_they_did_instead(state):
    state.apply_preset("worked_row", failure_mode="no_mask")
    assert in_order(steps_of(state, 2), "No mask", "future cells (j > 2) are not masked",
                    "[1.000, 2.000, 9.000]")
    state.failure_mode = "no_scaling"
    assert "Not divided by √d_k" in steps_of(state, 2)
    state.failure_mode = "keys_as_values"
    assert in_order(steps_of(state, 2), "Mixed: keys k_j (mixes keys, not values)",
                    "[1.000, 2.000, 9.000]", "Weighted keys", "Output of row 2", "1.731")


def test_a_row_with_no_visible_key_is_all_zero_and_says_so(state):
    state.apply_preset("worked_row")
    state.set_padding(0, True)  # row 1 may read only key 1, which is now padding
    shown = steps_of(state, 1)
    assert in_order(shown, "Masked: −∞ at future tokens and padding", "[−∞, −∞, −∞]",
                    "No visible key", "[0, 0, 0]", "Output of row 1", "0"), shown
    assert "nan" not in shown.lower() and "undefined" not in shown
    # Modes that do not mask before softmax still compute the row, and say what they did with it.
    state.failure_mode = "no_mask"
    assert in_order(steps_of(state, 1), "[−∞, 2.000, 9.000]", "Weights of row 1",
                    "[0, 0.000911, 0.999]", "No visible key: row 1 may read no key",
                    "the forgotten causal mask lets it read its future keys anyway")
    state.failure_mode = "mask_after_softmax"
    assert in_order(steps_of(state, 1), "[0.000335, 0.000911, 0.999]",
                    "the forbidden cells (future, padding) are zeroed", "[0, 0, 0]",
                    "No visible key: row 1 may read no key", "so none of its weight is kept")
    # The wrong axis normalises column 2 of a padded key 2: nothing in it, while row 2 reads key 1.
    state.set_padding(0, False)
    state.set_padding(1, True)
    state.failure_mode = "wrong_axis"
    shown = steps_of(state, 2)
    assert in_order(shown, "[−∞, −∞, −∞]", "Column 2 is masked for every query (key 2 is "
                    "padding)", "[0, 0, 0]", "Weights of row 2"), shown
    assert "No visible key" not in shown


def test_record_view_saves_with_a_prediction_and_says_what_it_did(state):
    view, predict = RecordView(state=state), PredictionView(state=state)
    assert predict.prediction.placeholder == f"{PREDICT_QUESTION} (up to 2000 characters)"
    view.button.clicks += 1  # as a click on Save run does
    assert view.message.visible and "Not saved: write your prediction first" in state.save_message
    assert 'role="status"' in view.message.object and "Not saved" in view.message.object
    predict.prediction.value = "token 2 cannot read token 3"
    view.label.value = "<b>mine</b>"
    view.button.clicks += 1
    assert len(state.saved) == 1 and state.saved[0].label == "<b>mine</b>"
    assert view.message.visible and "Saved run “&lt;b&gt;mine&lt;/b&gt;”" in view.message.object


@pytest.mark.parametrize("typed", [0, 9, -1, None, True])
def test_an_impossible_token_count_blocks_saving_until_fixed(state, typed):
    view = RecordView(state=state)
    state.prediction = "token 2 cannot read token 3"
    state.set_tokens(typed)
    assert view.button.disabled
    assert state.save_run() is None and "Tokens:" in state.save_message
    state.set_tokens(2)
    assert not view.button.disabled
    assert state.save_run() is not None and view.message.visible
    state.set_token_text("keys", 0, "abc")
    assert view.button.disabled
    # The last save's answer waits while Save run says why it is off, not both at once.
    assert view.save_off.visible and not view.message.visible
    state.set_token_text("keys", 0, "2")
    assert view.message.visible and not view.save_off.visible


def table_rows(runs: SavedRunsView) -> list[dict[str, str]]:
    """The Saved runs table's body rows as {column: cell text}."""
    table = runs.table.object
    head = [html.unescape(c) for c in re.findall(r"<th scope='col'>(.*?)</th>", table)]
    return [dict(zip(head, (html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)), strict=True))
            for row in re.findall(r"<tr data-run-id='[^']*'>(.*?)</tr>", table)]


def test_the_table_shows_learner_text_as_text_and_ticks_are_named(state):
    runs = SavedRunsView(state=state)
    assert "No saved runs yet." in runs.table.object and runs.ticks.options == {}
    assert runs.save_explanation.disabled  # and the page says why, where the button is
    assert "Save a run first: Save explanation attaches" in runs.target.object
    state.prediction = "p"
    state.label = "<img src=x onerror=alert(1)>"
    state.learner = "<b>Ada</b>"
    state.save_run()
    assert "<img" not in runs.table.object and "<b>" not in runs.table.object
    (row,) = table_rows(runs)
    assert (row["label"], row["learner"]) == ("<img src=x onerror=alert(1)>", "<b>Ada</b>")
    assert list(runs.ticks.options) == ["Run 1 “<img src=x onerror=aler…”: Correct, causal · 3 tokens"]  # cut at 24


def saved_pair(state):
    state.prediction = "p"
    state.apply_preset("worked_row")
    a = state.save_run()
    state.mask_after_softmax = True
    b = state.save_run()
    return a, b


def test_comparison_shows_both_runs_and_their_difference(state):
    runs = SavedRunsView(state=state)
    a, b = saved_pair(state)
    assert [row["run"] for row in table_rows(runs)] == ["1", "2"]
    assert re.findall(r"data-run-id='([^']+)'", runs.table.object) == [a.id, b.id]
    assert [row["mode"] for row in table_rows(runs)] == ["Correct, causal", "Mask after softmax (broken)"]
    assert runs.ticks.options == {"Run 1: Correct, causal · 3 tokens": 0,
                                  "Run 2: Mask after softmax (broken) · 3 tokens": 1}
    runs.ticks.value = [0, 1]
    assert runs.compare._pane.visible
    diff = runs.compare.difference.source.data["value"]
    assert np.allclose(np.array(diff).reshape(3, 3),
                       np.array(a.results["weights"]) - np.array(b.results["weights"]))
    assert "0.00125" in runs.compare.summary.object


def test_the_heading_says_which_two_runs_are_compared(state):
    runs = SavedRunsView(state=state)
    records = list(saved_pair(state))
    state.causal = False  # broken mode with the causal mask off: nothing to mask
    records.append(state.save_run())
    assert table_rows(runs)[2]["mode"] == "Mask after softmax (broken), nothing to mask: bidirectional"
    assert "Tick two saved runs" in runs.heading.object
    runs.ticks.value = [2, 0]
    assert "Comparing run 1 (A) with run 3 (B)." in runs.heading.object
    assert shows_weights_of(runs.compare.first, records[0])
    runs.ticks.value = [2, 0, 1]
    assert "3 runs are ticked" in runs.heading.object
    assert "run 1 (A) with run 2 (B)" in runs.heading.object
    assert shows_weights_of(runs.compare.second, records[1])
    runs.ticks.value = [1]
    assert "Tick two saved runs" in runs.heading.object and not runs.compare._pane.visible


def shows_weights_of(heatmap, record) -> bool:
    """Whether ``heatmap`` draws ``record``'s weights (its masked cells are drawn as NaN)."""
    shown = np.nan_to_num(np.array(heatmap.source.data["value"], dtype=float))
    return np.allclose(shown, np.array(record.results["weights"]).ravel())


def test_one_token_in_broken_mode_is_named_as_nothing_to_mask(state):
    runs = SavedRunsView(state=state)
    state.prediction = "p"
    state.set_tokens(1)
    state.mask_after_softmax = True
    state.save_run()
    state.set_tokens(2)
    state.save_run()
    assert [row["mode"] for row in table_rows(runs)] == [
        "Mask after softmax (broken), nothing to mask: one token", "Mask after softmax (broken)"]


def test_attach_explanation_changes_that_runs_record_and_adds_none(state):
    a, b = saved_pair(state)
    before = {r["id"]: r for r in stored(state.store)}
    (updated,) = state.attach_explanation([a.id], "  Rows sum to 1 only when the mask comes first. ")
    after = {r["id"]: r for r in stored(state.store)}
    assert set(after) == set(before)  # no run added
    assert after[a.id]["explanation"] == "Rows sum to 1 only when the mask comes first."
    assert after[b.id] == before[b.id]
    changed = {k: v for k, v in after[a.id].items() if before[a.id][k] != v}
    assert set(changed) == {"explanation"}
    assert [r.id for r in state.saved] == [a.id, b.id]
    assert state.saved[0] == updated and state.saved[0].explanation.startswith("Rows sum to 1")


def test_save_explanation_goes_to_the_ticked_runs_or_the_latest(state):
    runs = SavedRunsView(state=state)
    assert runs.explanation.label == "Explanation"
    assert runs.explanation.placeholder == f"{EXPLAIN_QUESTION} (up to 2000 characters)"
    assert runs.save_explanation.disabled
    a, b = saved_pair(state)
    assert not runs.save_explanation.disabled
    runs.explanation.value = "The broken mode's rows sum to 0.00125."
    runs.save_explanation.clicks += 1
    assert "Explanation saved to run 2, the latest run" in runs.explanation_message
    assert state.store.get(b.id).explanation == "The broken mode's rows sum to 0.00125."
    assert state.store.get(a.id).explanation is None
    assert [row["explanation"] for row in table_rows(runs)] == ["—", "The broken mode's rows sum to 0.00125."]
    runs.ticks.value = [0, 1]
    runs.explanation.value = "Both: the mask must come first."
    runs.save_explanation.clicks += 1
    # Run 2 had an explanation: the message says it was replaced.
    assert runs.explanation_message == ("Explanation saved to runs 1 and 2; it replaced the earlier "
                                        "explanation of run 2.")
    assert runs.ticks.value == [0, 1]  # the ticks stay
    assert [state.store.get(r).explanation for r in (a.id, b.id)] == ["Both: the mask must come first."] * 2
    runs.ticks.value = [0]  # one ticked run: its explanation is there to edit
    runs.explanation.value = ""
    runs.ticks.value = [1]
    assert runs.explanation.value == "Both: the mask must come first."
    runs.explanation.value = "x" * 2001
    runs.save_explanation.clicks += 1
    assert runs.explanation_message.startswith("Explanation not saved:") and not runs.explanation_ok
    assert "explanation" in runs.explanation_message.lower()
    assert state.store.count() == 2
    delete_run(state.store, a.id)  # removed by hand meanwhile
    runs.ticks.value = [0]
    runs.explanation.value = "still here?"
    runs.save_explanation.clicks += 1
    assert "no longer in the store" in runs.explanation_message
    assert [r["id"] for r in stored(state.store)] == [b.id]


def test_downloads_are_fresh_on_every_call_with_distinct_names(state):
    runs = SavedRunsView(state=state)
    assert runs.download_csv.disabled
    state.prediction = "p"
    state.save_run()
    assert not runs.download_csv.disabled
    first = runs._download("csv").getvalue()
    first_name = runs.download_csv.filename
    state.mask_after_softmax = True
    state.save_run()
    second = runs._download("csv").getvalue()
    assert len(second.splitlines()) == len(first.splitlines()) + 1
    assert runs.download_csv.filename.startswith("attention-runs-")
    assert runs.download_csv.filename != first_name  # two downloads in one second differ
    bundle = json.loads(runs._download("json").getvalue())
    assert len(bundle["runs"]) == 2 and runs.download_json.filename.endswith("Z.json")


def test_no_scaling_on_a_wide_head_shows_the_correct_weights_beside_the_sharper_ones(state):
    state.apply_preset("wide_head", failure_mode="no_scaling")
    shown = steps_of(state, 2)
    # Row 2 scores 4 and 2 unscaled; divided by √4 = 2 they are 2 and 1 (Self-attention, "Common
    # failure modes": unscaled, a wider head's weights are sharper).
    assert in_order(shown, "Not divided by √d_k (√4)", "[4.000, 2.000, −∞]",
                    "Weights of row 2", "[0.881, 0.119, 0]",
                    "Correct, for comparison: scores divided by √d_k = √4 = 2.000", "[2.000, 1.000, 0]",
                    "Correct weights of row 2", "[0.731, 0.269, 0]"), shown
    state.failure_mode = "correct"
    assert "Correct, for comparison" not in steps_of(state, 2)


def test_every_text_field_says_its_limit_and_longer_text_is_refused_not_cut(state):
    from attention_core.records import TEXT_LIMITS

    record, runs = RecordView(state=state), SavedRunsView(state=state)
    fields = {"prediction": PredictionView(state=state).prediction, "learner": record.learner, "label": record.label,
              "explanation": runs.explanation}
    for field, widget in fields.items():
        limit = TEXT_LIMITS[field]
        # The browser keeps what was typed (Panel's default 5000 cut text silently), so saving
        # can name the field and the real length.
        assert widget.max_length >= 20 * limit, field
        assert widget.placeholder.endswith(f"(up to {limit} characters)"), field
    state.prediction = "x" * TEXT_LIMITS["prediction"]  # the most a record holds is saved
    state.learner = "y" * TEXT_LIMITS["learner"]
    assert state.save_run() is not None, state.save_message
    state.prediction = "x" * 20_000
    assert state.save_run() is None
    assert state.save_message == "Not saved: Prediction is 20000 characters long; the limit is 2000"


def test_row_steps_write_negatives_with_the_minus_sign_of_minus_infinity(learner_page):
    learner_page.state.apply_preset("worked_row")
    text = text_of(steps_html(learner_page.state.result, 2))
    assert "[−1.000, 0, −∞]" in text and "-" not in re.sub(r"[A-Za-z]-[A-Za-z]|d_k|q_|k_|–", "", text)


def test_save_explanation_says_where_it_writes_before_and_what_it_replaced_after(learner_page):
    state, runs = learner_page.state, learner_page.runs
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
