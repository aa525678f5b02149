"""The learner page's state and views without a browser (the middle test layer of STYLE.md).

Each test builds a :class:`LearnerPage` (or its state alone), sets parameters as the widgets
would, and asserts on the derived result, the views' text and the heat maps' ``source.data``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from bokeh.document import Document
from panel.io.state import set_curdoc
from store_helpers import run_async, sqlite_store

from app.learner.checks import OTHER_LIBRARIES, readouts_html, row_sum_html
from app.learner.matrices import MASKED_SCORE
from app.learner.page import LearnerPage
from app.learner.runs import runs_table_html
from app.learner.state import EXPOSING_PRESETS, PRESETS, LearnerState, layer_exposure
from app.shared.heatmap import contrasting_text, nice_bound
from app.shared.numbers import format_number
from app.shared.parsing import clean_text, parse_number
from attention_core import exposure
from attention_core.checks import CHECK_TITLES
from attention_core.modes import FAILURE_MODES, run_title
from attention_core.records import validate_record


@pytest.fixture
def state(learner_page):
    return learner_page.state


def html_of(pane) -> str:
    """What an HTML pane shows now (its object may be a bound function)."""
    obj = pane.object
    return obj() if callable(obj) else obj


def find_cell(page, label: str) -> tuple:
    """The grid showing the cell named ``label``, and the cell's row and column in it."""
    for grid in page.inputs.grids:
        for i, row in enumerate(grid.labels if grid.visible else []):
            if label in row:
                return grid, i, row.index(label)
    raise AssertionError(f"no visible cell is named {label!r}")


def cell_text(page, label: str) -> str:
    grid, i, j = find_cell(page, label)
    return grid.value[i][j]


def type_cell(page, label: str, text: str) -> None:
    """Type ``text`` into the cell named ``label`` as the browser sends it: that cell's edit."""
    grid, _, _ = find_cell(page, label)
    grid._handle_msg({"seq": grid.acked + 1, "label": label, "text": text})


def readouts(page) -> str:
    return html_of(page.readouts.pane)


def text_of(html: str) -> str:
    """HTML's text, one space between pieces."""
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def at(data: dict, row: int, column: int) -> int:
    return [n for n in range(len(data["row"])) if (data["row"][n], data["column"][n]) == (str(row), str(column))][0]


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1.0), ("-.5", -0.5), ("1.", 1.0), ("1e3", 1000.0), ("  2 ", 2.0), ("+3", 3.0),
    ("1E-2", 0.01), ("\u22123", -3.0), ("\u2212.5", -0.5), ("1e\u22122", 0.01),
])
def test_numbers_as_people_type_them(text, value):
    assert parse_number(text, "Query 1") == value


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty"), ("   ", "empty"), ("abc", "'abc' is not a number"), ("-", "not a number"),
    (".", "not a number"), ("1e400", "too large for float64"), ("nan", "not a finite number"),
    ("inf", "not a finite number"), ("-Infinity", "not a finite number"),
    ("1,5", "decimal comma; type 1.5"), ("1_000", "not a number"), ("0x10", "not a number"),
    ("1" * 50, "too long"),
    ("\uff11", "digits other than 0-9"), ("\u0661.\u0665", "digits other than 0-9"),
    ("1\u00b2", "digits other than 0-9"), ("\uff11,\uff15", "digits other than 0-9"),
])
def test_bad_numbers_are_refused_naming_the_field(text, words):
    with pytest.raises(ValueError, match="^Key 2: ") as info:
        parse_number(text, "Key 2")
    assert words in str(info.value)


def test_free_text_drops_control_characters_and_is_length_limited():
    assert clean_text("a\x00b\u200f<b>", "label") == "ab\u200f<b>"  # the RLM mark is kept
    assert clean_text("\u202eevil\u202c RTL\u2066x\u2069", "learner") == "evil RTLx"  # no reordering
    assert clean_text("   ", "learner") is None
    with pytest.raises(ValueError, match="Label is 101 characters long; the limit is 100"):
        clean_text("x" * 101, "label")


def test_the_page_is_built_without_a_browser_and_has_one_state(learner_page):
    assert isinstance(learner_page.state, LearnerState)
    for view in (learner_page.inputs, learner_page.matrices, learner_page.readouts, learner_page.banner,
                 learner_page.steps, learner_page.record, learner_page.runs):
        assert view.state is learner_page.state
    assert not hasattr(learner_page, "template_state")
    assert learner_page.__panel__() is not None


