"""The workbench's state and views without a browser (the middle test layer of STYLE.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.runs import RunsView
from app.shared.heatmap import contrasting_text, format_number, nice_bound
from app.shared.parsing import clean_text, parse_number
from app.state import WorkbenchState
from app.views import MatricesView
from attention_core.records import validate_record
from attention_core.store import RunStore


@pytest.fixture
def state(tmp_path):
    return WorkbenchState(RunStore(tmp_path / "runs"))


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1.0), ("-.5", -0.5), ("1.", 1.0), ("1e3", 1000.0), ("  2 ", 2.0), ("+3", 3.0),
    ("1E-2", 0.01),
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


def test_worked_row_and_broken_mode_as_the_seed_says(state):
    state.apply_preset("worked_row")
    r = state.result
    assert np.round(r.weights[1], 3).tolist() == [0.269, 0.731, 0.0]
    assert round(float(r.output[1]), 2) == 17.31
    state.mask_after_softmax = True
    r = state.result
    assert r.future_weight.tolist() == [0.0, 0.0, 0.0]
    assert math.isclose(r.row_sums[1], 0.0012457907, rel_tol=1e-6)
    assert set(r.failed_checks) == {"mask", "row_sums"}


def test_bad_input_keeps_the_last_good_result_and_cannot_be_saved(state):
    good = state.result
    state.prediction = "token 2 cannot read token 3"
    state.set_token_text("keys", 1, "abc")
    assert state.result is good and not state.input_ok
    assert state.field_errors == {"Key 2": "Key 2: 'abc' is not a number; type one such as 1 or -0.5"}
    assert state.save_run() is None
    assert state.save_message.startswith("Not saved: fix the highlighted inputs first")
    assert list(state.store.directory.glob("*.json")) == []
    state.set_token_text("keys", 1, "2")
    assert state.input_ok and state.field_errors == {}


def test_score_overflow_is_named_at_the_query(state):
    state.set_token_text("queries", 2, "1e300")
    state.set_token_text("keys", 2, "1e300")
    assert list(state.field_errors) == ["Query 3"]
    assert "overflows float64" in state.field_errors["Query 3"]


def test_token_count_keeps_typed_values(state):
    state.set_token_text("queries", 2, "4.5")
    state.tokens = 1
    assert state.result.T == 1
    state.tokens = 3
    assert state.queries[2] == "4.5" and state.result.queries[2] == 4.5


def test_hidden_fields_do_not_block_the_visible_ones(state):
    state.set_token_text("queries", 2, "oops")
    state.tokens = 2
    assert state.input_ok and state.result.T == 2


def test_save_needs_a_prediction_and_writes_a_valid_record(state):
    assert state.save_run() is None
    assert "write your prediction first" in state.save_message
    state.param.update(prediction="no", learner="Ada", label="<script>alert(1)</script>")
    record = state.save_run()
    assert record is not None and state.save_ok
    on_disk = (state.store.directory / f"{record.id}.json").read_text()
    validate_record(__import__("json").loads(on_disk))
    assert record.label == "<script>alert(1)</script>"  # kept as data, escaped on display
    assert [r.id for r in state.saved] == [record.id]


def test_reset_restores_the_starting_state(state):
    state.apply_preset("large_scores")
    state.param.update(causal=False, mask_after_softmax=True)
    state.apply_preset("reset")
    assert (state.tokens, state.causal, state.mask_after_softmax) == (3, True, False)
    assert state.keys[:3] == ["1", "2", "9"]


def test_large_scores_preset_stays_finite(state):
    state.apply_preset("large_scores")
    r = state.result
    assert np.isfinite(r.weights).all() and np.allclose(r.row_sums, 1.0)
    assert r.scores.max() > 999


def test_heat_map_sources_hold_one_row_per_cell_with_masks_marked(state):
    view = MatricesView(state=state)
    data = view.weights.source.data
    assert len(data["row"]) == 9
    i = [k for k in range(9) if (data["row"][k], data["column"][k]) == ("2", "3")][0]
    assert data["hatch"][i] == "/" and math.isnan(data["value"][i]) and data["state"][i] == "masked"
    assert view.scores.source.data["text"][i].startswith("−∞")
    assert view.weights.y_range.factors == ["3", "2", "1"]  # token 1 on top
    assert (view.weights.mapper.low, view.weights.mapper.high) == (0.0, 1.0)
    assert view.scores.mapper.low == -view.scores.mapper.high  # symmetric diverging range
    shown = state.result.scores[state.result.allowed]
    assert view.scores.mapper.high == nice_bound(float(np.abs(shown).max()))
    state.tokens = 4
    assert len(view.weights.source.data["row"]) == 16
    assert "Weights table" in view.weights.table.text


def test_comparison_shows_both_runs_and_their_difference(state):
    runs = RunsView(state=state)
    state.prediction = "p"
    state.apply_preset("worked_row")
    a = state.save_run()
    state.mask_after_softmax = True
    b = state.save_run()
    assert runs.table.source.data["run"] == ["1", "2"]
    assert runs.table.source.data["id"] == [a.id, b.id]
    runs.table.source.selected.indices = [0, 1]
    assert runs.compare._pane.visible
    wa = np.array(a.results["weights"])
    wb = np.array(b.results["weights"])
    diff = runs.compare.difference.source.data["value"]
    assert np.allclose(np.array(diff).reshape(3, 3), wa - wb)
    assert "0.00125" in runs.compare.summary.object


def test_a_third_tick_says_which_two_runs_are_compared(state):
    runs = RunsView(state=state)
    state.prediction = "p"
    state.apply_preset("worked_row")
    records = [state.save_run()]
    state.mask_after_softmax = True
    records.append(state.save_run())
    state.causal = False  # broken toggle on, causal mask off: nothing to mask
    records.append(state.save_run())
    assert runs.table.source.data["mode"] == [
        "correct, causal", "mask after softmax (broken)",
        "correct, no causal mask (mask after softmax: nothing to mask)"]
    assert "Tick two saved runs" in runs.heading.text
    runs.table.source.selected.indices = [2, 0]
    assert "Comparing run 1 (A) with run 3 (B)." in runs.heading.text
    assert shows_weights_of(runs.compare.first, records[0])
    runs.table.source.selected.indices = [2, 0, 1]
    assert "3 runs are ticked" in runs.heading.text
    assert "run 1 (A) with run 2 (B)" in runs.heading.text
    assert shows_weights_of(runs.compare.second, records[1])
    runs.table.source.selected.indices = [1]
    assert "Tick two saved runs" in runs.heading.text and not runs.compare._pane.visible


def shows_weights_of(heatmap, record) -> bool:
    """Whether ``heatmap`` draws ``record``'s weights (its masked cells are drawn as NaN)."""
    shown = np.nan_to_num(np.array(heatmap.source.data["value"], dtype=float))
    return np.allclose(shown, np.array(record.results["weights"]).ravel())


