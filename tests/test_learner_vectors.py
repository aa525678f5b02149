"""Vector and matrix inputs on the learner page, and a saved run opened again, without a browser.

Each test builds a :class:`LearnerPage` over a runs directory of its own, sets what a widget would
set (one cell's edit, as the browser sends it) and asserts on the state, the views and the
records on disk. The four-token trace (Self-Attention in Matrix Form, "Extend the Four-Token
Trace") and the √d_k scaling of Self-attention ("Common failure modes") are the expected numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from store_helpers import overwrite_record_text, sqlite_store

from app.learner.inputs import grid_layout
from app.learner.page import LearnerPage
from app.learner.projections import shapes_html
from app.learner.runs import runs_table_html
from app.learner.state import EXPOSING_PRESETS, PRESETS, LearnerState, cell_label, number_text
from attention_core import exposure
from attention_core.records import ExperimentRecord, validate_record

V1_RECORDS = Path(__file__).parent / "records_v1"

TRACE_ROW_4 = {"scores": [-0.707, 0.707, 0.0, 1.414], "weights": [0.065, 0.266, 0.131, 0.539],
               "output": [0.592, -1.279]}


@pytest.fixture
def learner(tmp_path):
    return LearnerPage(store=sqlite_store(tmp_path / "runs"))


def type_cell(learner: LearnerPage, label: str, text: str) -> None:
    """Type into the cell named ``label`` as the browser does: the grid sends that cell's edit."""
    for grid in learner.inputs.grids:
        for row in grid.labels if grid.visible else []:
            if label in row:
                grid._handle_msg({"seq": grid.acked + 1, "label": label, "text": text})
                return
    raise AssertionError(f"no visible cell is named {label!r}")


def shown_labels(learner: LearnerPage) -> list[str]:
    return [label for g in learner.inputs.grids if g.visible for row in g.labels for label in row]


def test_cells_are_named_by_token_and_component_and_stay_query_i_at_d_k_1(learner):
    s = learner.state
    assert shown_labels(learner) == ["Query 1", "Key 1", "Query 2", "Key 2", "Query 3", "Key 3"]
    assert learner.inputs.grids[0].check_labels == ["Padding 1", "Padding 2", "Padding 3"]
    s.param.update(d_k=3, use_values=True, d_v=2)
    labels = shown_labels(learner)
    assert "Query 2, component 3" in labels and "Key 3, component 1" in labels
    assert "Value 1, component 2" in labels and "Value 1, component 3" not in labels
    assert len(labels) == 3 * (3 + 3 + 2)
    assert cell_label("x", 1, 0, 2) == "X token 2, component 1"
    assert cell_label("w_v", 0, 1, 2) == "W_V row 1, column 2"


def test_d_k_4_with_values_at_8_tokens_splits_into_grids_no_wider_than_8_numbers(learner):
    s = learner.state
    s.param.update(tokens=8, d_k=4, use_values=True, d_v=4)
    assert grid_layout(s) == [["queries", "keys"], ["values"]]
    assert [len(g.labels[0]) for g in learner.inputs.grids if g.visible] == [8, 4]
    s.param.update(input_mode="matrices", d_model=4)
    assert grid_layout(s) == [["x"], ["w_q", "w_k"], ["w_v"]]
    s.param.update(d_k=2, d_v=2)
    assert grid_layout(s) == [["x"], ["w_q", "w_k", "w_v"]]


def test_changing_d_k_keeps_what_was_typed(learner):
    s = learner.state
    s.d_k = 2
    type_cell(learner, "Query 2, component 2", "0.25")
    assert s.result.queries[1].tolist() == [1.0, 0.25]
    s.d_k = 1
    assert s.result.queries.tolist() == [1.0, 1.0, 1.0]  # one number per token again
    s.d_k = 3
    assert s.queries[1][:3] == ["1", "0.25", "0"] and s.result.queries[1].tolist() == [1.0, 0.25, 0.0]