def test_two_pages_share_no_state_or_widget(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    a, b = LearnerPage(store=store), LearnerPage(store=store)
    a.state.set_token_text("keys", 0, "7")
    assert b.state.keys[0][0] == "1" and cell_text(b, "Key 1") == "1"
    assert a.inputs.grids[0] is not b.inputs.grids[0]


def test_worked_row_and_broken_mode_as_the_lesson_says(state):
    state.apply_preset("worked_row")
    r = state.result
    assert np.round(r.weights[1], 3).tolist() == [0.269, 0.731, 0.0]
    assert round(float(r.output[1]), 2) == 17.31
    state.mask_after_softmax = True
    r = state.result
    assert state.failure_mode == "mask_after_softmax"
    assert r.future_weight.tolist() == [0.0, 0.0, 0.0]
    assert math.isclose(r.row_sums[1], 0.0012457907, rel_tol=1e-6)
    assert set(r.failed_checks) == {"mask", "row_sums"}


def test_saved_runs_name_failed_checks_by_the_titles_the_checklist_shows(state):
    from app.learner.runs import runs_columns

    state.apply_preset("worked_row")
    state.prediction = "Row 2 loses its future weight."
    state.save_run()
    state.mask_after_softmax = True
    state.save_run()
    assert runs_columns(state.saved)["failed checks"] == [
        "none", "Mask applied before softmax; Row sums equal 1"]


def test_the_broken_checkbox_and_the_failure_mode_are_one_setting(learner_page, state):
    state.failure_mode = "mask_after_softmax"
    assert state.mask_after_softmax and learner_page.inputs.toggles[2].value == ["Mask after softmax (broken)"]
    state.failure_mode = "no_mask"
    assert not state.mask_after_softmax and learner_page.inputs.toggles[2].value == []
    learner_page.inputs.toggles[2].value = ["Mask after softmax (broken)"]  # the learner ticks it
    assert state.failure_mode == "mask_after_softmax" and learner_page.inputs.failure_mode.value == "mask_after_softmax"
    learner_page.inputs.toggles[2].value = []
    assert state.failure_mode == "correct" and learner_page.inputs.failure_mode.value == "correct"
    assert LearnerState(mask_after_softmax=True).failure_mode == "mask_after_softmax"


def test_the_failure_mode_control_offers_every_mode_by_its_title(learner_page):
    assert learner_page.inputs.failure_mode.label == "Failure mode"
    assert learner_page.inputs.failure_mode.options == {m.title: m.name for m in FAILURE_MODES.values()}


@pytest.mark.parametrize("name", list(FAILURE_MODES))
def test_each_mode_is_described_and_exposed_by_a_preset_or_said_to_be_unexposable(learner_page, state, name):
    state.failure_mode = name
    mode = FAILURE_MODES[name]
    shown = html_of(learner_page.inputs.mode_note)
    assert mode.description in unescape(shown)
    for check in mode.breaks:
        assert CHECK_TITLES[check] in shown
    note = layer_exposure(state.layer)
    if note is None:
        assert set(state.layer.failed_checks) == set(mode.breaks)
        assert html_of(learner_page.banner.exposure_note) == "" and not learner_page.banner.expose.visible
        return
    assert note in unescape(html_of(learner_page.banner.exposure_note))
    if name == "no_scaling":  # d_k = 1 cannot show it; the wide-head preset (d_k = 4) does
        assert "d_k = 1" in note and state.layer.failed_checks == ()
    assert learner_page.banner.expose.visible
    learner_page.banner.expose.clicks += 1
    assert state.failure_mode == name and layer_exposure(state.layer) is None
    assert set(state.layer.failed_checks) == set(mode.breaks)
    assert not learner_page.banner.expose.visible


def test_every_mode_either_shows_on_the_default_input_or_has_an_exposing_preset(state):
    for name in FAILURE_MODES:
        state.apply_preset("reset")
        state.failure_mode = name
        if exposure(state.result) is not None:
            assert name in EXPOSING_PRESETS, name


def test_a_preset_sets_everything_it_depends_on(state):
    state.param.update(causal=False, failure_mode="naive_softmax", padding=[True] * 8, tokens=5)
    state.apply_preset("worked_row")
    r = state.result
    settings = (state.causal, state.failure_mode, state.mask_after_softmax, any(state.padding))
    assert settings == (True, "correct", False, False)
    assert np.round(r.weights[1], 3).tolist() == [0.269, 0.731, 0.0]
    assert round(float(r.output[1]), 2) == 17.31
    for key in PRESETS:
        state.param.update(causal=False, failure_mode="wrong_axis", padding=[True] * 8)
        state.apply_preset(key)
        assert state.causal and not any(state.padding)
        # A preset that exists to show a mode keeps the chosen one, as the hint's button does.
        chosen = "wrong_axis" if key in EXPOSING_PRESETS.values() else "correct"
        assert state.failure_mode == PRESETS[key].get("failure_mode", chosen)


def test_causal_off_is_bidirectional_and_passes(learner_page, state):
    state.causal = False
    r = state.result
    assert r.failed_checks == () and r.total_future_weight > 0
    assert run_title("correct", False, 3) in readouts(learner_page)
    assert "bidirectional" in html_of(learner_page.inputs.mask_note)
    assert not learner_page.banner.pane.visible


def test_no_mask_is_a_decoder_that_forgot_its_mask(learner_page, state):
    state.failure_mode = "no_mask"
    r = state.result
    assert set(r.failed_checks) == {"mask", "forbidden_zeros"} and r.total_future_weight > 0
    assert "BROKEN MODE: no mask." in html_of(learner_page.banner.pane) and learner_page.banner.pane.visible
    assert "This run: <b data-testid='run-title'>No mask</b>" in readouts(learner_page)
    weights = learner_page.matrices.weights.source.data
    assert weights["hatch"][at(weights, 1, 2)] == " "  # its future cells carry weight, not masked


def test_a_padding_tick_that_empties_a_row_gives_zero_weights_and_says_what_other_libraries_do(learner_page, state):
    learner_page.inputs.grids[0].checks = [True, False, False]  # the learner ticks Padding 1
    assert state.padding[0] is True
    r = state.result
    assert r.weights[0].tolist() == [0.0, 0.0, 0.0] and np.isfinite(r.weights).all()
    assert "row_sums" in r.failed_checks
    text = unescape(readouts(learner_page))
    assert "Row 1: no visible key." in text and "Row sums equal 1" in text
    assert OTHER_LIBRARIES in text
    assert "NaN" not in text.replace(OTHER_LIBRARIES, "")
    weights = learner_page.matrices.weights.source.data
    assert all(weights["hatch"][at(weights, r_, 1)] == "/" for r_ in (1, 2, 3))  # key 1 is padding
    state.set_padding(0, False)
    assert learner_page.inputs.grids[0].checks == [False] * 3 and "no visible key" not in readouts(learner_page)
    state.prediction = "p"
    record = state.save_run()
    assert "NaN" not in json.dumps(record.to_dict() if hasattr(record, "to_dict") else str(record))


def test_no_nan_reaches_a_map_or_the_readouts_in_naive_softmax(learner_page, state):
    state.apply_preset("large_scores", failure_mode="naive_softmax")
    assert set(state.result.failed_checks) == {"finite_weights", "row_sums"}
    for data in (learner_page.matrices.scores.source.data, learner_page.matrices.weights.source.data):
        assert not any("nan" in t.lower() for t in data["text"])
    assert "nan" not in readouts(learner_page).lower()


def test_bad_input_keeps_the_last_good_result_and_cannot_be_saved(learner_page, state):
    good = state.result
    state.prediction = "token 2 cannot read token 3"
    type_cell(learner_page, "Key 2", "abc")
    assert state.result is good and not state.input_ok
    assert state.field_errors == {"Key 2": "Key 2: 'abc' is not a number; type one such as 1 or -0.5"}
    # The token grid marks the cell and shows the message under its row.
    assert learner_page.inputs.grids[0].errors == state.field_errors
    assert state.save_run() is None
    assert state.save_message.startswith("Not saved: fix the highlighted inputs first")
    assert state.store.count() == 0
    assert "still show the last valid input" in readouts(learner_page)
    state.set_token_text("keys", 1, "2")
    assert state.input_ok and state.field_errors == {} and learner_page.inputs.grids[0].errors == {}


def test_score_overflow_is_named_at_the_query(state):
    state.set_token_text("queries", 2, "1e300")
    state.set_token_text("keys", 2, "1e300")
    assert list(state.field_errors) == ["Query 3"]
    assert "overflows float64" in state.field_errors["Query 3"]


def test_token_count_keeps_typed_values(learner_page, state):
    state.set_token_text("queries", 2, "4.5")
    learner_page.inputs.tokens.value = 1
    assert state.result.T == 1 and state.row == 1
    learner_page.inputs.tokens.value = 3
    assert state.queries[2][0] == "4.5" and state.result.queries[2] == 4.5
    assert cell_text(learner_page, "Query 3") == "4.5"


def test_hidden_fields_do_not_block_the_visible_ones(state):
    state.set_token_text("queries", 2, "oops")
    state.tokens = 2
    assert state.input_ok and state.result.T == 2


def test_save_needs_a_prediction_and_writes_a_valid_record(state):
    assert state.save_run() is None
    assert "write your prediction first" in state.save_message
    state.param.update(prediction="no", learner="Ada", label="<script>alert(1)</script>", failure_mode="no_mask")
    record = state.save_run()
    assert record is not None and state.save_ok
    on_disk = json.loads(next(state.store.iter_texts(ids=[record.id])))
    validate_record(on_disk)
    assert on_disk["settings"]["failure_mode"] == "no_mask"
    assert record.label == "<script>alert(1)</script>"  # kept as data, escaped on display
    assert [r.id for r in state.saved] == [record.id]


def test_reset_restores_the_starting_state(state):
    state.apply_preset("large_scores")
    state.param.update(causal=False, mask_after_softmax=True, padding=[True] + [False] * 7)
    state.apply_preset("reset")
    assert (state.tokens, state.causal, state.mask_after_softmax, state.failure_mode) == (3, True, False, "correct")
    assert [key[0] for key in state.keys[:3]] == ["1", "2", "9"] and not any(state.padding)


def test_large_scores_preset_stays_finite(state):
    state.apply_preset("large_scores")
    r = state.result
    assert np.isfinite(r.weights).all() and np.allclose(r.row_sums, 1.0)
    assert r.scores.max() > 999


def test_heat_map_sources_hold_one_row_per_cell_with_masks_marked(learner_page, state):
    view = learner_page.matrices
    data = view.weights.source.data
    assert len(data["row"]) == 9
    i = at(data, 2, 3)
    assert data["hatch"][i] == "/" and math.isnan(data["value"][i]) and data["state"][i] == "masked"
    assert data["text"][i] == "0\nmasked"
    assert view.scores.source.data["text"][i].startswith("−∞")
    assert view.scores.source.data["state"][i] == MASKED_SCORE  # hover: the score before masking
    assert view.scores.source.data["score_text"][i] == "9.000"
    # The Scores table has no score line above the cell: it names the score before masking itself.
    assert "<td>−∞ masked: softmax got −∞; the score before masking was 9.000</td>" in unescape(
        view.scores.table.text)
    assert "the score above" not in view.scores.table.text
    assert view.weights.y_range.factors == ["3", "2", "1"]  # token 1 on top
    assert (view.weights.mapper.low, view.weights.mapper.high) == (0.0, 1.0)
    state.tokens = 4
    assert len(view.weights.source.data["row"]) == 16
    assert "Weights table" in view.weights.table.text


def test_scores_1_and_2_beside_a_9_get_colours_apart(learner_page, state):
    state.apply_preset("worked_row")
    view = learner_page.matrices.scores
    shown = state.result.scores[state.result.allowed]
    assert (view.mapper.low, view.mapper.high) == (float(shown.min()), float(shown.max())) == (1.0, 9.0)
    data = view.source.data
    one, two = data["value"][at(data, 2, 1)], data["value"][at(data, 2, 2)]
    assert (one, two) == (1.0, 2.0)
    assert view._colour(one, view.mapper.low, view.mapper.high) != view._colour(two, view.mapper.low, view.mapper.high)
    palette = view.mapper.palette
    assert abs(palette.index(view._colour(two, 1, 9)) - palette.index(view._colour(one, 1, 9))) >= 30
    state.apply_preset("all_equal")  # one score everywhere: a range around it, not a zero-width one
    assert view.mapper.low < 2.0 < view.mapper.high


def test_at_eight_tokens_cell_text_is_short_and_masked_cells_say_so_by_hatch_and_hover(learner_page, state):
    state.tokens = 8
    for view in (learner_page.matrices.scores, learner_page.matrices.weights):
        data = view.source.data
        assert len(data["row"]) == 64
        assert all(len(t) <= 6 for t in data["text"]), [t for t in data["text"] if len(t) > 6]
        assert {text.text_font_size for text in view._texts} == {"9px"}
        masked = [n for n in range(64) if data["hatch"][n] == "/"]
        assert masked and all("\n" not in data["text"][n] for n in masked)
        assert all(data["state"][n] != "visible" for n in masked)
        assert "masked" in view.table.text  # the mirror table still says it
    state.tokens = 3
    assert {text.text_font_size for text in learner_page.matrices.weights._texts} == {"12px"}


@pytest.mark.parametrize(("x", "text"), [
    (0.000335, "3e−04"), (0.269, "0.27"), (17.31, "17.3"), (1001.0, "1001"), (0.0, "0"), (-9.0, "−9.00"),
    (123456.0, "1e+05"), (float("nan"), "undefined"), (float("inf"), "∞"), (float("-inf"), "−∞"),
])
def test_short_cell_number_format(x, text):
    assert format_number(x, "narrow") == text


def test_clicking_a_heat_map_row_chooses_the_row(learner_page, state):
    data = learner_page.matrices.weights.source.data
    learner_page.matrices.weights.source.selected.indices = [at(data, 3, 1)]  # what a tap sends
    assert state.row == 3 and learner_page.matrices.weights.source.selected.indices == []
    learner_page.matrices.scores.source.selected.indices = [at(data, 1, 1)]
    assert state.row == 1
    learner_page.row.value = 2
    assert state.row == 2
    state.tokens = 1
    assert state.row == 1 and learner_page.row.value == 1


def test_the_row_steps_follow_the_chosen_row(learner_page, state):
    state.apply_preset("worked_row")
    state.row = 2
    text = html_of(learner_page.steps.pane)
    for number in ("0.269", "0.731", "17.311"):
        assert number in text


@pytest.mark.parametrize(("x", "text"), [
    (0.269, "0.269"), (0.00125, "0.00125"), (0.0646, "0.065"), (0.0123, "0.012"),
    (0.0, "0"), (1e-7, "1.00e−07"), (1000.0, "1000.000"),
    (float("nan"), "undefined"), (float("inf"), "∞"),
])
def test_cell_number_format(x, text):
    assert format_number(x) == text


@pytest.mark.parametrize(("x", "bound"), [
    (0.3, 0.5), (0.5, 0.5), (1.0, 1.0), (1.01, 2.0), (2.0, 2.0), (2.5, 5.0), (9.0, 10.0),
    (17.3, 20.0), (1000.0, 1000.0), (1001.0, 2000.0), (3e-7, 5e-7), (0.0, 1.0), (-3.0, 1.0),
    (float("inf"), 1.0), (float("nan"), 1.0),
    (5e-6, 5e-6),  # 5 * 10.0**-6 is just below 5e-6: the bound is parsed, not multiplied
    (1.5e308, 1.5e308),  # 2e308 is beyond float64: the largest score is its own bound
    (9.88e-324, 1e-323),  # among the subnormals 10.0**-324 is 0: still a bound above 0
])
def test_the_difference_colour_range_ends_on_a_round_number_at_or_above_the_largest(x, bound):
    assert nice_bound(x) == bound
    assert nice_bound(x) >= x or not math.isfinite(x) or x <= 0
    assert 0 < nice_bound(x) < math.inf


def test_cell_text_contrasts_with_the_colour_the_cell_is_drawn_in(learner_page, state):
    view = learner_page.matrices
    state.apply_preset("reset")
    state.set_token_text("keys", 2, "6.6")
    for heat_map in (view.scores, view.weights):
        data, mapper = heat_map.source.data, heat_map.mapper
        for n, value in enumerate(data["value"]):
            if math.isnan(value):
                continue
            k = len(mapper.palette)
            drawn = mapper.palette[min(max(int((value - mapper.low) / (mapper.high - mapper.low) * k), 0), k - 1)]
            assert data["text_color"][n] == contrasting_text(drawn), (heat_map.title, n, value)
    assert contrasting_text("#ffffff") == "black" and contrasting_text("#000000") == "white"
    assert contrasting_text("#542788") == "white"  # PuOr's dark purple, which had black text


def test_a_full_or_read_only_store_says_not_saved_and_the_app_keeps_working(state, monkeypatch):
    from app.store import StoreError

    state.prediction = "p"
    kept = state.save_run()

    def refuse(record, key_hash=None):
        raise StoreError("Run not saved: the store /srv/runs.db is full.")

    monkeypatch.setattr(state.store, "save", refuse)
    state.label = "second"
    assert state.save_run() is None
    assert state.save_message == "Run not saved: the store /srv/runs.db is full."
    assert not state.save_ok and [r.id for r in state.saved] == [kept.id]
    state.set_token_text("keys", 0, "3")  # still computing
    assert state.input_ok and state.result.keys[0] == 3.0
    monkeypatch.undo()
    assert state.save_run() is not None and state.save_ok  # keys changed since the kept run


def test_a_double_clicked_save_does_not_save_the_same_run_twice(state):
    state.prediction = "p"
    first = state.save_run()
    assert first is not None
    assert state.save_run() is None
    assert state.save_message == ("Already saved as #1: change an input, a toggle or the text to "
                                  "save another run.")
    assert state.save_ok  # what was asked for is in the store: not shown as an error
    assert state.store.count() == 1
    state.label = "again"
    assert state.save_run() is not None and len(state.saved) == 2


def test_a_saves_changes_to_the_page_are_held_into_one_message(state):
    # Unheld, each view's change went to the browser as a message of its own (13 per save).
    doc, held = Document(), []
    state.param.watch(lambda *events: held.extend(doc.callbacks.hold_value for _ in events),
                      ["saved", "owned", "last_saved", "save_message"])
    state.prediction = "p"
    with set_curdoc(doc):
        assert state.save_run() is not None
    assert held == ["combine"] * 4 and doc.callbacks.hold_value is None
    assert state.save_message == f"Saved run #1 ({state.saved[0].id})."
    state.label = "again"
    with set_curdoc(doc):
        state.save_run()
    assert state.save_message == f"Saved run “again” ({state.saved[1].id})."


def test_restore_runs_takes_back_saved_runs_and_skips_anything_else(state, tmp_path):
    state.prediction = "p"
    first = state.save_run()
    state.label = "second"
    second = state.save_run()
    (tmp_path / "secret.json").write_text("{}")
    fresh = LearnerState(store=state.store)
    fresh.restore_runs([second.id, "../secret", "/etc/passwd", "%2e%2e%2fsecret", "missing-id", first.id])
    assert [r.id for r in fresh.saved] == [first.id, second.id]
    assert fresh.restore_message == (
        "4 of the 6 run ids in this page's address (?runs=) are not listed below: '../secret', "
        "'/etc/passwd' and '%2e%2e%2fsecret' are not run ids (a run id is up to 64 letters, digits, "
        "'-' and '_'); 'missing-id' was not found in the store.")
    fresh.restore_runs([first.id])
    assert fresh.restore_message == ""


def test_unknown_runs_in_the_address_are_counted_on_the_page_not_just_an_empty_table(learner_page):
    learner_page.state.restore_runs(["missing-id"])
    shown = unescape(html_of(learner_page.runs.restore_status))
    assert learner_page.runs.restore_status.visible and "No saved runs yet." in learner_page.runs.table.object
    assert "1 of the 1 run ids in this page's address (?runs=) is not listed below: 'missing-id' was " \
           "not found in the store." in shown


def test_skipped_ids_are_quoted_three_at_most_for_each_reason(state):
    state.restore_runs(["bad!1", "bad!2", "bad!3", "bad!4", "x" * 100, "gone"])
    assert state.restore_message == (
        "6 of the 6 run ids in this page's address (?runs=) are not listed below: 'bad!1', 'bad!2', "
        "'bad!3' and 2 more are not run ids (a run id is up to 64 letters, digits, '-' and '_'); "
        "'gone' was not found in the store.")


def test_one_token_in_broken_mode_is_named_and_explained_as_nothing_to_mask(learner_page, state):
    state.prediction = "p"
    state.set_tokens(1)
    state.mask_after_softmax = True
    assert "With one token there is no future token" in html_of(learner_page.inputs.mask_note)
    assert not learner_page.banner.pane.visible
    record = state.save_run()
    assert record.title == "Mask after softmax (broken), nothing to mask: one token"
    state.set_tokens(2)
    assert html_of(learner_page.inputs.mask_note) == "" and learner_page.banner.pane.visible
    assert state.save_run().title == "Mask after softmax (broken)"


@pytest.mark.parametrize("typed", [0, 9, -1, None, True])
def test_an_impossible_token_count_blocks_saving_until_fixed(learner_page, state, typed):
    button = learner_page.record.button
    state.prediction = "token 2 cannot read token 3"
    learner_page.inputs.tokens.value = typed  # what the browser sends
    assert state.tokens == 3 and "is not a token count" in state.tokens_error
    message = learner_page.inputs.tokens_message
    assert message.visible and "role=\"alert\"" in html_of(message)
    assert button.disabled
    assert state.save_run() is None and "Tokens:" in state.save_message
    assert state.store.count() == 0
    learner_page.inputs.tokens.value = 2
    assert (state.tokens, state.tokens_error, button.disabled) == (2, "", False)
    learner_page.inputs.tokens.value = 9
    state.apply_preset("worked_row")  # a preset replaces the bad count too
    assert state.tokens_error == "" and learner_page.inputs.tokens.value == 3 and state.save_run() is not None


def test_the_token_message_names_an_empty_field_and_counts_in_words(state):
    state.set_tokens(1)
    state.set_tokens(None)
    assert state.tokens_error.startswith("Tokens: an empty field is not a token count")
    assert state.tokens_error.endswith("Still showing 1 token.")
    state.set_tokens(2)
    state.set_tokens(0)
    assert state.tokens_error.endswith("Still showing 2 tokens.")


@pytest.mark.parametrize("typed", [0, 9, 4, None])
def test_a_row_outside_the_input_is_refused_in_words_and_the_shown_row_stays(learner_page, typed):
    state = learner_page.state  # 3 tokens, row 2
    learner_page.row.value = typed
    assert state.row == 2
    shown = "an empty field" if typed is None else repr(typed)
    assert state.row_error == (f"Row: {shown} is not a row of this input; choose a row from 1 to 3. "
                               "Still showing row 2.")
    assert learner_page.row_message.visible and state.row_error in learner_page.row_message.object
    learner_page.row.value = 3  # a good row clears the message
    assert state.row == 3 and state.row_error == "" and not learner_page.row_message.visible


def test_a_clicked_row_after_a_refused_one_clears_the_message_and_the_field(learner_page):
    learner_page.row.value = 9
    learner_page.matrices.weights.source.selected.indices = [0]  # a tap on row 1
    assert learner_page.state.row == 1 and learner_page.state.row_error == "" and learner_page.row.value == 1


@pytest.mark.parametrize(("x", "shown"), [
    (1.0, "1.000"), (1 - 1e-12, "1.000"), (0.9999, "0.9999 ✗ not 1"),
    (0.99999999, "0.99999999 ✗ not 1"), (1.0004, "1.0004 ✗ not 1"), (0.269, "0.269 ✗ not 1"),
    (float("nan"), "undefined ✗ not 1"),
])
def test_a_row_sum_off_1_is_shown_with_the_digits_that_show_it_and_the_checks_tolerance(x, shown):
    assert row_sum_html(x) == shown


def test_naive_softmax_readouts_say_undefined_and_qualify_the_future_weight(learner_page):
    learner_page.state.apply_preset("large_scores", failure_mode="naive_softmax")
    text = text_of(readouts_html(learner_page.state.result, True))
    assert "not finite" not in text.replace("weights are not finite numbers", "")
    assert "undefined ✗ not 1" in text
    assert "Total future-token weight: 0 (the future cells only: the other weights are undefined)" in text
    cells = learner_page.matrices.weights.source.data["text"]
    assert "undefined" in cells and "not finite" not in cells


def test_the_same_run_id_twice_in_the_url_is_listed_once(learner_page):
    state = learner_page.state
    state.prediction = "p"
    first = state.save_run()
    state.set_token_text("queries", 2, "2")
    second = state.save_run()
    state.restore_runs([first.id, second.id, first.id, second.id])
    assert [r.id for r in state.saved] == [first.id, second.id]


def test_the_empty_row_note_comes_right_after_the_table_its_row_points_to(learner_page):
    learner_page.state.set_padding(0, True)
    html = readouts_html(learner_page.state.result, True)
    assert "(no visible key: see the note under this table)" in html
    assert html.index("</table>") < html.index("empty-row-note") < html.index("Total future-token weight")


@pytest.mark.parametrize("d_model", [2, 4])
@pytest.mark.parametrize("d_v", [3, 4])
def test_the_default_w_v_gives_no_all_zero_column_of_v_when_d_v_passes_d_model(state, d_v, d_model):
    state.param.update(input_mode="matrices", use_values=True, d_model=d_model, d_v=d_v)
    values = np.asarray(state.result.values)  # V = X W_V, T × d_v
    assert values.shape == (state.tokens, d_v)
    assert np.abs(values).sum(axis=0).min() > 0, values


def test_a_store_that_cannot_be_reached_is_said_in_plain_words_and_its_address_only_logged(postgres_server, caplog):
    """The class's PostgreSQL store gone: the learner is told what was not done and why, without
    the store's address (its server, port and user) or the driver's own words; the operator's
    log has both."""
    import psycopg
    from store_helpers import PAGE_KEY

    from app.store import RunStore

    url = postgres_server.new_database()
    with RunStore(url) as store:
        state = LearnerState(store=store)
        state.take_page_key(PAGE_KEY)
        state.prediction = "p"
        kept = state.save_run()
        assert kept is not None
        with psycopg.connect(f"host=127.0.0.1 port={postgres_server.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{url.rsplit("/", 1)[-1]}" WITH (FORCE)')  # a name made by the fixture
        state.label = "after"
        assert state.save_run() is None and not state.save_ok
        assert state.save_message == "Run not saved: the store cannot be reached just now."
        assert not state.open_run_id(kept.id)
        assert state.open_message == (f"Run not opened: saved run {kept.id!r} could not be read: "
                                      "Runs not read: the store cannot be reached just now.")
        state.take_page_key(PAGE_KEY)  # as a reload does
        assert state.restore_message == ("This page's saved runs could not be listed: "
                                         "Runs not read: the store cannot be reached just now.")
    logged = [r.getMessage() for r in caplog.records if "store error" in r.getMessage()]
    assert len(logged) == 2, logged  # the save's, and the read's (twice the same: logged once)
    assert all(f"127.0.0.1:{postgres_server.port}" in line and "cannot be reached (" in line for line in logged), logged


@pytest.mark.parametrize("in_thread", [False, True], ids=["save_run", "save_run_in_thread"])
def test_a_page_reloaded_while_the_store_was_down_lists_its_runs_at_its_next_save(tmp_path, in_thread):
    """A newcomer reloaded a page during an outage, then saved once the store was back: only the
    new run was listed, as run 1, and the address named it alone."""
    from store_helpers import PAGE_KEY

    store = sqlite_store(tmp_path / "runs")
    before = LearnerState(store=store)
    before.take_page_key(PAGE_KEY)
    before.prediction, before.label = "p", "before the outage"
    assert before.save_run() is not None
    path, away = Path(store.url.database), tmp_path / "away"
    away.mkdir()
    files = [n for n in (path.name, f"{path.name}-wal", f"{path.name}-shm") if (path.parent / n).exists()]
    for name in files:
        (path.parent / name).rename(away / name)
    store.engine.dispose()
    reloaded = LearnerState(store=store)
    reloaded.take_page_key(PAGE_KEY)  # the reload, the store down
    assert reloaded.restore_message.startswith("This page's saved runs could not be listed: ")
    assert reloaded.saved == [] and reloaded.unlisted
    table = runs_table_html(reloaded.saved, unlisted=reloaded.unlisted)  # not "No saved runs yet."
    assert "<caption>Not listed yet: the store did not answer.</caption>" in table
    for name in files:
        (away / name).rename(path.parent / name)
    store.engine.dispose()
    reloaded.prediction, reloaded.label = "p", "after"
    assert (run_async(reloaded.save_run_in_thread()) if in_thread else reloaded.save_run()) is not None
    assert [r.label for r in reloaded.saved] == ["before the outage", "after"]
    assert reloaded.save_message.startswith("Saved run “after” (") and reloaded.restore_message == ""
    assert not reloaded.unlisted
    assert reloaded.owned == [r.id for r in reloaded.saved]


def test_a_save_in_a_thread_that_waits_says_saving_keeps_save_run_off_and_a_press_meanwhile_adds_nothing(
        state, monkeypatch):
    """A served page's save (the store's write in a thread, app/shared/store_calls.py) on a store
    that takes its time: "Saving…" and Save run off once it has waited SAVING_SHOWN_AFTER_S, a
    press meanwhile is that same save, then "Saved"."""
    import threading

    from app.learner.record import RecordView
    from app.shared import store_calls

    state.prediction = "row 2 cannot read token 3"
    view = RecordView(state=state)
    answer, store_save = threading.Event(), state.store.save
    monkeypatch.setattr(state.store, "save", lambda *a, **k: (answer.wait(30), store_save(*a, **k)))
    said = []
    state.param.watch(lambda *events: said.extend((e.name, e.new) for e in events),
                      ["save_pending", "save_message"])

    async def press_twice():
        first = asyncio.ensure_future(state.save_run_in_thread())
        await asyncio.sleep(0)  # the first press has begun: its write waits in a thread
        assert state.saving and store_calls.count() == 1 and said == []  # nothing said yet
        assert await state.save_run_in_thread() is None  # pressed again meanwhile: that save
        for _ in range(500):  # until the page says it waits (SAVING_SHOWN_AFTER_S), 10 s at most
            if state.save_pending:
                break
            await asyncio.sleep(0.02)
        assert state.save_message == "Saving…" and state.save_ok and view.button.disabled
        assert "ok pending" in view.message.object
        answer.set()
        return await first

    record = run_async(press_twice())
    assert [r.id for r in state.store.iter_records()] == [record.id]
    assert said[0] in {("save_pending", True), ("save_message", "Saving…")}
    assert state.save_ok and state.save_message == f"Saved run #1 ({record.id})."
    assert not (state.saving or state.save_pending or view.button.disabled) and store_calls.count() == 0
    assert "ok pending" not in view.message.object
    # Pressed again once it has answered: this run is saved already.
    assert run_async(state.save_run_in_thread()) is None and state.save_message.startswith("Already saved as #1")


def test_a_save_in_a_thread_that_answers_at_once_says_only_saved(state, monkeypatch):
    # One message to the browser for nearly every save, not "Saving…" and then its answer.
    from app.learner import state as learner_state

    monkeypatch.setattr(learner_state, "SAVING_SHOWN_AFTER_S", 30.0)  # however loaded the machine
    state.prediction = "p"
    said = []
    state.param.watch(lambda *events: said.extend((e.name, e.new) for e in events),
                      ["save_pending", "save_message"])
    record = run_async(state.save_run_in_thread())
    assert said == [("save_message", f"Saved run #1 ({record.id}).")]


def test_a_save_in_a_thread_that_fails_says_so_and_turns_save_run_back_on(state, monkeypatch):
    from app.store import StoreError

    state.prediction = "p"
    refused = StoreError("Run not saved: the store /srv/runs.db is full.")
    refused.learner_text = "Run not saved: the store is full."
    monkeypatch.setattr(state.store, "save", lambda *a, **k: (_ for _ in ()).throw(refused))
    assert run_async(state.save_run_in_thread()) is None
    assert (state.save_ok, state.save_message, state.saving) == (False, "Run not saved: the store is full.", False)
    monkeypatch.setattr(state.store, "save", lambda *a, **k: 1 / 0)  # a fault of ours, not the store's
    with pytest.raises(ZeroDivisionError):
        run_async(state.save_run_in_thread())
    assert (state.save_ok, state.saving) == (False, False)
    assert state.save_message == "Run not saved: the server failed (its log says why)."
    assert state.saved == []


def saved_then_reloaded(tmp_path):
    """A store with one run saved by a page, and that page reloaded: its key taken (as
    take_page_key sets it) but its runs not listed yet. Returns (store, the run, the page)."""
    from store_helpers import PAGE_KEY

    store = sqlite_store(tmp_path / "runs")
    before = LearnerState(store=store)
    before.take_page_key(PAGE_KEY)
    before.prediction = "p"
    kept = before.save_run()
    reloaded = LearnerState(store=store, awaiting_key=True)
    reloaded.key_hash = before.key_hash
    return store, kept, reloaded


def test_a_served_pages_own_runs_are_listed_in_a_thread_and_save_run_waits_for_them(tmp_path, monkeypatch):
    """Opened while the store is slow, a page's listing holds no other page (the event loop goes
    on) and Save run waits for it ("still connecting"), then the page's runs are listed."""
    import threading


    store, kept, reloaded = saved_then_reloaded(tmp_path)
    answer, page_runs = threading.Event(), store.page_runs
    monkeypatch.setattr(store, "page_runs", lambda *a, **k: (answer.wait(30), page_runs(*a, **k))[1])

    async def open_while_the_store_is_slow():
        listing = asyncio.ensure_future(reloaded._take_own_runs_in_thread())
        for _ in range(3):
            await asyncio.sleep(0.01)  # the loop goes on while the store is read
        reloaded.prediction = "q"
        assert reloaded.save_run() is None and "still connecting" in reloaded.save_message
        assert reloaded.awaiting_key and reloaded.saved == []
        answer.set()
        await listing

    run_async(open_while_the_store_is_slow())
    assert not reloaded.awaiting_key and [r.id for r in reloaded.saved] == [kept.id]
    assert reloaded.owned == [kept.id]


def test_a_served_page_restores_and_opens_its_links_runs_in_a_thread_as_in_the_loop(state, tmp_path):
    """?runs= and ?run= read in a store thread when a served page opens (a page opening on a slow
    store holds no other page): the same runs, messages and opened inputs as read at once."""
    state.prediction = "p"
    first = state.save_run()
    state.set_token_text("keys", 0, "3")
    second = state.save_run()
    wanted = [second.id, "../secret", "missing-id", first.id]
    at_once, in_thread = (LearnerState(store=state.store) for _ in range(2))
    at_once.restore_runs(wanted)
    assert at_once.open_run_id(first.id) and not at_once.open_run_id("no-such-run")
    run_async(in_thread.restore_runs_in_thread(wanted))
    assert run_async(in_thread.open_run_id_in_thread(first.id))
    assert not run_async(in_thread.open_run_id_in_thread("no-such-run"))
    assert [r.id for r in in_thread.saved] == [r.id for r in at_once.saved] == [first.id, second.id]
    assert in_thread.restore_message == at_once.restore_message != ""
    assert in_thread.open_message == at_once.open_message
    assert in_thread.keys == at_once.keys and in_thread.opened == at_once.opened == first


def test_a_served_page_whose_runs_could_not_be_listed_lists_them_once_the_store_answers(tmp_path, monkeypatch):
    """A newcomer's page opened while the store was down kept "could not be listed" after the
    store was back, until a reload or a save; it now tries again by itself."""

    from app.learner import state as learner_state
    from app.store import StoreError

    monkeypatch.setattr(learner_state, "RELIST_EVERY_S", 0.01)
    store, kept, reloaded = saved_then_reloaded(tmp_path)
    answers, page_runs, said = iter([False, False, True]), store.page_runs, []
    reloaded.param.watch(lambda event: said.append(event.new), "restore_message")

    def down_twice(*args, **kwargs):
        if not next(answers):
            raise StoreError("Runs not read: the store /srv/runs.db cannot be reached.")
        return page_runs(*args, **kwargs)

    monkeypatch.setattr(store, "page_runs", down_twice)
    run_async(reloaded._take_own_runs_in_thread())
    assert said[0].startswith("This page's saved runs could not be listed: ")
    assert said[1] == said[0] + " It tries again by itself."
    assert said[2:] == [""]  # the second failure said nothing new; then the runs, and no message
    assert [r.id for r in reloaded.saved] == [kept.id] and not reloaded.unlisted
    assert reloaded.restore_message == "" and not reloaded.awaiting_key
