"""Imports believe only what the core computes: every imported record's results are computed
again from its inputs and settings (attention_core.recompute), by the ``import`` command and the
instructor's upload alike (one function, app.store.importing.read_records)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from store_helpers import T0, make_record, sqlite_store, stored, tampered_broken_run

from app.cli import main
from app.learner.state import PRESETS, LearnerState
from app.store import RunStore, export_json, sqlite_url
from app.store.importing import import_data
from attention_core import ABLATION_CHANGES, FAILURE_MODES, ablate, attention_layer, scaled_dot_product_attention
from attention_core.recompute import ATOL, RTOL, ResultsDisagreeError, recomputed_record
from attention_core.records import ExperimentRecord, RecordError

FIXTURES = sorted((Path(__file__).resolve().parent).glob("records_v[12]/*.json"))


def imported_as_is(record: ExperimentRecord) -> bool:
    """Whether ``record``, written out and read back as an import reads it, is taken unchanged."""
    read = ExperimentRecord.from_json(record.to_json())
    return recomputed_record(read) is read


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_records_of_earlier_versions_recompute_to_themselves(path):
    record = ExperimentRecord.from_json(path.read_bytes())
    assert record.schema_version in (1, 2)
    assert recomputed_record(record) is record


@pytest.mark.parametrize("mode", FAILURE_MODES)
def test_every_preset_saved_in_every_mode_is_imported_unchanged(mode):
    state = LearnerState()
    for preset in PRESETS:
        state.apply_preset(preset, mode)
        assert state.layer is not None, preset
        record = ExperimentRecord.from_result(state.layer, prediction="p", created_at=T0)
        assert imported_as_is(record), (preset, mode)


def test_ablations_of_every_target_and_change_are_imported_unchanged():
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    w = [[1.0, 2.0], [0.5, -1.0]]
    layer = attention_layer([x, x[::-1]], w, np.eye(2), w, np.eye(2), padding_mask=[[True] * 3, [True, True, False]])
    for target in ("W_Q", "W_K", "W_V", "W_O"):
        for change in ABLATION_CHANGES:
            kwargs = {"factor": 0.5} if change == "scale" else {"matrix": [[0.0, 1.0], [1.0, 0.0]]} \
                if change == "edit" else {}
            ablation = ablate(layer, target, change, **kwargs)
            assert imported_as_is(ExperimentRecord.from_result(layer, ablation=ablation, created_at=T0))


def test_a_broken_run_whose_results_were_edited_to_look_correct_is_refused_naming_the_field():
    real, tampered = tampered_broken_run()
    with pytest.raises(ResultsDisagreeError) as refused:
        recomputed_record(ExperimentRecord.from_dict(tampered))
    assert (refused.value.where, refused.value.says, refused.value.gives) == (
        "results.min_row_sum", 1.0, real.min_row_sum)
    assert str(refused.value).startswith(f"results.min_row_sum says 1.0; its inputs give {real.min_row_sum!r}")
    assert isinstance(refused.value, RecordError)  # what every import path already reports


@pytest.mark.parametrize(("path", "value", "where"), [
    (("results", "weights", 2, 0), 0.5, "results.weights[2][0]"),
    (("results", "checks", 3, "passed"), "flip", "results.checks[3].passed"),
    (("results", "failed_checks"), ["mask"], "results.failed_checks"),
    (("results", "mask", 0, 1), True, "results.mask[0][1]"),
    (("results", "masked_scores", 0, 1), 3.0, "results.masked_scores[0][1]"),
    (("settings", "mask_after_softmax"), False, "settings.mask_after_softmax"),
])
def test_any_edited_result_is_refused_naming_the_first_field_that_differs(path, value, where):
    data = ExperimentRecord.from_result(scaled_dot_product_attention(
        [1.0, 1.0, 1.0], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0], failure_mode="mask_after_softmax")).to_dict()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = (not target[path[-1]]) if value == "flip" else value
    with pytest.raises(ResultsDisagreeError, match=rf"^{re.escape(where)} says "):
        recomputed_record(ExperimentRecord.from_dict(data))


def test_matrix_modes_projections_are_results_too():
    record = ExperimentRecord.from_result(attention_layer(
        [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.eye(2), np.eye(2), np.eye(2), np.eye(2)), created_at=T0)
    data = record.to_dict()
    data["inputs"]["queries"][1] = [5.0, 5.0]  # Q = X W_Q is computed, not typed
    with pytest.raises(ResultsDisagreeError, match=r"^inputs\.queries\[1\]\[0\] says 5\.0; its inputs give 0\.0"):
        recomputed_record(ExperimentRecord.from_dict(data))


def test_another_tools_record_whose_numbers_agree_is_taken_with_the_cores_numbers():
    record = make_record("mask_after_softmax")
    data = record.to_dict()

    def rounded(value):  # seven significant digits, integers as integers, other words
        if isinstance(value, list):
            return [rounded(v) for v in value]
        if isinstance(value, float):
            return int(value) if value.is_integer() else float(f"{value:.7g}")
        return value

    data["results"] = {k: v if k == "checks" else rounded(v) for k, v in data["results"].items()}
    data["results"]["checks"][0]["message"] = "another tool's words"
    data["app_version"] = "other-tool 2.0"
    taken = recomputed_record(ExperimentRecord.from_dict(data))
    assert taken.results == record.results  # the core's numbers and words, not the file's
    assert taken.inputs == record.inputs and taken.app_version == "other-tool 2.0"
    assert data["results"]["min_row_sum"] != record.min_row_sum
    assert math.isclose(data["results"]["min_row_sum"], record.min_row_sum, rel_tol=RTOL, abs_tol=ATOL)


def test_a_number_just_outside_the_tolerance_is_refused():
    record = make_record("correct")
    data = record.to_dict()
    data["results"]["output"][0] *= 1 + 10 * RTOL
    with pytest.raises(ResultsDisagreeError, match=r"^results\.output\[0\] says "):
        recomputed_record(ExperimentRecord.from_dict(data))


def test_inputs_the_core_refuses_are_refused_with_the_cores_message():
    data = make_record("correct").to_dict()
    data["inputs"]["queries"] = [1e200, 1.0, 1.0]
    data["inputs"]["keys"] = [1e200, 1.0, 1.0]
    with pytest.raises(RecordError, match="^its inputs cannot be computed again: "):
        recomputed_record(ExperimentRecord.from_dict(data))


def test_the_import_command_refuses_the_tampered_record_names_the_field_and_stores_nothing(tmp_path, capsys):
    real, tampered = tampered_broken_run()
    (tmp_path / "tampered.json").write_text(json.dumps(tampered), encoding="utf-8")
    url = sqlite_url(tmp_path / "class.db")
    assert main(["import", "--store", url, str(tmp_path / "tampered.json")]) == 1
    out = capsys.readouterr().out
    assert f"tampered.json: results.min_row_sum says 1.0; its inputs give {real.min_row_sum!r}" in out
    # Read, and not valid: tallied as in a bundle, not as a file not read.
    assert out.rstrip().splitlines()[-1].startswith(
        "imported 0 runs, skipped 0 already in the store, refused 0 (same id, different content), 1 not valid, "
        "0 of 1 files not read, 1 file refused whole (0 valid runs held back)")
    # In a bundle, one tampered run keeps the whole file out (never a half import), named by its place.
    good = make_record("correct", minutes=3)
    bundle = json.loads(export_json([good]))
    bundle["runs"].append(tampered)
    (tmp_path / "bundle.json").write_text(json.dumps(bundle), encoding="utf-8")
    assert main(["import", "--store", url, str(tmp_path / "bundle.json")]) == 1
    out = capsys.readouterr().out
    assert "bundle.json: nothing imported (a file is taken whole), held back 1 valid, 1 not valid" in out
    assert "bundle.json runs[1]: results.min_row_sum says 1.0; its inputs give" in out
    assert ", 1 not valid, 0 of 1 files not read, 1 file refused whole (1 valid run held back)" in out
    with RunStore(url) as store:
        assert stored(store) == []
    # A tampered file beside a good one: the good one goes in, and the exit status says one was refused.
    (tmp_path / "good.json").write_text(good.to_json(), encoding="utf-8")
    assert main(["import", "--store", url, str(tmp_path / "tampered.json"), str(tmp_path / "good.json")]) == 1
    with RunStore(url) as store:
        assert [r["id"] for r in stored(store)] == [good.id]
    assert main(["import", "--store", url, str(tmp_path / "good.json")]) == 0  # skipped: not refused


@pytest.mark.parametrize("field", ["learner", "label", "prediction", "explanation", "notes"])
@pytest.mark.parametrize("char, kind", [
    ("\u202e", "a bidirectional override"), ("\u2066", "a bidirectional override"), ("\0", "a control character"),
    ("\x1b", "a control character"), ("\x7f", "a control character"), ("\x85", "a control character")])
def test_an_import_refuses_text_holding_a_control_character_or_a_bidi_override_naming_the_field(
        field, char, kind, tmp_path):
    """The page drops these as they are typed; a file holding them was not written by a page, and
    storing it cleaned would store text nobody wrote, so it is refused (the store, the instructor's
    views and CSV never carry them)."""
    record = make_record(**{field: f"Ada{char}evil"})
    with sqlite_store(tmp_path) as store:
        report = import_data(store, "odd.json", record.to_json().encode("utf-8"))
        [(where, reason)] = report.invalid
        assert where == "" and reason.startswith(f"{field} holds U+{ord(char):04X} ({kind}")
        assert not report.taken and stored(store) == []


def test_an_import_takes_tabs_line_ends_and_plain_direction_marks(tmp_path):
    record = make_record(learner="\u200fعلي\u200e", notes="first\r\nsecond\tthird")
    with sqlite_store(tmp_path) as store:
        assert import_data(store, "ok.json", record.to_json().encode("utf-8")).imported == [record.id]
        assert stored(store) == [record.to_dict()]


def test_the_bidi_learner_of_the_report_is_refused_by_the_command_and_never_reaches_the_csv(tmp_path, capsys):
    record = make_record(learner="Ada\u202e\u0000evil", minutes=1)
    other = make_record(learner="Lin", minutes=2)
    (tmp_path / "bundle.json").write_text(export_json([other, record]), encoding="utf-8")
    url = sqlite_url(tmp_path / "class.db")
    assert main(["import", "--store", url, str(tmp_path / "bundle.json")]) == 1
    assert "bundle.json runs[1]: learner holds U+202E (a bidirectional override" in capsys.readouterr().out
    assert main(["export", "--store", url, "--format", "csv"]) == 0
    assert "\u202e" not in capsys.readouterr().out


def test_what_is_stored_is_the_cores_and_importing_it_again_is_skipped(tmp_path):
    record = make_record("naive_softmax")
    data = record.to_dict()
    data["results"]["total_future_weight"] = float(f"{record.total_future_weight:.7g}") + 0.0
    text = json.dumps(data).encode("utf-8")
    with sqlite_store(tmp_path) as store:
        assert import_data(store, "other.json", text).imported == [record.id]
        assert stored(store) == [record.to_dict()]
        again = import_data(store, "other.json", text)
        assert (again.imported, again.skipped, again.refused) == ([], [record.id], [])