def test_one_token_in_broken_mode_is_named_and_explained_as_nothing_to_mask(state):
    from app.views import InputsView

    inputs, runs = InputsView(state=state), RunsView(state=state)
    state.prediction = "p"
    state.set_tokens(1)
    state.mask_after_softmax = True
    assert "With one token there is no future token" in inputs.mask_note.object
    assert state.save_run() is not None
    assert runs.table.source.data["mode"] == [
        "correct, causal (mask after softmax: nothing to mask)"]
    state.set_tokens(2)
    assert not inputs.mask_note.visible
    state.save_run()
    assert runs.table.source.data["mode"][1] == "mask after softmax (broken)"


def test_downloads_are_fresh_on_every_call(state):
    runs = RunsView(state=state)
    state.prediction = "p"
    state.save_run()
    first = runs._download("csv").getvalue()
    state.mask_after_softmax = True
    state.save_run()
    second = runs._download("csv").getvalue()
    assert len(second.splitlines()) == len(first.splitlines()) + 1
    assert runs.download_csv.filename.startswith("attention-runs-")


@pytest.mark.parametrize(("x", "text"), [
    (0.269, "0.269"), (0.00125, "0.00125"), (0.0, "0"), (1e-7, "1.00e-07"), (1000.0, "1000.000"),
    (float("nan"), "not finite"),
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
def test_the_scores_colour_range_ends_on_a_round_number_at_or_above_the_largest(x, bound):
    assert nice_bound(x) == bound
    assert nice_bound(x) >= x or not math.isfinite(x) or x <= 0
    assert 0 < nice_bound(x) < math.inf


def test_cell_text_contrasts_with_the_colour_the_cell_is_drawn_in(state):
    view = MatricesView(state=state)
    state.apply_preset("reset")
    state.set_token_text("keys", 2, "6.6")  # score 6.6 of ±10: the second-darkest purple
    data = view.scores.source.data
    at = [n for n in range(9) if (data["row"][n], data["column"][n]) == ("3", "3")][0]
    assert data["text_color"][at] == "white"
    for heat_map in (view.scores, view.weights):
        data, mapper = heat_map.source.data, heat_map.mapper
        for n, value in enumerate(data["value"]):
            if math.isnan(value):
                continue
            k = len(mapper.palette)
            drawn = mapper.palette[min(int((value - mapper.low) / (mapper.high - mapper.low) * k), k - 1)]
            assert data["text_color"][n] == contrasting_text(drawn), (heat_map.title, n, value)
    assert contrasting_text("#ffffff") == "black" and contrasting_text("#000000") == "white"
    assert contrasting_text("#542788") == "white"  # PuOr's dark purple, which had black text


def test_an_edit_within_the_round_bound_keeps_the_scores_colours_where_they_were(state):
    view = MatricesView(state=state)
    state.apply_preset("worked_row")  # scores up to 9: the colour bar runs from -10 to 10
    assert (view.scores.mapper.low, view.scores.mapper.high) == (-10.0, 10.0)
    state.set_token_text("queries", 2, "1.05")  # row 3 now scores up to 9.45
    assert state.result.scores[2, 2] == pytest.approx(9.45)
    assert (view.scores.mapper.low, view.scores.mapper.high) == (-10.0, 10.0)
    state.set_token_text("queries", 2, "1.2")  # 10.8: past the bound, so the next round one
    assert (view.scores.mapper.low, view.scores.mapper.high) == (-20.0, 20.0)


def test_a_full_or_read_only_store_says_not_saved_and_the_app_keeps_working(state, monkeypatch):
    from attention_core.store import StoreError

    state.prediction = "p"
    kept = state.save_run()

    def refuse(record):
        raise StoreError("Run not saved: the runs directory /srv/runs is full.")

    monkeypatch.setattr(state.store, "save", refuse)
    state.label = "second"
    assert state.save_run() is None
    assert state.save_message == "Run not saved: the runs directory /srv/runs is full."
    assert not state.save_ok and [r.id for r in state.saved] == [kept.id]
    state.set_token_text("keys", 0, "3")  # still computing
    assert state.input_ok and state.result.keys[0] == 3.0
    monkeypatch.undo()
    assert state.save_run() is not None and state.save_ok  # keys changed since the kept run


def test_comparison_marks_only_the_cells_a_run_itself_masked():
    from app.shared.compare import masked_cells
    from attention_core import scaled_dot_product_attention
    from attention_core.records import ExperimentRecord

    def record(**kw):
        return ExperimentRecord.from_result(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], **kw))

    future = np.triu(np.ones((3, 3), dtype=bool), k=1)
    assert (masked_cells(record()) == future).all()
    assert (masked_cells(record(mask_after_softmax=True)) == future).all()
    assert not masked_cells(record(failure_mode="no_mask")).any()  # its future cells carry weight
    assert not masked_cells(record(causal=False)).any()


