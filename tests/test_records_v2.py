"""Experiment records, schema version 2 (issue 14): vectors, matrix mode (X, W_Q, W_K, W_V,
d_model), d_v, as new saves (now version 3, which keeps every version-2 key) and as real
version-2 files (tests/records_v2); version-1 records (real files in tests/records_v1) still
read, shown, compared, exported, updated and opened everywhere."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import fields
from datetime import timedelta
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from store_helpers import OWNER, T0, changed_copy, check_strict, refuse_constant

from app.cli import main
from app.instructor import InstructorState
from app.instructor.table import runs_frame
from app.shared.compare import ComparisonView
from app.store import CSV_COLUMNS, NotOwnerError, RunStore, RunSummary, export_csv, export_json, iter_csv, sqlite_url
from app.store.importing import import_paths
from attention_core import FAILURE_MODES, scaled_dot_product_attention, self_attention
from attention_core.records import (
    SCHEMA_VERSION,
    ExperimentRecord,
    RecordError,
    RunInputs,
    validate_record,
)

V1_DIR = Path(__file__).resolve().parent / "records_v1"
V1_FILES = sorted(V1_DIR.glob("*.json"))
V2_DIR = Path(__file__).resolve().parent / "records_v2"
V2_FILES = sorted(V2_DIR.glob("*.json"))
TEXT = ("learner", "label", "prediction", "explanation", "notes")

# Self-Attention in Matrix Form, "Extend the Four-Token Trace".
X = [[1, 0], [0, 1], [1, 1], [-1, 1]]
W_QK = [[1, 0], [0, 1]]
W_V = [[1, 1], [1, -1]]


def trace(**settings):
    return self_attention(X, W_QK, W_QK, W_V, **settings)


def v1_records() -> list[ExperimentRecord]:
    return [ExperimentRecord.from_json(path.read_bytes()) for path in V1_FILES]


def reopened(record: ExperimentRecord) -> ExperimentRecord:
    """The record a page makes when it opens ``record`` and saves it again unchanged."""
    inputs = record.run_inputs
    return ExperimentRecord.from_result(
        inputs.compute(), record_id=record.id, created_at=record.created_datetime,
        **{field: getattr(inputs, field) for field in TEXT},
    )


V3_ONLY = {"inputs": ("batch", "ablation"), "settings": ("causal_alignment",), "results": ("y", "maps", "ablation")}


def assert_same_run(old: dict, again: dict) -> None:
    """``again`` (a version-3 record of the run ``old`` was, computed now) holds every key of
    ``old`` (version 1 or 2) with the same value, but for the versions and the checks: the core
    now makes 10 checks where ``old`` holds 7, and those 7 are the same by name."""
    again, old = dict(again), dict(old)
    for key in ("schema_version", "app_version"):
        again.pop(key), old.pop(key)
    for part, keys in V3_ONLY.items():
        again[part] = {k: v for k, v in again[part].items() if k not in keys}
        if part == "inputs" and again["inputs"].get("projection"):
            again["inputs"]["projection"] = {k: v for k, v in again["inputs"]["projection"].items()
                                             if k not in ("W_O", "X_kv")}
    checks = {c["name"]: c for c in again["results"].pop("checks")}
    old_checks = old["results"].pop("checks")
    assert len(old_checks) == 7 and len(checks) == 10
    assert {c["name"]: c for c in old_checks} == {n: checks[n] for n in (c["name"] for c in old_checks)}
    assert set(checks) - {c["name"] for c in old_checks} == {"projections", "output_projection",
                                                               "batch_independence"}
    assert again == old


RESULTS = {
    "scalar": lambda: scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100]),
    "scalar, no values": lambda: scaled_dot_product_attention([1.0, 2.0], [3.0, -1.0]),
    "vector d_k=4 d_v=1": lambda: scaled_dot_product_attention(
        np.arange(12.0).reshape(3, 4) / 7, -np.arange(12.0).reshape(3, 4) / 5, [[1.0], [2.0], [3.0]]),
    "vector d_k=1 as a column": lambda: scaled_dot_product_attention([[1.0], [2.0]], [[0.5], [1 / 3]]),
    "matrix (four-token trace)": trace,
    "matrix, padding, no W_V": lambda: self_attention(X, W_QK, W_QK, padding_mask=[True, False, True, True]),
    "matrix d_model=3 d_k=1 d_v=4": lambda: self_attention(
        [[0.1, 0.2, 0.3]] * 2, [[1.0], [2.0], [3.0]], [[-1.0], [0.0], [1e-300]], np.ones((3, 4)) / 3,
        causal=False),
}
MODES_OF_INPUT = {"scalar": "scalar", "scalar, no values": "scalar", "vector d_k=4 d_v=1": "vector",
                  "vector d_k=1 as a column": "vector", "matrix (four-token trace)": "matrix",
                  "matrix, padding, no W_V": "matrix", "matrix d_model=3 d_k=1 d_v=4": "matrix"}


# --- version 2: round trip, schema, what is added -------------------------------------------


@pytest.mark.parametrize("case", RESULTS)
def test_v2_records_round_trip_exactly_and_are_schema_valid(case):
    result = RESULTS[case]()
    record = check_strict(ExperimentRecord.from_result(
        result, learner="Ada", label=case, prediction="p", explanation="e", notes="n", created_at=T0))
    assert record.schema_version == SCHEMA_VERSION == 3  # new saves are version 3 (issue 23)
    assert record.inputs["d_v"] == result.d_v
    assert record.d_k == result.d_k
    assert record.run_inputs.input_mode == result.input_mode == MODES_OF_INPUT[case]
    assert record.inputs["queries"] == result.queries.tolist()  # vectors as lists of lists
    projection = record.inputs["projection"]
    if result.projection is None:
        assert projection is None and record.d_model is None
    else:
        p = result.projection
        assert projection == {"X": p.x.tolist(), "W_Q": p.w_q.tolist(), "W_K": p.w_k.tolist(),
                              "W_V": None if p.w_v is None else p.w_v.tolist(), "d_model": p.d_model,
                              "W_O": None, "X_kv": None}
        assert record.d_model == p.d_model


def test_the_four_token_trace_record_holds_the_chapters_numbers():
    record = check_strict(ExperimentRecord.from_result(trace(), label="four-token trace"))
    results = record.results
    assert [round(x, 3) for x in results["scores"][3]] == [-0.707, 0.707, 0.0, 1.414]
    assert [round(x, 3) for x in results["weights"][3]] == [0.065, 0.266, 0.131, 0.539]
    assert [round(x, 3) for x in results["output"][3]] == [0.592, -1.279]
    assert record.inputs["projection"]["X"] == [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 1.0]]
    assert (record.T, record.d_k, record.inputs["d_v"], record.d_model) == (4, 2, 2, 2)


@pytest.mark.parametrize("mode", list(FAILURE_MODES))
def test_every_failure_mode_in_matrix_mode_makes_a_valid_v2_record(mode):
    result = trace(failure_mode=mode, padding_mask=[True, True, False, True])
    record = check_strict(ExperimentRecord.from_result(result))
    assert record.failure_mode == mode and record.failed_checks == result.failed_checks
    assert record.inputs["padding_mask"] == [True, True, False, True]
    assert reopened(record) == record


def test_from_result_keeps_its_keyword_arguments():
    record = ExperimentRecord.from_result(trace(), learner="L", label="B", prediction="P",
                                          explanation="E", notes="N", record_id="run-1", created_at=T0)
    assert (record.id, record.created_datetime) == ("run-1", T0)
    assert [getattr(record, f) for f in TEXT] == ["L", "B", "P", "E", "N"]


# --- reading a run back: RunInputs ----------------------------------------------------------


@pytest.mark.parametrize("case", RESULTS)
def test_run_inputs_give_the_run_back_exactly_as_saved(case):
    result = RESULTS[case]()
    record = check_strict(ExperimentRecord.from_result(result, learner="Ada", explanation="why"))
    inputs = record.run_inputs
    assert isinstance(inputs, RunInputs)
    assert (inputs.schema_version, inputs.T, inputs.d_k, inputs.d_v) == (3, result.T, result.d_k, result.d_v)
    assert (inputs.causal, inputs.failure_mode, inputs.learner, inputs.explanation) == (
        result.causal, result.mode.name, "Ada", "why")
    assert np.array_equal(np.array(inputs.queries), result.queries)
    if result.projection is not None:
        assert inputs.d_model == result.projection.d_model
        assert np.array_equal(np.array(inputs.x), result.projection.x)
    else:
        assert inputs.x is inputs.w_q is inputs.w_k is inputs.w_v is inputs.d_model is None
    # Opening the run and saving it unchanged gives the same record, results to the last bit.
    assert reopened(record) == record


def test_run_inputs_are_immutable_and_do_not_share_the_records_lists():
    record = ExperimentRecord.from_result(trace())
    inputs = record.run_inputs
    assert isinstance(inputs.x, tuple) and isinstance(inputs.x[0], tuple)
    with pytest.raises(AttributeError):
        inputs.T = 3  # type: ignore[misc]
    assert {f.name for f in fields(RunInputs)} >= {"input_mode", "T", "d_k", "d_v", "d_model", "x", "w_q",
                                                     "w_k", "w_v", "padding_mask", "causal", "failure_mode"}


# --- version 1: real files from the v1 workbench ---------------------------------------------


def test_the_v1_fixtures_are_v1():
    assert len(V1_FILES) == 4
    for path in V1_FILES:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse_constant)
        assert data["schema_version"] == 1 and "d_v" not in data["inputs"]
        validate_record(data)


@pytest.mark.parametrize("path", V1_FILES, ids=[p.stem for p in V1_FILES])
def test_v1_records_are_read_and_round_trip_as_version_1(path):
    record = check_strict(ExperimentRecord.from_json(path.read_bytes()))
    assert record.schema_version == 1
    assert record.to_dict() == json.loads(path.read_text(encoding="utf-8"))
    assert record.d_model is None and record.d_k == record.inputs["d_k"]
    summary = RunSummary.of(record)
    assert (summary.T, summary.d_k, summary.d_model) == (record.T, record.d_k, None)


@pytest.mark.parametrize("path", V1_FILES, ids=[p.stem for p in V1_FILES])
def test_v1_records_open_again_with_the_same_numbers(path):
    old = ExperimentRecord.from_json(path.read_bytes())
    inputs = old.run_inputs
    assert inputs.schema_version == 1 and inputs.d_model is None
    assert inputs.input_mode == ("vector" if "vector" in path.stem else "scalar")
    again = reopened(old).to_dict()  # saved again now: version 3 with the same numbers
    assert again["schema_version"] == 3 and again["inputs"].pop("projection") is None
    assert again["inputs"].pop("d_v") == inputs.d_v
    assert_same_run(old.to_dict(), again)


def test_the_v1_worked_row_reads_as_the_lesson_writes_it():
    record = ExperimentRecord.from_json((V1_DIR / "v1-worked-row-scalar.json").read_bytes())
    assert [round(w, 3) for w in record.results["weights"][1]] == [0.269, 0.731, 0.0]
    assert round(record.results["output"][1], 2) == 17.31
    assert record.run_inputs.explanation.startswith("The causal mask")


# --- version 2: real files from the v2 workbench ---------------------------------------------


def test_the_v2_fixtures_are_v2():
    assert len(V2_FILES) == 4
    for path in V2_FILES:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse_constant)
        assert data["schema_version"] == 2 and len(data["results"]["checks"]) == 7
        assert "batch" not in data["inputs"] and "causal_alignment" not in data["settings"]
        validate_record(data)


@pytest.mark.parametrize("path", V2_FILES, ids=[p.stem for p in V2_FILES])
def test_v2_records_are_read_and_round_trip_as_version_2(path):
    record = check_strict(ExperimentRecord.from_json(path.read_bytes()))
    assert record.schema_version == 2
    assert record.to_dict() == json.loads(path.read_text(encoding="utf-8"))
    assert (record.B, record.T_k, record.d_v) == (1, record.T, record.inputs["d_v"])
    assert (record.has_w_o, record.cross_attention, record.causal_alignment, record.ablation_target) == (
        False, False, None, None)
    assert record.maps == [record.results]
    summary = RunSummary.of(record)
    assert (summary.T, summary.d_k, summary.d_model, summary.B, summary.T_k) == (
        record.T, record.d_k, record.d_model, 1, record.T)


@pytest.mark.parametrize("path", V2_FILES, ids=[p.stem for p in V2_FILES])
def test_v2_records_open_again_with_the_same_numbers(path):
    old = ExperimentRecord.from_json(path.read_bytes())
    inputs = old.run_inputs
    assert (inputs.schema_version, inputs.B, inputs.T_k, inputs.w_o, inputs.x_kv) == (2, 1, old.T, None, None)
    assert inputs.causal_alignment is None and inputs.ablation is None
    assert inputs.input_mode == ("matrix" if "matrix" in path.stem else "vector" if "vector" in path.stem
                                 else "scalar")
    if inputs.input_mode == "matrix":
        assert inputs.batch == (inputs.x,) and inputs.batch_kv is None
    assert inputs.padding == (None if inputs.padding_mask is None else (inputs.padding_mask,))
    layer = inputs.compute()
    assert layer.B == 1 and len(layer.checks) == 10
    assert inputs.compute_ablation(layer) is None
    assert_same_run(old.to_dict(), reopened(old).to_dict())


# --- what each version may hold: the fast check and the schema agree --------------------------


def _v2() -> dict:
    """A real version-2 record of matrix mode (the four-token trace, written by 7b9f60a)."""
    return json.loads((V2_DIR / "v2-matrix-trace.json").read_text(encoding="utf-8"))


SCHEMA_REFUSES = {
    "v2 without d_v": (("inputs", "d_v"), KeyError),
    "v2 without projection": (("inputs", "projection"), KeyError),
    "d_v as text": (("inputs", "d_v"), "2"),
    "d_v zero": (("inputs", "d_v"), 0),
    "projection not an object": (("inputs", "projection"), [1]),
    "projection without X": (("inputs", "projection", "X"), KeyError),
    "projection with an extra key": (("inputs", "projection", "W_O"), [[1.0]]),
    "X as numbers": (("inputs", "projection", "X"), [1.0, 2.0, 3.0, 4.0]),
    "W_Q with text": (("inputs", "projection", "W_Q", 0, 0), "1"),
    "W_K with null": (("inputs", "projection", "W_K", 1, 1), None),
    "d_model zero": (("inputs", "projection", "d_model"), 0),
    "d_model as bool": (("inputs", "projection", "d_model"), True),
}


@pytest.mark.parametrize("case", SCHEMA_REFUSES)
def test_the_schema_and_the_fast_check_refuse_the_same_broken_v2_records(case):
    path, value = SCHEMA_REFUSES[case]
    broken = changed_copy(_v2(), path, value)
    with pytest.raises(jsonschema.ValidationError):
        validate_record(broken)
    with pytest.raises(RecordError):
        ExperimentRecord.from_dict(broken)


def test_a_v1_record_may_not_hold_v2_keys():
    data = json.loads((V1_DIR / "v1-vector-padding.json").read_text(encoding="utf-8"))
    data["inputs"] |= {"d_v": 3, "projection": None}
    with pytest.raises(jsonschema.ValidationError):
        validate_record(data)
    with pytest.raises(RecordError, match="inputs"):
        ExperimentRecord.from_dict(data)


# Shapes a schema cannot say: the fast check names the key.
SHAPES = {
    "d_v not the values' width": (("inputs", "d_v"), 3, "inputs.d_v"),
    "d_v beside no values": (("inputs", "d_v"), None, "inputs.d_v"),
    "X with a row short": (("inputs", "projection", "X"), [[1.0, 0.0]] * 3, "inputs.projection.X"),
    "X wider than d_model": (("inputs", "projection", "X"), [[1.0, 0.0, 0.0]] * 4, "inputs.projection.X"),
    "W_Q rows not d_model": (("inputs", "projection", "W_Q"), [[1.0, 0.0]] * 3, "inputs.projection.W_Q"),
    "W_K not d_k wide": (("inputs", "projection", "W_K"), [[1.0], [0.0]], "inputs.projection.W_K"),
    "W_V not d_v wide": (("inputs", "projection", "W_V"), [[1.0], [0.0]], "inputs.projection.W_V"),
    "W_V null beside values": (("inputs", "projection", "W_V"), None, "inputs.projection.W_V"),
    "d_model not X's width": (("inputs", "projection", "d_model"), 3, "inputs.projection"),
}


@pytest.mark.parametrize("case", SHAPES)
def test_the_fast_check_refuses_v2_shapes_a_schema_cannot_see(case):
    path, value, where = SHAPES[case]
    broken = changed_copy(_v2(), path, value)
    validate_record(broken)
    with pytest.raises(RecordError, match=where.replace(".", r"\.")):
        ExperimentRecord.from_dict(broken)


def test_matrix_mode_needs_one_row_per_token_in_the_projections():
    scalar = ExperimentRecord.from_result(scaled_dot_product_attention([1.0, 2.0], [3.0, 4.0])).to_dict()
    scalar["inputs"]["projection"] = {"X": [[1.0], [2.0]], "W_Q": [[1.0]], "W_K": [[1.0]], "W_V": None,
                                      "d_model": 1, "W_O": None, "X_kv": None}
    validate_record(scalar)
    with pytest.raises(RecordError, match="inputs.queries"):
        ExperimentRecord.from_dict(scalar)


# --- everywhere records go: store, summaries, exports, CLI, comparison, instructor -----------


@pytest.fixture
def mixed_store(tmp_path) -> tuple[RunStore, list[ExperimentRecord]]:
    """A store holding the v1 and v2 files (imported as they are) and runs saved by this
    workbench (version 3)."""
    store = RunStore(sqlite_url(tmp_path / "runs.db"))
    assert import_paths(store, V1_FILES + V2_FILES).total("imported") == len(V1_FILES) + len(V2_FILES)
    for n, (case, make) in enumerate(RESULTS.items()):
        store.save(ExperimentRecord.from_result(make(), label=case, learner="Lin",
                                                created_at=T0 + timedelta(minutes=n)))
    records = list(store.iter_records())
    assert len(records) == len(V1_FILES) + len(V2_FILES) + len(RESULTS)
    for text in store.iter_texts():
        validate_record(json.loads(text))
    return store, records


def test_the_store_lists_and_summarises_both_versions(mixed_store):
    store, records = mixed_store
    assert sorted(r.schema_version for r in records) == [1] * 4 + [2] * 4 + [3] * len(RESULTS)
    summaries = store.query().runs
    assert summaries == [RunSummary.of(r) for r in records]
    assert list(store.iter_summaries()) == summaries
    assert "".join(iter_csv(store.iter_csv_rows())) == export_csv(summaries)
    by_label = {s.label: s for s in summaries}
    assert (by_label["matrix (four-token trace)"].d_k, by_label["matrix (four-token trace)"].d_model) == (2, 2)
    assert (by_label["vector d_k=4 d_v=1"].d_k, by_label["vector d_k=4 d_v=1"].d_model) == (4, None)
    assert by_label["worked row"].d_k == 1 and by_label["worked row"].d_model is None


def test_the_stores_columns_hold_d_k_and_d_model(mixed_store):
    store, records = mixed_store
    fresh = RunStore(store.url, create=False)  # another process opening the same store
    assert {s.id: (s.d_k, s.d_model) for s in fresh.query().runs} == {r.id: (r.d_k, r.d_model) for r in records}
    assert fresh.query(sort=[("d_k", "desc")]).runs[0].d_k == max(r.d_k for r in records)


def test_an_explanation_attached_to_a_v1_run_keeps_it_version_1(mixed_store):
    store, records = mixed_store
    with pytest.raises(NotOwnerError):  # imported: no page holds the key it was saved with
        store.update_explanation("v1-broken-scalar", "Mine now?", key_hash=OWNER)
    # The same run as its page had saved it, in a store of its own.
    store = RunStore(sqlite_url(store.url.database.replace("runs.db", "own.db")))
    store.save(next(r for r in records if r.id == "v1-broken-scalar"), key_hash=OWNER)
    updated = store.update_explanation("v1-broken-scalar", "Zeroing after softmax leaves rows short of 1.",
                                       key_hash=OWNER)
    assert updated.schema_version == 1
    on_disk = json.loads(next(store.iter_texts(ids=["v1-broken-scalar"])))
    original = json.loads((V1_DIR / "v1-broken-scalar.json").read_text(encoding="utf-8"))
    assert on_disk == original | {"explanation": "Zeroing after softmax leaves rows short of 1."}
    validate_record(on_disk)


def test_json_export_writes_each_record_as_it_is(mixed_store):
    _, records = mixed_store
    bundle = json.loads(export_json(records), parse_constant=refuse_constant)
    assert bundle["schema_version"] == 3  # the newest version the bundle may hold
    for data in bundle["runs"]:
        validate_record(data)
    originals = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in V1_FILES + V2_FILES}
    old = [d for d in bundle["runs"] if d["schema_version"] in (1, 2)]
    assert {d["id"]: d for d in old} == originals  # v1 stays v1 and v2 v2, byte for byte in content
    assert [ExperimentRecord.from_dict(d) for d in bundle["runs"]] == records


def test_csv_export_appends_d_k_and_d_model(mixed_store):
    _, records = mixed_store
    assert CSV_COLUMNS[15:18] == ("mode", "d_k", "d_model")  # the complete layer's sizes follow them
    rows = list(csv.DictReader(io.StringIO(export_csv(records), newline="")))
    assert [row["id"] for row in rows] == [r.id for r in records]
    by_label = {row["label"]: row for row in rows}
    assert (by_label["matrix (four-token trace)"]["d_k"], by_label["matrix (four-token trace)"]["d_model"]) == (
        "2", "2")
    assert (by_label["matrix d_model=3 d_k=1 d_v=4"]["d_k"], by_label["matrix d_model=3 d_k=1 d_v=4"]["d_model"]) == (
        "1", "3")
    assert (by_label["d_k = 2, padded"]["d_k"], by_label["d_k = 2, padded"]["d_model"]) == ("2", "")
    assert (by_label["worked row"]["T"], by_label["worked row"]["d_k"]) == ("3", "1")
    # The summaries a listing gives export the same CSV as the full records.
    assert export_csv([RunSummary.of(r) for r in records]) == export_csv(records)


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_export_command_takes_a_mix_of_versions(mixed_store, capsys, fmt):
    store, records = mixed_store
    assert main(["export", "--store", store.url.render_as_string(), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert f"exported {len(records)} runs" in err
    if fmt == "json":
        runs = json.loads(out, parse_constant=refuse_constant)["runs"]
        assert [r["schema_version"] for r in runs] == [r.schema_version for r in records]
    else:
        rows = list(csv.DictReader(io.StringIO(out, newline="")))
        assert [(row["id"], row["d_k"], row["d_model"]) for row in rows] == [
            (r.id, str(r.d_k), "" if r.d_model is None else str(r.d_model)) for r in records]


def test_comparison_takes_a_v1_and_a_v2_run(mixed_store):
    _, records = mixed_store
    by_label = {r.label: r for r in records}
    view = ComparisonView()
    view.show([by_label["worked row"], by_label["scalar"]])  # same T: a difference map
    assert view.difference.visible and "different token counts" not in view.summary.object
    view.show([by_label["d_k = 2, padded"], by_label["matrix (four-token trace)"]])  # both T = 4
    assert view.difference.visible
    view.show([by_label["worked row"], by_label["matrix (four-token trace)"]])
    assert not view.difference.visible and "different token counts" in view.summary.object
    view.show([by_label["v2 four-token trace"], by_label["matrix (four-token trace)"]])  # v2 and v3
    assert view.difference.visible


def test_the_instructor_page_lists_both_versions_with_d_k_and_d_model(mixed_store):
    store, records = mixed_store
    state = InstructorState(store=store)
    assert {r.id for r in state.filtered()} == {r.id for r in records}
    frame = runs_frame(state.page_runs, state)
    rows = {row["label"]: row for row in frame.to_dict("records")}
    assert (rows["matrix (four-token trace)"]["tokens"], rows["matrix (four-token trace)"]["d_k"],
            rows["matrix (four-token trace)"]["d_model"]) == ("4", "2", "2")  # as the page writes them
    assert rows["worked row"]["d_k"] == "1" and rows["worked row"]["d_model"] == "—"  # a v1 run has no d_model
    for r in state.filtered():
        state.select(r.id)
    assert len(state.compared) == 2 and all(isinstance(r, ExperimentRecord) for r in state.compared)
    bundle = json.loads(state.export("json"), parse_constant=refuse_constant)
    assert sorted(d["id"] for d in bundle["runs"]) == sorted(r.id for r in records)
    for data in bundle["runs"]:
        validate_record(data)
    rows = list(csv.DictReader(io.StringIO(state.export("csv"), newline="")))
    assert {row["id"]: row["d_k"] for row in rows} == {r.id: str(r.d_k) for r in records}
