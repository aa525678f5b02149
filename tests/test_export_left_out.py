"""Exports never lie: a stored run that cannot be read (a store edited by hand) is left out and
named, the bundle stays valid JSON with it in ``skipped``, no CSV cell says inf or nan, and
``export`` exits 1 without saying "exported"."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from store_helpers import make_record, overwrite_record_text, refuse_constant, sqlite_store

from app.cli import main
from app.instructor import InstructorState
from app.instructor.page import ExportView
from app.store import RunStore, export_csv, sqlite_url
from app.store.exports import UnreadableRunError
from app.store.schema import runs as runs_table

# What a hand may leave in a run's stored text, each unreadable.
CORRUPT = {
    "not JSON": "{not json",
    "cut short": None,  # the run's own text, its last half gone
    "a list": "[1, 2, 3]",
    "not a record's keys": '{"id": "x"}',
    "a number beyond float64": None,  # the run's own text with min_row_sum 1e400
    "NaN": None,  # the run's own text with a NaN token
}


@pytest.fixture
def class_store(tmp_path):
    records = [make_record(minutes=m, learner=f"learner {m}") for m in range(3)]
    with sqlite_store(tmp_path) as store:
        for r in records:
            store.save(r)
    return sqlite_url(tmp_path / "runs.db"), records


def corrupt_text(kind: str, text: str) -> str:
    if kind == "cut short":
        return text[: len(text) // 2]
    data = json.loads(text)
    if kind == "a number beyond float64":
        data["results"]["min_row_sum"] = 1.5
        return json.dumps(data).replace('"min_row_sum": 1.5', '"min_row_sum": 1e400')
    if kind == "NaN":
        return json.dumps(data).replace(f'"min_row_sum": {data["results"]["min_row_sum"]!r}', '"min_row_sum": NaN')
    return CORRUPT[kind]


def set_column(url: str, run_id: str, **values) -> None:
    """Set a run's summary columns behind the store's back (a database edited by hand)."""
    with RunStore(url) as store, store.engine.connect().execution_options(store_write=True) as conn, conn.begin():
        conn.execute(runs_table.update().where(runs_table.c.id == run_id).values(**values))


@pytest.mark.parametrize("kind", CORRUPT)
def test_json_export_leaves_out_an_unreadable_row_names_it_and_exits_1(class_store, kind, capsys, tmp_path):
    url, records = class_store
    bad = records[1]
    with RunStore(url) as store:
        overwrite_record_text(store, bad.id, corrupt_text(kind, bad.to_json()))
    assert main(["export", "--store", url, "--format", "json"]) == 1
    out, err = capsys.readouterr()
    bundle = json.loads(out, parse_constant=refuse_constant)  # valid JSON all the same
    assert [r["id"] for r in bundle["runs"]] == [records[0].id, records[2].id]
    assert [s["id"] for s in bundle["skipped"]] == [bad.id] and bundle["skipped"][0]["reason"]
    assert f"error: run {bad.id} could not be read and was left out: " in err
    assert "could not be read and was left out; 2 runs were written to stdout" in err
    assert "exported" not in err
    # To a file: the same valid bundle, the same exit status.
    target = tmp_path / "class-runs.json"
    assert main(["export", "--store", url, "--format", "json", "-o", str(target)]) == 1
    assert json.loads(target.read_text(encoding="utf-8"))["skipped"] == bundle["skipped"]
    assert f"written to {target}" in capsys.readouterr().err


def test_a_clean_store_still_exports_with_nothing_skipped(class_store, capsys):
    url, records = class_store
    assert main(["export", "--store", url, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["skipped"] == [] and "exported 3 runs" in err


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_csv_never_writes_inf_or_nan_and_names_the_run(store_url, value, capsys):
    records = [make_record(minutes=m, learner=f"learner {m}") for m in range(3)]
    with RunStore(store_url) as store:
        for r in records:
            store.save(r)
    bad = records[2]
    set_column(store_url, bad.id, min_row_sum=value)
    status = main(["export", "--store", store_url, "--format", "csv"])
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert not any(cell.lower().lstrip("-") in ("inf", "nan") for r in rows for cell in r.values())
    if store_url.startswith("sqlite") and math.isnan(value):  # SQLite keeps a NaN as NULL: an empty cell
        assert status == 0 and rows[2]["min_row_sum"] == ""
        return
    assert status == 1 and [r["id"] for r in rows] == [records[0].id, records[1].id]
    assert f"error: run {bad.id} could not be read and was left out: min_row_sum is {value!r}, not a finite " \
        "number" in err
    assert "exported" not in err


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_csv_of_records_leaves_out_a_non_finite_number_or_refuses_it(value):
    good = make_record(minutes=0)
    bad = make_record(minutes=1)
    object.__setattr__(bad, "results", {**bad.results, "total_future_weight": value})
    left_out: list = []
    text = export_csv([good, bad], left_out)
    assert "inf" not in text and "nan" not in text and [e.run_id for e in left_out] == [bad.id]
    with pytest.raises(UnreadableRunError, match=f"run {bad.id} could not be read"):
        export_csv([bad])


def test_a_stored_number_beyond_float64_is_never_read_as_inf(class_store):
    url, records = class_store
    with RunStore(url) as store:
        overwrite_record_text(store, records[0].id, corrupt_text("a number beyond float64", records[0].to_json()))
        left_out: list = []
        assert [r.id for r in store.iter_records(left_out=left_out)] == [r.id for r in records[1:]]
        assert "1e400 is beyond float64" in left_out[0].reason
        with pytest.raises(ValueError, match="not a readable record"):
            store.get(records[0].id)


def test_the_instructor_pages_export_says_which_runs_it_left_out(class_store):
    url, records = class_store
    with RunStore(url) as store:
        overwrite_record_text(store, records[0].id, "{not json")
        view = ExportView(state=InstructorState(store=store))
        bundle = json.loads(view._download("json").getvalue())
        assert [s["id"] for s in bundle["skipped"]] == [records[0].id]
        assert "data-testid='export-left-out'" in view.note.object
        assert f"{records[0].id} (not a record&#39;s strict JSON (Expecting" in view.note.object
        assert "The last export left out 1 run that could not be read" in view.note.object
        set_column(url, records[0].id, max_row_sum_error=float("inf"))
        csv_text = view._download("csv").getvalue()
        assert "inf" not in csv_text.lower() and records[0].id not in csv_text
        assert "max_row_sum_error is inf" in view.note.object