def test_an_edit_sent_before_a_preset_arrived_changes_only_its_cell_and_is_acknowledged(learner):
    s, grid = learner.state, learner.inputs.grids[0]
    # The browser drew the worked row; the learner clicks All equal, then types into Key 2 before
    # the preset's numbers reach the page. The edit lands on the preset's grid, one cell only.
    s.apply_preset("all_equal")
    grid._handle_msg({"seq": 1, "label": "Key 2", "text": "abc"})
    assert s.keys[:3] == [["2"] + ["0"] * 3, ["abc"] + ["0"] * 3, ["2"] + ["0"] * 3]
    assert s.queries[0][0] == "1" and grid.acked == 1
    assert list(s.field_errors) == ["Key 2"] and "'abc' is not a number" in s.field_errors["Key 2"]
    assert grid.value[:3] == [["1", "2"], ["1", "abc"], ["1", "2"]]
    # A cell the grid no longer has is dropped, but still acknowledged; so is a tick.
    grid._handle_msg({"seq": 2, "label": "Key 7", "text": "5"})
    assert grid.acked == 2 and "5" not in sum(s.keys, [])
    grid._handle_msg({"seq": 3, "tick": 2, "checked": True})
    assert s.padding[:3] == [False, False, True] and grid.acked == 3
    # What the browser sends is untrusted: anything malformed is ignored.
    for msg in (None, "x", {"label": "Key 1", "text": "7"}, {"seq": "4", "label": "Key 1", "text": "7"},
                {"seq": 4, "label": "Key 1", "text": 7}, {"seq": 4, "tick": 99, "checked": True}):
        grid._handle_msg(msg)
    assert s.keys[0][0] == "2" and s.padding[:3] == [False, False, True]


def test_bad_input_in_a_component_is_named_at_its_cell_and_keeps_the_last_result(learner):
    s = learner.state
    s.d_k = 2
    good = s.result
    type_cell(learner, "Key 3, component 2", "1,5")
    assert s.result is good and not s.input_ok
    assert list(s.field_errors) == ["Key 3, component 2"]
    assert s.field_errors["Key 3, component 2"].startswith("Key 3, component 2: '1,5' uses a decimal comma")
    assert learner.inputs.grids[0].errors == s.field_errors
    type_cell(learner, "Key 3, component 2", "1.5")
    assert s.input_ok and learner.inputs.grids[0].errors == {}


def test_a_bad_weight_is_named_by_its_row_and_column(learner):
    s = learner.state
    s.apply_preset("four_token_trace")
    type_cell(learner, "W_K row 2, column 1", "x")
    assert list(s.field_errors) == ["W_K row 2, column 1"]
    assert learner.inputs.grids[1].errors == s.field_errors and learner.inputs.grids[0].errors == {}


def test_the_four_token_trace_preset_gives_the_chapters_numbers_and_saves_them(learner):
    s = learner.state
    s.apply_preset("four_token_trace")
    assert PRESETS["four_token_trace"]["label"] == "Four-token trace (seed 000)"
    r = s.result
    assert (s.input_mode, s.tokens, s.d_model, s.d_k, s.d_v, s.causal) == ("matrices", 4, 2, 2, 2, True)
    assert learner.row.value == s.row == 4  # the chapter traces row 4 (h_4)
    assert np.round(r.scores[3], 3).tolist() == TRACE_ROW_4["scores"]
    assert np.round(r.weights[3], 3).tolist() == TRACE_ROW_4["weights"]
    assert np.round(r.output[3], 3).tolist() == TRACE_ROW_4["output"]
    shown = shapes_html(r)
    assert "Q = X W_Q (4 × 2)" in shown and "V = X W_V (4 × 2)" in shown and "√2" in shown
    s.prediction = "row 4 reads token 4 most"
    record = s.save_run()
    on_disk = json.loads(next(s.store.iter_texts(ids=[record.id])))
    validate_record(on_disk)
    assert on_disk["schema_version"] == 3
    assert on_disk["inputs"]["projection"]["X"] == [[1, 0], [0, 1], [1, 1], [-1, 1]]
    results = on_disk["results"]
    assert np.round(results["scores"][3], 3).tolist() == TRACE_ROW_4["scores"]
    assert np.round(results["weights"][3], 3).tolist() == TRACE_ROW_4["weights"]
    assert np.round(results["output"][3], 3).tolist() == TRACE_ROW_4["output"]