def test_a_double_clicked_save_does_not_save_the_same_run_twice(state):
    state.prediction = "p"
    first = state.save_run()
    assert first is not None
    assert state.save_run() is None
    assert state.save_message == ("Not saved: this run is already saved as #1; change an input, "
                                  "a toggle or the text to save another")
    assert len(list(state.store.directory.glob("*.json"))) == 1
    state.label = "again"
    assert state.save_run() is not None and len(state.saved) == 2


def test_restore_runs_takes_back_saved_runs_and_skips_anything_else(state, tmp_path):
    state.prediction = "p"
    first = state.save_run()
    state.label = "second"
    second = state.save_run()
    (tmp_path / "secret.json").write_text("{}")
    fresh = WorkbenchState(state.store)
    fresh.restore_runs([second.id, "../secret", "/etc/passwd", "%2e%2e%2fsecret", "missing-id", first.id])
    assert [r.id for r in fresh.saved] == [first.id, second.id]


def test_a_toggle_click_changes_only_its_own_box(state):
    # The browser sends one box's change; the others keep the server's state even if the page
    # had not yet received the latest (e.g. a preset's) when the click was made.
    from app.views import InputsView

    toggles = InputsView(state=state).toggles
    state.apply_preset("worked_row")
    assert (state.use_values, state.causal, state.mask_after_softmax) == (True, True, False)
    toggles._handle_msg({"index": 2, "checked": True})
    assert (state.use_values, state.causal, state.mask_after_softmax) == (True, True, True)
    toggles._handle_msg({"index": 1, "checked": False})
    assert (state.use_values, state.causal, state.mask_after_softmax) == (True, False, True)
    assert toggles.value == [True, False, True]
    for junk in ({"index": 7, "checked": True}, {"index": "1"}, ["causal"], None):
        toggles._handle_msg(junk)
    assert toggles.value == [True, False, True]


@pytest.mark.parametrize("typed", [0, 9, -1, None, True])
def test_an_impossible_token_count_blocks_saving_until_fixed(state, typed):
    from app.runs import SaveView

    runs = SaveView(state=state)
    state.prediction = "token 2 cannot read token 3"
    state.set_tokens(typed)
    assert state.tokens == 3 and "is not a token count" in state.tokens_error
    assert runs.button.disabled
    assert state.save_run() is None and "Tokens:" in state.save_message
    assert state.store.list().records == []
    state.set_tokens(2)
    assert (state.tokens, state.tokens_error, runs.button.disabled) == (2, "", False)
    state.set_tokens(9)
    state.apply_preset("worked_row")  # a preset replaces the bad count too
    assert state.tokens_error == "" and state.save_run() is not None


def test_the_token_message_names_an_empty_field_and_counts_in_words(state):
    state.set_tokens(1)
    state.set_tokens(None)
    assert state.tokens_error.startswith("Tokens: an empty field is not a token count")
    assert state.tokens_error.endswith("Still showing 1 token.")
    state.set_tokens(2)
    state.set_tokens(0)
    assert state.tokens_error.endswith("Still showing 2 tokens.")


def test_the_stale_notice_points_at_the_heat_maps_and_readouts(state):
    from app.views import ReadoutsView

    readouts = ReadoutsView(state=state)
    state.set_token_text("keys", 1, "abc")
    assert not state.input_ok
    assert "the heat maps and these readouts still show the last valid input" in readouts.table.text
