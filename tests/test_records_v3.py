"""Experiment records, schema version 3 (issue 23, Review, "The Complete Layer"): W_O and Y, the
batch, cross-attention with its causal alignment, an ablation; exact round trips, reopening a
run to the same record, the shape rules naming the field, and everywhere records go (store,
summaries, CSV, exports, import, comparison)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from store_helpers import T0, changed_copy, check_strict, refuse_constant

from app.shared.compare import ComparisonView, run_size, size_difference
from app.store import CSV_COLUMNS, RunStore, RunSummary, export_csv, export_json, iter_csv, sqlite_url
from app.store.importing import import_data
from attention_core import FAILURE_MODES, scaled_dot_product_attention, self_attention
from attention_core.ablation import ABLATION_CHANGES, ABLATION_TARGETS, ablate
from attention_core.checks import CHECK_NAMES
from attention_core.layer import LayerResult, attention_layer
from attention_core.records import SCHEMA_VERSION, ExperimentRecord, RecordError, validate_record

TEXT = ("learner", "label", "prediction", "explanation", "notes")
# Self-Attention in Matrix Form, "Extend the Four-Token Trace", and a second sequence.
X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 1.0]]
X2 = [[0.5, -1.0], [2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]  # three tokens, the last one padding
W_QK = [[1.0, 0.0], [0.0, 1.0]]
W_V = [[1.0, 1.0], [1.0, -1.0]]
W_V3 = [[1.0, 0.0, 2.0], [0.5, -1.0, 1.0]]  # d_v = 3
W_O = [[2.0, 0.0], [1.0, 1.0]]
W_O3 = [[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]  # d_v × d_model = 3 × 2
PADDED = [[True, True, True, True], [True, True, True, False]]


def batch(**settings) -> LayerResult:
    """Two sequences of four and three tokens (padded) sharing every W, with W_O."""
    return attention_layer([X, X2], W_QK, W_QK, W_V, W_O, padding_mask=PADDED, **settings)


def with_ablation(target="W_V", change="scale", **kwargs):
    layer = batch()
    return layer, ablate(layer, target, change, **({"factor": 2.0} if change == "scale" else {}) | kwargs)


CASES = {
    "scalar": lambda: scaled_dot_product_attention([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0]),
    "vector, cross-attention top-left": lambda: scaled_dot_product_attention(
        [[1.0, 0.5], [0.0, 1.0]], [[1.0, 0.0], [0.5, 1.0], [1.0, -1.0]], [[1.0], [2.0], [3.0]],
        causal_alignment="top_left"),
    "matrix, W_O": lambda: attention_layer(X, W_QK, W_QK, W_V3, W_O3),
    "matrix, W_O, as self_attention gives it": lambda: self_attention(X, W_QK, W_QK, W_V3, W_O3),
    "cross-attention, top-left": lambda: attention_layer(X[:2], W_QK, W_QK, W_V, W_O, x_kv=X,
                                                         causal_alignment="top_left"),
    "cross-attention, bottom-right": lambda: attention_layer(X[:2], W_QK, W_QK, W_V, W_O, x_kv=X,
                                                             causal_alignment="bottom_right"),
    "cross-attention, bidirectional, padded": lambda: attention_layer(
        X[:3], W_QK, W_QK, W_V, x_kv=X2, causal=False, padding_mask=PADDED[1]),
    "batch of 2, padded": batch,
    "batch of 3, no values": lambda: attention_layer([X, X2, X[::-1]], W_QK, W_QK),
    "batch of 2, cross-attention": lambda: attention_layer([X[:2], X2[:2]], W_QK, W_QK, W_V, W_O, x_kv=[X, X2],
                                                           padding_mask=PADDED, causal_alignment="bottom_right"),
    "batch items mixed": lambda: batch(failure_mode="batch_items_mixed"),
    "batch items mixed, 3 × 16 tokens": lambda: attention_layer(
        np.random.default_rng(23).normal(size=(3, 16, 2)), W_QK, W_QK, W_V, W_O, failure_mode="batch_items_mixed"),
    "output projection transposed, d_v != d_model": lambda: attention_layer(
        X, W_QK, W_QK, W_V3, W_O3, failure_mode="output_projection_transposed"),
    "rows and columns swapped, cross-attention": lambda: attention_layer(
        X[:2], W_QK, W_QK, W_V, W_O, x_kv=X, causal_alignment="top_left", failure_mode="rows_and_columns_swapped"),
    "keys as values, d_k != d_v": lambda: self_attention(X, W_QK, W_QK, W_V3, failure_mode="keys_as_values"),
}
# (B, T, T_k, d_v, W_O, cross-attention, alignment, maps) of each case.
SIZES = {
    "scalar": (1, 3, 3, 1, False, False, None, 1),
    "vector, cross-attention top-left": (1, 2, 3, 1, False, False, "top_left", 1),
    "matrix, W_O": (1, 4, 4, 3, True, False, None, 1),
    "matrix, W_O, as self_attention gives it": (1, 4, 4, 3, True, False, None, 1),
    "cross-attention, top-left": (1, 2, 4, 2, True, True, "top_left", 1),
    "cross-attention, bottom-right": (1, 2, 4, 2, True, True, "bottom_right", 1),
    "cross-attention, bidirectional, padded": (1, 3, 4, 2, False, True, None, 1),
    "batch of 2, padded": (2, 4, 4, 2, True, False, None, 2),
    "batch of 3, no values": (3, 4, 4, None, False, False, None, 3),
    "batch of 2, cross-attention": (2, 2, 4, 2, True, True, "bottom_right", 2),
    "batch items mixed": (2, 4, 4, 2, True, False, None, 1),
    "batch items mixed, 3 × 16 tokens": (3, 16, 16, 2, True, False, None, 1),
    "output projection transposed, d_v != d_model": (1, 4, 4, 3, True, False, None, 1),
    "rows and columns swapped, cross-attention": (1, 2, 4, 2, True, True, "top_left", 1),
    "keys as values, d_k != d_v": (1, 4, 4, 3, False, False, None, 1),
}


def reopened(record: ExperimentRecord) -> ExperimentRecord:
    """The record a page makes when it opens ``record`` and saves it again unchanged."""
    run = record.run_inputs
    layer = run.compute()
    return ExperimentRecord.from_result(layer, ablation=run.compute_ablation(layer), record_id=record.id,
                                        created_at=record.created_datetime,
                                        **{field: getattr(run, field) for field in TEXT})


def saved(result, ablation=None, **text) -> ExperimentRecord:
    return check_strict(ExperimentRecord.from_result(result, ablation=ablation, created_at=T0, learner="Ada",
                                                     label="l", prediction="p", explanation="e", notes="n", **text))


# --- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_v3_records_round_trip_exactly_are_schema_valid_and_reopen_to_the_same_record(case):
    result = CASES[case]()
    record = saved(result)
    assert record.schema_version == SCHEMA_VERSION == 3
    B, T, T_k, d_v, w_o, cross, alignment, maps = SIZES[case]
    assert (record.B, record.T, record.T_k, record.d_v, record.has_w_o, record.cross_attention,
            record.causal_alignment, len(record.maps)) == SIZES[case]
    assert record.ablation_target is None and record.inputs["ablation"] is record.results["ablation"] is None
    layer = result if isinstance(result, LayerResult) else LayerResult.of(result)
    assert record.failed_checks == layer.failed_checks
    assert [c["name"] for c in record.results["checks"]] == list(CHECK_NAMES)
    assert record.total_future_weight == layer.total_future_weight
    # The version-2 keys are the first map's, exactly as version 2 wrote them.
    first = layer.maps[0]
    assert record.inputs["queries"] == first.queries.tolist()
    assert record.inputs["keys"] == first.keys.tolist() and len(record.inputs["keys"]) == first.T_k
    assert record.results["weights"] == first.weights.tolist()
    assert record.results["y"] == (None if first.y is None else first.y.tolist())
    for stored, m in zip(record.maps, layer.maps, strict=True):
        assert stored["weights"] == m.weights.tolist() and stored["mask"] == m.allowed.tolist()
        assert stored["y"] == (None if m.y is None else m.y.tolist())
    run = record.run_inputs
    assert (run.schema_version, run.B, run.T, run.T_k, run.d_v, run.causal_alignment) == (3, B, T, T_k, d_v, alignment)
    assert reopened(record) == record  # results included, to the last bit


def test_a_batch_record_holds_the_whole_batch_and_each_items_map():
    layer = batch()
    record = saved(layer)
    assert record.inputs["batch"] == {"X": [X, X2], "X_kv": None, "padding_mask": PADDED}
    assert record.inputs["projection"]["X"] == X and record.inputs["padding_mask"] == PADDED[0]
    assert record.inputs["projection"]["W_O"] == W_O and record.inputs["projection"]["X_kv"] is None
    assert record.results["maps"][0]["weights"] == layer.maps[1].weights.tolist()
    assert record.results["maps"][0]["weights"][0][3] == 0.0  # item 2's padding forbidden
    run = record.run_inputs
    assert (run.x, run.batch, run.padding, run.padding_mask) == (
        tuple(map(tuple, X)), (tuple(map(tuple, X)), tuple(map(tuple, X2))),
        tuple(map(tuple, PADDED)), tuple(PADDED[0]))
    assert run.w_o == tuple(map(tuple, W_O)) and run.x_kv is run.batch_kv is None


def test_a_mixed_batch_keeps_its_one_flattened_map_and_the_batch():
    layer = batch(failure_mode="batch_items_mixed")
    record = saved(layer)
    assert len(record.inputs["queries"]) == 8 and record.results["maps"] is None
    assert record.inputs["projection"]["X"] == X + X2 and record.inputs["padding_mask"] == PADDED[0] + PADDED[1]
    assert "batch_independence" in record.failed_checks
    run = record.run_inputs
    assert (run.T, run.x, run.padding_mask) == (4, tuple(map(tuple, X)), tuple(PADDED[0]))


def test_cross_attention_records_hold_x_kv_and_the_alignment():
    top, bottom = (saved(CASES[f"cross-attention, {a}"]()) for a in ("top-left", "bottom-right"))
    assert top.inputs["projection"]["X_kv"] == bottom.inputs["projection"]["X_kv"] == X
    assert (top.settings["causal_alignment"], bottom.settings["causal_alignment"]) == ("top_left", "bottom_right")
    assert top.results["mask"] == [[True, False, False, False], [True, True, False, False]]
    assert bottom.results["mask"] == [[True, True, True, False], [True, True, True, True]]
    assert top.run_inputs.x_kv == top.run_inputs.batch_kv[0] == tuple(map(tuple, X))


@pytest.mark.parametrize("mode", list(FAILURE_MODES))
def test_every_failure_mode_over_a_batch_makes_a_valid_v3_record_that_reopens(mode):
    record = saved(batch(failure_mode=mode))
    assert record.failure_mode == mode
    assert reopened(record) == record


# --- ablations -----------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ABLATION_TARGETS)
@pytest.mark.parametrize("change", ABLATION_CHANGES)
def test_an_ablation_is_saved_with_its_statements_and_reopens_exactly(target, change):
    edited = {"matrix": [[0.5, -1.0], [2.0, 0.25]]} if change == "edit" else {}
    layer, ablation = with_ablation(target, change, **edited)
    record = saved(layer, ablation)
    assert record.ablation_target == target
    assert record.inputs["ablation"] == {"target": target, "change": change,
                                         "factor": 2.0 if change == "scale" else None,
                                         "matrix": ablation.matrix.tolist()}
    statements = record.results["ablation"]["statements"]
    assert [s["name"] for s in statements] == [s.name for s in ablation.statements]
    assert [s["passed"] for s in statements] == [s.passed for s in ablation.statements]
    after = record.results["ablation"]["maps"]
    assert [m["weights"] for m in after] == [m.weights.tolist() for m in ablation.after.maps]
    assert [m["y"] for m in after] == [m.y.tolist() for m in ablation.after.maps]
    again = record.run_inputs.compute_ablation()
    assert (again.target, again.change, again.factor) == (target, change, ablation.factor)
    assert reopened(record) == record


def test_the_w_v_ablation_record_shows_the_chapters_statement():
    layer, ablation = with_ablation("W_V", "scale")
    results = saved(layer, ablation).results
    assert [m["weights"] for m in results["ablation"]["maps"]] == [results["weights"], results["maps"][0]["weights"]]
    assert results["ablation"]["maps"][0]["output"] != results["output"]
    (statement,) = results["ablation"]["statements"]
    assert statement["passed"] is True and statement["title"].startswith("Changing W_V changes routed content")


# --- corrupted version-3 records: refused, naming the field ---------------------------------------


def _full() -> dict:
    """A v3 record with every new key in use: a batch, cross-attention, W_O, padding, an ablation."""
    layer = CASES["batch of 2, cross-attention"]()
    return saved(layer, ablate(layer, "W_O", "zero")).to_dict()


SCHEMA_REFUSES = {
    "no batch key": (("inputs", "batch"), KeyError, "batch"),
    "no ablation key": (("inputs", "ablation"), KeyError, "ablation"),
    "no causal_alignment": (("settings", "causal_alignment"), KeyError, "causal_alignment"),
    "an unknown alignment": (("settings", "causal_alignment"), "diagonal", "settings.causal_alignment"),
    "no y": (("results", "y"), KeyError, "'y'"),
    "no maps": (("results", "maps"), KeyError, "maps"),
    "maps as text": (("results", "maps"), "none", "results.maps"),
    "no results.ablation": (("results", "ablation"), KeyError, "ablation"),
    "projection without W_O": (("inputs", "projection", "W_O"), KeyError, "W_O"),
    "projection without X_kv": (("inputs", "projection", "X_kv"), KeyError, "X_kv"),
    "W_O with text": (("inputs", "projection", "W_O", 0, 0), "1", "inputs.projection.W_O"),
    "batch X as a matrix": (("inputs", "batch", "X"), [[1.0, 2.0]], "inputs.batch.X"),
    "batch of 4": (("inputs", "batch", "X"), [[[1.0, 2.0]]] * 4, "inputs.batch.X"),
    "batch with an extra key": (("inputs", "batch", "W_O"), None, "inputs.batch"),
    "batch padding of numbers": (("inputs", "batch", "padding_mask"), [[1, 0]] * 2, "inputs.batch.padding_mask"),
    "an unknown ablation target": (("inputs", "ablation", "target"), "W_X", "inputs.ablation.target"),
    "an unknown ablation change": (("inputs", "ablation", "change"), "double", "inputs.ablation.change"),
    "a map with an extra key": (("results", "maps", 0, "checks"), [], "results.maps[0]"),
    "a map's weights as text": (("results", "maps", 0, "weights", 0, 0), "0.5", "results.maps[0].weights"),
    "a statement passed as text": (("results", "ablation", "statements", 0, "passed"), "yes",
                                   "results.ablation.statements[0].passed"),
    "y with text": (("results", "y", 0, 0), "0", "results.y"),
}


@pytest.mark.parametrize("case", SCHEMA_REFUSES)
def test_the_schema_and_the_fast_check_refuse_broken_v3_records_naming_the_field(case):
    path, value, where = SCHEMA_REFUSES[case]
    broken = changed_copy(_full(), path, value)
    with pytest.raises(jsonschema.ValidationError):
        validate_record(broken)
    with pytest.raises(RecordError, match=f"not an experiment record: .*{_pattern(where)}"):
        ExperimentRecord.from_dict(broken)


def _pattern(where: str) -> str:
    return where.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")


def _row_short(data, *path):
    value = data
    for key in path:
        value = value[key]
    return [row[:-1] for row in value]


SHAPES = {
    "batch X not d_model wide": (("inputs", "batch", "X"),
                                 lambda d: [[r + [0.0] for r in item] for item in d["inputs"]["batch"]["X"]],
                                 "inputs.batch.X"),
    "batch X ragged": (("inputs", "batch", "X", 1), lambda d: d["inputs"]["batch"]["X"][1][:1], "inputs.batch.X"),
    "batch X_kv of another width": (("inputs", "batch", "X_kv"), lambda d: [_row_short(d, "inputs", "batch", "X_kv", b)
                                                                           for b in range(2)], "inputs.batch.X_kv"),
    "batch X_kv missing beside projection.X_kv": (("inputs", "batch", "X_kv"), lambda d: None, "inputs.batch.X_kv"),
    "batch padding of 3 keys": (("inputs", "batch", "padding_mask"), lambda d: [[True] * 3] * 2,
                                "inputs.batch.padding_mask"),
    "batch padding missing": (("inputs", "batch", "padding_mask"), lambda d: None, "inputs.batch.padding_mask"),
    "projection X not item 1's": (("inputs", "projection", "X", 0, 0), lambda d: 99.0, "inputs.projection.X"),
    "projection X_kv a row short": (("inputs", "projection", "X_kv"), lambda d: d["inputs"]["projection"]["X_kv"][:3],
                                    "inputs.projection.X_kv"),
    "W_O not d_v × d_model": (("inputs", "projection", "W_O"), lambda d: [[1.0, 0.0]], "inputs.projection.W_O"),
    "y not T × d_model": (("results", "y"), lambda d: d["results"]["y"][:1], "results.y"),
    "maps null for a batch": (("results", "maps"), lambda d: None, "results.maps"),
    "a map's weights a row short": (("results", "maps", 0, "weights"), lambda d: d["results"]["maps"][0]["weights"][:1],
                                    "results.maps[0].weights"),
    "a map's y a column short": (("results", "maps", 0, "y"), lambda d: _row_short(d, "results", "maps", 0, "y"),
                                 "results.maps[0].y"),
    "no alignment for a causal T != T_k": (("settings", "causal_alignment"), lambda d: None,
                                           "settings.causal_alignment"),
    "the ablation's matrix of another shape": (("inputs", "ablation", "matrix"), lambda d: [[0.0, 0.0]],
                                               "inputs.ablation.matrix"),
    "a scale without a factor": (("inputs", "ablation", "change"), lambda d: "scale", "inputs.ablation.factor"),
    "the ablation's maps one short": (("results", "ablation", "maps"), lambda d: d["results"]["ablation"]["maps"][:1],
                                      "results.ablation.maps"),
    "the ablation's weights a row short": (("results", "ablation", "maps", 1, "weights"),
                                           lambda d: d["results"]["ablation"]["maps"][1]["weights"][:1],
                                           "results.ablation.maps[1].weights"),
    "ablation results without inputs.ablation": (("inputs", "ablation"), lambda d: None, "results.ablation"),
    "inputs.ablation without its results": (("results", "ablation"), lambda d: None, "results.ablation"),
}


@pytest.mark.parametrize("case", SHAPES)
def test_the_fast_check_refuses_v3_shapes_a_schema_cannot_see_naming_the_field(case):
    path, value, where = SHAPES[case]
    data = _full()
    broken = changed_copy(data, path, value(data))
    validate_record(broken)
    with pytest.raises(RecordError, match=_pattern(where)):
        ExperimentRecord.from_dict(broken)


def test_one_sequence_keeps_sixteen_tokens_and_y_needs_w_o():
    data = saved(CASES["matrix, W_O"]()).to_dict()
    broken = changed_copy(data, ("inputs", "queries"), [[1.0, 0.0]] * 17)
    with pytest.raises(jsonschema.ValidationError):
        validate_record(broken)
    with pytest.raises(RecordError, match="inputs.queries"):
        ExperimentRecord.from_dict(broken)
    no_w_o = saved(attention_layer(X, W_QK, W_QK, W_V)).to_dict()
    broken = changed_copy(no_w_o, ("results", "y"), [[0.0, 0.0]] * 4)
    validate_record(broken)
    with pytest.raises(RecordError, match=r"results\.y must be null without W_O"):
        ExperimentRecord.from_dict(broken)
    scalar = saved(CASES["scalar"]()).to_dict()
    with pytest.raises(RecordError, match=r"inputs\.batch must be null unless"):
        ExperimentRecord.from_dict(changed_copy(scalar, ("inputs", "batch"),
                                                {"X": [[[1.0]] * 3] * 2, "X_kv": None, "padding_mask": None}))


def test_a_v2_record_may_not_hold_v3_keys_or_modes():
    v2 = json.loads(_v2_text())
    for path, value in ((("results", "y"), None), (("settings", "causal_alignment"), None),
                        (("inputs", "batch"), None), (("settings", "failure_mode"), "batch_items_mixed"),
                        (("inputs", "projection", "W_O"), None)):
        broken = changed_copy(v2, path, value)
        with pytest.raises(jsonschema.ValidationError):
            validate_record(broken)
        with pytest.raises(RecordError):
            ExperimentRecord.from_dict(broken)


def _v2_text() -> str:
    return (Path(__file__).resolve().parent / "records_v2" / "v2-matrix-trace.json").read_text(encoding="utf-8")


# --- everywhere records go ------------------------------------------------------------------------


@pytest.fixture
def v3_store(tmp_path) -> tuple[RunStore, list[ExperimentRecord]]:
    """A store of every case, and an ablation, saved one minute apart."""
    store = RunStore(sqlite_url(tmp_path / "runs.db"))
    layer, ablation = with_ablation("W_O", "zero")
    made = [(CASES[case](), None, case) for case in CASES] + [(layer, ablation, "ablation of W_O")]
    for n, (result, abl, label) in enumerate(made):
        store.save(ExperimentRecord.from_result(result, ablation=abl, label=label, learner="Lin",
                                                created_at=T0 + timedelta(minutes=n)))
    return store, list(store.iter_records())


def test_the_store_summarises_v3_runs_and_exports_their_sizes_to_csv(v3_store):
    store, records = v3_store
    summaries = store.query().runs
    assert summaries == [RunSummary.of(r) for r in records]
    assert "".join(iter_csv(store.iter_csv_rows())) == export_csv(summaries) == export_csv(records)
    assert CSV_COLUMNS[-7:] == ("B", "T_k", "d_v", "has_w_o", "cross_attention", "causal_alignment",
                                "ablation_target")
    rows = {row["label"]: row for row in csv.DictReader(io.StringIO(export_csv(records), newline=""))}
    for case, (B, T, T_k, d_v, w_o, cross, alignment, _) in SIZES.items():
        row = rows[case]
        assert (row["B"], row["T"], row["T_k"], row["d_v"], row["has_w_o"], row["cross_attention"],
                row["causal_alignment"], row["ablation_target"]) == (
            str(B), str(T), str(T_k), "" if d_v is None else str(d_v), str(w_o).lower(), str(cross).lower(),
            alignment or "", "")
    assert rows["ablation of W_O"]["ablation_target"] == "W_O"
    assert rows["batch items mixed"]["mode"] == "Batch items mixed"


def test_v3_runs_are_exported_and_imported_exactly(v3_store, tmp_path):
    store, records = v3_store
    text = export_json(records)
    bundle = json.loads(text, parse_constant=refuse_constant)
    assert bundle["schema_version"] == 3
    for data in bundle["runs"]:
        validate_record(data)
    other = RunStore(sqlite_url(tmp_path / "other.db"))
    assert import_data(other, "bundle.json", text.encode()).imported == [r.id for r in records]
    assert list(other.iter_records()) == records
    one = records[0]
    assert import_data(other, "one.json", one.to_json(indent=2).encode()).skipped == [one.id]


def test_comparison_takes_v3_runs_and_says_when_the_maps_differ_in_shape(v3_store):
    _, records = v3_store
    by_label = {r.label: r for r in records}
    top, bottom = by_label["cross-attention, top-left"], by_label["cross-attention, bottom-right"]
    assert size_difference(top, bottom) == ""  # both 2×4: a difference map of the two alignments
    batch_run, mixed = by_label["batch of 2, padded"], by_label["batch items mixed"]
    assert batch_run.T == mixed.T == 4
    assert ("different shapes (queries × keys of the first map): run A's are 4×4 (item 1 of a batch "
            "of 2, each 4 tokens) and run B's 8×8 (a batch of 2, each 4 tokens, the items mixed into one "
            "map), so") in size_difference(batch_run, mixed)
    # Cross-attention's 2 queries read 4 keys: its weights are 2×4, whatever the other run's T.
    assert ("their weights (queries × keys of the first map) are 2×4 (2 queries over 4 keys) and 4×4 "
            "(item 1 of a batch of 2, each 4 tokens) and cannot") in size_difference(top, batch_run)
    # Each run's size as the comparison's table and Saved runs' ticks say it.
    assert {label: run_size(by_label[label]) for label in (
        "scalar", "vector, cross-attention top-left", "batch of 2, cross-attention", "batch items mixed")} == {
        "scalar": "3 tokens", "vector, cross-attention top-left": "2 queries over 3 keys",
        "batch of 2, cross-attention": "a batch of 2, each 2 queries over 4 keys",
        "batch items mixed": "a batch of 2, each 4 tokens"}
    assert "<td>2 queries over 4 keys</td>" in ComparisonView._summary(top, batch_run, "", ["A", "B"])
    view = ComparisonView()
    view.show([by_label["matrix, W_O"], batch_run])  # one sequence and item 1 of a batch, both 4×4
    assert view.difference.visible