def test_a_preset_about_a_row_chooses_it_and_the_worked_row_is_row_2(learner):
    s = learner.state
    s.apply_preset("four_token_trace")
    assert s.row == 4
    s.apply_preset("worked_row")
    assert s.row == 2
    s.set_row(3)
    s.apply_preset("wide_head")  # its row 2 shows what √4 changes
    assert s.row == 2
    s.set_row(3)
    s.apply_preset("all_equal")  # about no one row: the chosen row stays
    assert s.row == 3


def test_matrix_mode_on_its_own_numbers_is_not_headed_as_the_four_token_trace(learner):
    s = learner.state
    s.input_mode = "matrices"
    shown = shapes_html(s.result)
    assert "Four-Token Trace" not in shown and "formula of Self-Attention in Matrix Form" in shown


def test_a_wide_head_divides_by_2_and_no_scaling_fails_only_its_check(learner):
    s = learner.state
    s.apply_preset("wide_head")
    r = s.result
    q, k = r.queries, r.keys
    assert r.d_k == 4
    np.testing.assert_allclose(r.scores, q @ k.T / 2)
    assert r.failed_checks == ()
    assert "q·k / √4 = q·k / 2" in shapes_html(r)
    correct = r.weights
    s.failure_mode = "no_scaling"
    r = s.result
    np.testing.assert_allclose(r.scores, q @ k.T)
    assert r.failed_checks == ("score_scale",) and exposure(r) is None
    assert r.weights[1, 0] > correct[1, 0]  # the sharper row
    assert "not divided by √d_k = √4 = 2" in shapes_html(r)


def test_no_scaling_at_d_k_1_offers_the_wide_head_preset(learner):
    s = learner.state
    s.failure_mode = "no_scaling"
    assert exposure(s.result) is not None and learner.banner.expose.visible
    assert learner.banner.expose.label == "Load a preset that shows it: Wide head, d_k = 4"
    learner.banner._load_exposing_preset(None)
    assert EXPOSING_PRESETS["no_scaling"] == "wide_head"
    assert s.failure_mode == "no_scaling" and s.d_k == 4 and s.result.failed_checks == ("score_scale",)


def settings_of(s: LearnerState) -> dict:
    """Everything that says what a run is, with each grid cut to the part in use."""
    grids = {}
    for field in s.active_fields():
        rows, width = s.shape(field)
        grids[field] = [row[:width] for row in getattr(s, field)[:rows]]
    names = ("input_mode", "tokens", "d_k", "d_v", "d_model", "use_values", "causal", "failure_mode",
             "learner", "label", "prediction")
    return {**{n: getattr(s, n) for n in names}, "padding": s.padding[:s.tokens], **grids}


@pytest.mark.parametrize("setup", [
    dict(apply="four_token_trace", causal=False, failure_mode="no_mask", padding=2),
    dict(apply="wide_head", use_values=True, d_v=3, failure_mode="no_scaling", padding=1),
    dict(apply="worked_row", failure_mode="mask_after_softmax"),
], ids=["matrix", "vector", "scalar"])
def test_a_saved_run_opens_exactly_as_saved_and_editing_makes_a_new_run(tmp_path, setup):
    store = sqlite_store(tmp_path / "runs")
    a = LearnerState(store=store)
    setup = dict(setup)
    a.apply_preset(setup.pop("apply"))
    padded = setup.pop("padding", None)
    a.param.update(**setup, learner="Ada", label="to reopen", prediction="it will match")
    if padded is not None:
        a.set_padding(padded, True)
    if a.input_mode == "vectors" and a.use_values:
        a.set_token_text("values", 1, "-0.3", component=2)
    saved = a.save_run()
    assert saved is not None, a.save_message
    b = LearnerState(store=store)
    b.apply_preset("large_scores")
    assert b.open_run_id(saved.id)
    assert settings_of(b) == settings_of(a)
    assert b.result.weights.tobytes() == a.result.weights.tobytes()
    assert b.opened is not None and b.opened.id == saved.id and b.open_ok
    assert "Showing saved run “to reopen”" in b.open_message and "makes a new run" in b.open_message
    # Unchanged, it is that saved run: Save run says so instead of saving a copy.
    assert b.save_run() is None and "unchanged" in b.save_message
    b.causal = not b.causal
    assert b.opened_edited and b.open_message.startswith("Edited from saved run")
    again = b.save_run()
    assert again is not None and again.id != saved.id
    assert store.get(saved.id) == saved  # the saved run stays as it was


@pytest.mark.parametrize("name", sorted(p.name for p in V1_RECORDS.glob("v1-*.json")))
def test_a_version_1_record_opens(tmp_path, name):
    store = sqlite_store(tmp_path / "runs")
    record = ExperimentRecord.from_json((V1_RECORDS / name).read_text())
    store.import_records([record])
    assert record.schema_version == 1
    s = LearnerState(store=store)
    assert s.open_run_id(record.id), s.open_message
    run = record.run_inputs
    assert (s.tokens, s.d_k, s.failure_mode, s.causal, s.use_values) == (
        run.T, run.d_k, run.failure_mode, run.causal, run.values is not None)
    assert s.input_mode == "vectors"
    assert s.label == (record.label or "") and s.prediction == (record.prediction or "")
    np.testing.assert_array_equal(s.result.queries.reshape(run.T, -1),
                                  np.array(run.queries, dtype=float).reshape(run.T, -1))
    np.testing.assert_array_equal(s.result.weights, run.compute().maps[0].weights)  # NaN where it was saved so


@pytest.mark.parametrize(("run_id", "words"), [
    ("20250101T000000000000Z-0000000000000000", "no saved run has the id"),
    ("../../etc/passwd", "is not a run id"),
    ("x" * 300, "is not a run id"),
    ("", "is not a run id"),
])
def test_an_unknown_or_malformed_id_gets_a_clear_message_and_changes_nothing(learner, run_id, words):
    s = learner.state
    before = settings_of(s)
    assert not s.open_run_id(run_id)
    assert not s.open_ok and s.open_message.startswith("Run not opened: ") and words in s.open_message
    assert len(s.open_message) < 300
    assert settings_of(s) == before and s.opened is None
    shown = learner.opened.object
    assert "role='alert'" in (shown() if callable(shown) else shown)


def test_an_unreadable_record_gets_a_message_too(learner):
    s = learner.state
    s.prediction = "p"
    run = s.save_run()
    overwrite_record_text(s.store, run.id, "{not json")
    assert not s.open_run_id(run.id)
    assert "could not be read" in s.open_message


def test_each_saved_run_has_an_open_link_keeping_the_pages_runs(learner):
    s = learner.state
    s.prediction = "p"
    first = s.save_run()
    s.causal = False
    second = s.save_run()
    table = runs_table_html(s.saved)
    assert f"href='?run={second.id}&amp;runs={first.id}%2C{second.id}'" in table
    assert "aria-label='Open run 1 in the workbench'" in table


def test_saved_numbers_are_typed_back_exactly():
    for x in (1.0, -0.0, 0.1, 1 / 3, 1e-300, 123456789.125, -2.5e20):
        assert float(number_text(x)) == x
    assert number_text(1.0) == "1" and number_text(-2.0) == "-2"


def test_a_projection_that_overflows_is_named_at_the_token_of_x(learner):
    s = learner.state
    s.apply_preset("four_token_trace")
    good = s.result
    type_cell(learner, "X token 3, component 1", "1e300")
    type_cell(learner, "W_Q row 1, column 1", "1e300")
    assert s.result is good and not s.input_ok
    assert list(s.field_errors) == ["X token 3, component 1"]
    assert "overflows float64 at token 3" in s.field_errors["X token 3, component 1"]
    assert learner.inputs.grids[0].errors == s.field_errors
