"""The run store on a database: saves, reads, explanations, queries, exports, imports, versions.

Every test that takes ``store`` runs once per dialect (``store_url`` in conftest.py: SQLite, and a
PostgreSQL started for the session).
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import inspect
from store_helpers import OWNER, T0, check_strict, make_record, refuse_constant

from app.store import (
    CSV_COLUMNS,
    PAGE_RUNS,
    NotOwnerError,
    RunFilter,
    RunStore,
    RunSummary,
    StoreError,
    StoreOpenError,
    export_csv,
    export_json,
    iter_csv,
    iter_export_json,
    sqlite_url,
)
from app.store import runs as store_runs
from app.store import schema as store_schema
from app.store.importing import import_data
from attention_core import scaled_dot_product_attention, self_attention
from attention_core.records import ExperimentRecord


def store_url_of(store: RunStore) -> str:
    return store.url.render_as_string(hide_password=False)


@pytest.fixture
def store(store_url) -> RunStore:
    with RunStore(store_url) as opened:
        yield opened


def test_save_then_get_gives_the_record_back_exactly(store):
    record = make_record(learner="Ada", notes="x\ny \u202e")
    store.save(record)
    assert store.get(record.id) == record
    (text,) = store.iter_texts()
    assert text == record.to_json()
    json.loads(text, parse_constant=refuse_constant)


def test_saving_an_existing_id_never_overwrites(store):
    first = make_record(record_id="same", learner="first")
    store.save(first)
    with pytest.raises(StoreError, match="Run not saved: a run with id same already exists"):
        store.save(make_record(record_id="same", learner="second"))
    assert store.get("same") == first and store.count() == 1


INJECTIONS = ["' OR '1'='1", "x'; DROP TABLE workbench_runs; --", '"; DELETE FROM workbench_runs; --',
              "%", "_", "\\", "' UNION SELECT record FROM workbench_runs --", "a\x00b", "../etc/passwd",
              "%' OR 1=1 --"]


@pytest.mark.parametrize("bad_id", [
    "../outside", "..", "/etc/passwd", "a/b", "a\\b", "", "x" * 65, "abc.json", "a b", "a\x00b",
    "\u00e9", None, 5, "' OR '1'='1", "x'; DROP TABLE workbench_runs; --",
])
def test_get_and_update_refuse_anything_but_a_run_id(store, bad_id):
    store.save(make_record(record_id="kept"))
    with pytest.raises(ValueError, match="not a run id"):
        store.get(bad_id)
    with pytest.raises(ValueError, match="not a run id"):
        store.update_explanation(bad_id, "text", key_hash=OWNER)
    assert store.count() == 1 and store.get("kept").explanation is None


def test_a_missing_run_is_a_key_error(store):
    with pytest.raises(KeyError):
        store.get("nope")
    with pytest.raises(KeyError):
        store.update_explanation("nope", "text", key_hash=OWNER)
    assert store.count() == 0


def test_update_explanation_changes_only_the_explanation_and_adds_no_run(store):
    other = make_record(minutes=0, learner="Grace")
    first = make_record(minutes=1, learner="Ada", prediction="row 2 ignores token 3")
    store.save(other)
    store.save(first, key_hash=OWNER)
    token = store.change_token()
    updated = store.update_explanation(first.id, "The mask hides token 3 before softmax.", key_hash=OWNER)
    assert updated == dataclasses.replace(first, explanation="The mask hides token 3 before softmax.")
    check_strict(updated)
    assert store.get(first.id) == updated and store.get(other.id) == other
    assert store.change_token() != token
    assert [s.explanation for s in store.query().runs] == [None, "The mask hides token 3 before softmax."]
    assert store.query(RunFilter(has_explanation=True)).total == 1
    assert list(store.iter_texts(ids=[first.id])) == [updated.to_json()]
    assert store.update_explanation(first.id, None, key_hash=OWNER) == first
    assert store.query(RunFilter(has_explanation=True)).total == 0


def test_update_explanation_refuses_text_a_record_cannot_hold(store):
    record = make_record()
    store.save(record, key_hash=OWNER)
    with pytest.raises(ValueError, match="explanation is too long: 2001 characters"):
        store.update_explanation(record.id, "x" * 2001, key_hash=OWNER)
    with pytest.raises(ValueError, match="explanation holds a lone surrogate"):
        store.update_explanation(record.id, "bad \ud800", key_hash=OWNER)
    assert list(store.iter_texts()) == [record.to_json()]


def test_concurrent_updates_of_one_run_leave_one_whole_valid_record(store):
    record = make_record()
    store.save(record, key_hash=OWNER)
    other = RunStore(store.url.render_as_string(hide_password=False))  # a second server process's store
    texts = {n: [f"writer {n}, try {k}: " + "x" * (k * 37 % 500) for k in range(15)] for n in (0, 1)}
    errors = []

    def write(n, where):
        try:
            for text in texts[n]:
                where.update_explanation(record.id, text, key_hash=OWNER)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(0, store)), threading.Thread(target=write, args=(1, other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    other.close()
    assert errors == []
    final = check_strict(store.get(record.id))
    assert final.explanation in (texts[0][-1], texts[1][-1])
    assert final.to_dict() | {"explanation": None} == record.to_dict()
    assert store.count() == 1


# --- a run belongs to the page that saved it ------------------------------------------------

ANOTHER = hashlib.sha256(b"another page").hexdigest()


def test_only_the_key_a_run_was_saved_with_changes_it(store):
    mine, imported = make_record(minutes=0, learner="Ada"), make_record(minutes=1, learner="Ada")
    store.save(mine, key_hash=OWNER)
    store.import_records([imported])
    token = store.change_token()
    for run_id, key in ((mine.id, ANOTHER), (mine.id, None), (imported.id, OWNER), (imported.id, None)):
        with pytest.raises(NotOwnerError, match=f"run {run_id} was saved by another page .or imported.; only "
                                                "the page that saved a run can explain it") as refused:
            store.update_explanation(run_id, "not mine to explain", key_hash=key)
        assert refused.value.run_id == run_id
    assert store.get(mine.id) == mine and store.get(imported.id) == imported
    assert store.change_token() == token and store.query(RunFilter(has_explanation=True)).total == 0
    with pytest.raises(ValueError, match="not a page key's SHA-256"):
        store.update_explanation(mine.id, "x", key_hash=OWNER.upper())
    with pytest.raises(ValueError, match="not a page key's SHA-256"):
        store.save(make_record(minutes=2), key_hash="' OR '1'='1")
    assert store.update_explanation(mine.id, "mine", key_hash=OWNER).explanation == "mine"


def test_page_runs_are_the_latest_saved_with_a_key_oldest_first(store):
    mine = [make_record(minutes=m, learner="Ada") for m in (3, 1, 2)]  # saved out of time order
    for record in mine:
        store.save(record, key_hash=OWNER)
    store.save(make_record(minutes=4), key_hash=ANOTHER)
    store.import_records([make_record(minutes=5)])
    assert [r.id for r in store.page_runs(OWNER)] == [r.id for r in sorted(mine, key=lambda r: r.created_at)]
    assert store.page_runs(OWNER, limit=2) == sorted(mine, key=lambda r: r.created_at)[1:]
    assert store.page_runs(hashlib.sha256(b"nobody").hexdigest()) == []
    for bad in ("", "../x"):
        with pytest.raises(ValueError, match="not a page key's SHA-256"):
            store.page_runs(bad)
    with pytest.raises(ValueError, match="page_runs needs a page key's hash"):
        store.page_runs(None)
    # The latest 200 (PAGE_RUNS) by default, however many the page saved.
    many = [make_record(minutes=10 + m) for m in range(PAGE_RUNS + 1)]
    with store.engine.connect().execution_options(store_write=True) as conn, conn.begin():
        conn.execute(store_schema.runs.insert(), [
            {**store_runs._record_row(r, r.to_json(), store.dialect, OWNER)} for r in many])
    assert [r.id for r in store.page_runs(OWNER)] == [r.id for r in many[1:]]


def test_the_learners_view_credits_only_explanations_written_with_the_owners_key(store):
    store.save(make_record(minutes=1, learner="Ada"), key_hash=OWNER)
    store.save(make_record(minutes=2, learner="Ada"), key_hash=ANOTHER)
    # Grace's imported record says it was explained; nothing says who wrote that.
    store.import_records([make_record(minutes=3, learner="Grace", explanation="rows sum to 1")])
    store.save(make_record(minutes=4, learner="Lin", explanation="saved with it"), key_hash=OWNER)
    ada = store.page_runs(ANOTHER)[0]
    with pytest.raises(NotOwnerError):  # the link-holder's try at Ada's run changes nothing
        store.update_explanation(ada.id, "someone else's words", key_hash=OWNER)

    def explained():
        return {r.learner: r.explained_at for r in store.learner_runs().learners}

    assert explained() == {"Ada": None, "Grace": None, "Lin": T0 + timedelta(minutes=4)}
    store.update_explanation(ada.id, "the mask comes first", key_hash=ANOTHER)
    assert explained()["Ada"] == T0 + timedelta(minutes=2)
    assert store.query(RunFilter(has_explanation=True)).total == 3  # the table still shows Grace's
    store.update_explanation(ada.id, " ", key_hash=ANOTHER)  # only whitespace: none
    assert explained()["Ada"] is None


# --- queries: filters, sorts, counts and pages in SQL ---------------------------------------


@pytest.fixture
def class_store(store) -> RunStore:
    rows = [(0, "correct", "Ada", "first try", None), (60 * 14, "mask_after_softmax", "Grace", "broken", "p"),
            (60 * 24, "no_mask", "ada lovelace", "open", None), (60 * 25, "correct", "Émile", "100%_done", "p"),
            (60 * 26, "mask_after_softmax", None, None, None)]
    for minutes, mode, learner, label, prediction in rows:
        store.save(make_record(mode, minutes=minutes, learner=learner, label=label, prediction=prediction))
    return store


def labels(page) -> list:
    return [r.label for r in page.runs]


def test_text_filters_are_contains_in_any_case_with_wildcards_taken_literally(class_store):
    s = class_store
    assert labels(s.query(RunFilter(learner=" ADA "))) == ["first try", "open"]
    assert labels(s.query(RunFilter(learner="émile"))) == ["100%_done"]  # beyond ASCII too
    assert labels(s.query(RunFilter(label="%"))) == ["100%_done"]
    assert labels(s.query(RunFilter(label="_"))) == ["100%_done"]
    assert s.query(RunFilter(label="o%e")).total == 0  # % is a percent sign, not "anything"


def test_mode_date_and_flag_filters(class_store):
    s = class_store
    assert labels(s.query(RunFilter(mode="Mask after softmax (broken)"))) == ["broken", None]
    assert labels(s.query(RunFilter(failure_mode="correct"))) == ["first try", "100%_done"]
    assert labels(s.query(RunFilter(has_prediction=True))) == ["broken", "100%_done"]
    assert labels(s.query(RunFilter(has_failed_checks=True))) == ["broken", "open", None]
    assert labels(s.query(RunFilter(has_failed_checks=False))) == ["first try", "100%_done"]
    # A local day in Berlin (UTC+1): 31 January is 30 Jan 23:00 to 31 Jan 23:00 UTC.
    day = datetime(2025, 1, 30, 23, 0, tzinfo=UTC)
    assert labels(s.query(RunFilter(created_from=day, created_before=day + timedelta(days=1)))) == ["first try"]
    assert labels(s.query(RunFilter(created_from=day + timedelta(days=1)))) == ["broken", "open", "100%_done", None]
    assert sorted(s.modes()) == ["Correct, causal", "Mask after softmax (broken)", "No mask"]


def test_the_modes_are_read_again_once_a_run_changed_the_store(store):
    store.save(make_record("correct", minutes=0))
    assert store.modes() == ["Correct, causal"]
    store.save(make_record("no_mask", minutes=1))  # the change token moves
    assert sorted(store.modes()) == ["Correct, causal", "No mask"]


def test_sort_count_and_page_run_in_sql(class_store):
    s = class_store
    page = s.query(sort=[("created_at", "desc")], limit=2, offset=1)
    assert labels(page) == ["100%_done", "open"] and page.total == 5
    assert s.count() == 5 and s.count(RunFilter(learner="ada")) == 2
    by_weight = s.query(sort=[("total_future_weight", "desc"), ("created_at", "asc")]).runs
    weights = [r.total_future_weight for r in by_weight]
    assert weights == sorted(weights, reverse=True)
    by_learner = s.query(sort=[("learner", "asc")]).runs
    assert by_learner[-1].learner is None  # missing values last on both dialects
    assert s.query(limit=0).runs == [] and s.query(offset=10).runs == []
    assert s.query(RunFilter(learner="ada"), limit=1).total == 2


def test_a_page_asked_not_to_count_runs_no_count(class_store):
    """The class picture's read of the newest runs: the same runs, no COUNT scan (the table's page counted them)."""
    from sqlalchemy import event

    statements = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    f, newest = RunFilter(learner="ada"), [("created_at", "desc")]
    event.listen(class_store.engine, "before_cursor_execute", keep)
    page = class_store.query(f, sort=newest, limit=1, counted=False)
    event.remove(class_store.engine, "before_cursor_execute", keep)
    assert labels(page) == ["open"] and page.total is None
    assert not [st for st in statements if "count(" in st.lower()]
    assert page.runs == class_store.query(f, sort=newest, limit=1).runs


@pytest.mark.parametrize("bad", [("record", "asc"), ("id; DROP TABLE workbench_runs", "asc"),
                                 ("created_at", "desc; --"), ("1", "asc")])
def test_a_sort_is_picked_by_name_never_written_into_sql(class_store, bad):
    with pytest.raises(ValueError):
        class_store.query(sort=[bad])
    assert class_store.count() == 5


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_forms_in_filters_are_plain_values(class_store, text):
    s = class_store
    f = RunFilter(learner=text, label=text, mode=text, failure_mode=text, ids=[text])
    assert s.query(f).total == 0
    for name in ("learner", "label"):
        assert s.query(RunFilter(**{name: text})).total == sum(
            text.strip().casefold() in (getattr(r, name) or "").casefold() for r in s.query().runs)
    assert s.query(RunFilter(mode=text)).total == s.query(RunFilter(failure_mode=text)).total == 0
    assert list(s.iter_texts(ids=[text])) == [] and s.existing_ids([text]) == set()
    assert s.count() == 5 and set(inspect(s.engine).get_table_names()) >= set(store_schema.TABLES)


def test_summaries_from_columns_equal_those_of_the_full_records(class_store):
    records = list(class_store.iter_records())
    assert class_store.query().runs == [RunSummary.of(r) for r in records]
    assert list(class_store.iter_summaries()) == [RunSummary.of(r) for r in records]
    assert export_csv(class_store.iter_summaries()) == export_csv(records)


def test_csv_rows_read_from_the_columns_give_the_csv_of_the_full_records(store):
    """The export command's CSV (no summary per run) is the CSV of the records: formula guards,
    quotes, missing numbers, failed checks, matrix mode; all runs, by filters and by ids."""
    overflow = scaled_dot_product_attention([1000.0] * 3, [1.0, 2.0, 3.0], failure_mode="naive_softmax")
    matrix = self_attention(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.eye(2), np.eye(2), np.eye(2))
    records = [make_record("correct", minutes=1, learner="=HYPERLINK(1)", label="-1", prediction="\tp",
                           notes='@x, "quoted"\r\nline'),
               make_record("mask_after_softmax", minutes=2, learner="Grace", explanation="+2"),
               ExperimentRecord.from_result(overflow, created_at=T0 + timedelta(minutes=3), label="overflow"),
               ExperimentRecord.from_result(matrix, created_at=T0 + timedelta(minutes=4), learner="Ada")]
    store.import_records(records)
    assert "".join(iter_csv(store.iter_csv_rows())) == export_csv(records) == export_csv(store.iter_summaries())
    kept = RunFilter(learner="a")
    assert "".join(iter_csv(store.iter_csv_rows(kept))) == export_csv(store.iter_summaries(kept))
    ids = [records[3].id, "missing", records[0].id]
    assert "".join(iter_csv(store.iter_csv_rows(ids=ids))) == export_csv([records[3], records[0]])
    assert "".join(iter_csv(store.iter_csv_rows(RunFilter(label="none such")))) == export_csv([])


def test_iter_by_ids_keeps_their_order_and_leaves_missing_ones_out(class_store):
    ids = [r.id for r in class_store.query().runs]
    wanted = [ids[3], "missing", ids[0], ids[3]]
    assert [json.loads(t)["id"] for t in class_store.iter_texts(ids=wanted)] == [ids[3], ids[0]]
    assert class_store.existing_ids(wanted) == {ids[0], ids[3]}


def test_change_token_moves_on_every_save_explanation_and_import(store):
    seen = [store.change_token()]
    record = make_record()
    store.save(record, key_hash=OWNER)
    seen.append(store.change_token())
    store.update_explanation(record.id, "why", key_hash=OWNER)
    seen.append(store.change_token())
    imported = make_record(minutes=1)
    store.import_records([imported])
    seen.append(store.change_token())
    store.import_records([imported])  # nothing new: skipped
    assert store.change_token() == seen[-1]
    assert len(set(seen)) == 4


# --- exports -----------------------------------------------------------------------------


def test_note_once_is_true_only_the_first_time_in_any_process_and_moves_no_token(store):
    token = store.change_token()
    assert store.note_once("import hint for /home/ada/runs") is True
    assert store.note_once("import hint for /home/ada/runs") is False
    with RunStore(store_url_of(store)) as other:  # another server process on the same store
        assert other.note_once("import hint for /home/ada/runs") is False
        assert other.note_once("import hint for /srv/\udcff/runs") is True  # a path not in UTF-8
    assert store.change_token() == token and store.count() == 0


def test_json_export_is_byte_for_byte_the_stored_records(class_store):
    texts = list(class_store.iter_texts())
    bundle_text = "".join(iter_export_json(class_store.iter_texts()))
    bundle = json.loads(bundle_text, parse_constant=refuse_constant)
    assert bundle["format"] == "attention-workbench-runs" and bundle["skipped"] == []
    assert [line.rstrip(",") for line in bundle_text.splitlines()[1:-1]] == texts
    assert [ExperimentRecord.from_dict(r) for r in bundle["runs"]] == list(class_store.iter_records())


def test_export_csv_one_row_per_run_with_formula_guard():
    plain = make_record(minutes=0, learner="Ada", label="first try")
    hostile = make_record("mask_after_softmax", minutes=1, learner="=1+1", label="@SUM(A1)",
                          prediction="-2", explanation="+x", notes="line\nbreak, \"quoted\"")
    text = export_csv([plain, hostile])
    assert text.startswith(",".join(CSV_COLUMNS) + "\r\n")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert rows[0]["learner"] == "Ada" and rows[0]["causal"] == "true" and rows[0]["T"] == "3"
    assert rows[1]["learner"] == "'=1+1" and rows[1]["label"] == "'@SUM(A1)"
    assert rows[1]["prediction"] == "'-2" and rows[1]["explanation"] == "'+x"
    assert rows[1]["notes"] == "line\nbreak, \"quoted\""
    assert float(rows[1]["min_row_sum"]) < 1


@pytest.mark.parametrize("count", [0, 1, 3])
def test_export_json_writes_a_run_per_line(count):
    records = [make_record(minutes=m, learner="Ada\u202e", notes="x\ny") for m in range(count)]
    text = export_json(records)
    bundle = json.loads(text, parse_constant=refuse_constant)
    assert bundle["runs"] == [r.to_dict() for r in records]
    assert bundle["skipped"] == []
    assert text.endswith("}\n")


# --- import -----------------------------------------------------------------------------


def test_import_adds_skips_the_same_and_refuses_a_different_run_of_an_id(store):
    kept = make_record(minutes=0, learner="Ada")
    store.save(kept)
    changed = dataclasses.replace(kept, learner="Mallory")
    new = make_record(minutes=1)
    bundle = export_json([kept, changed, new, new]).encode()
    report = import_data(store, "class.json", bundle)
    # The refused run keeps the file out whole: the new one is held back, never half imported.
    assert report.read and report.imported == [] and report.held_back == [new.id]
    assert report.skipped == [kept.id, new.id] and report.refused == [kept.id]
    assert store.get(kept.id) == kept  # never overwritten
    assert store.count() == 1
    assert import_data(store, "class.json", export_json([kept, new]).encode()).imported == [new.id]


def test_import_of_a_record_file_and_of_bad_files(store):
    record = make_record()
    assert import_data(store, "r.json", record.to_json().encode()).imported == [record.id]
    assert import_data(store, "r.json", record.to_json(indent=2).encode()).skipped == [record.id]
    for data, reason in [(b"{not json", "not valid JSON"), (b"[1, 2]", "neither an experiment record"),
                         (b'{"format": "attention-workbench-runs"}', "without a list of runs"),
                         (b"\xff\xfe", "not valid JSON")]:
        report = import_data(store, "bad.json", data)
        assert not report.read and reason in report.error, (data[:40], report.error)
    # A record read but not valid is "not valid", as in a bundle, not a file not read.
    for data, reason in [(record.to_json().replace('"scores"', '"scorez"').encode(), "results"),
                         (b'{"schema_version": 9}', "newer workbench")]:
        report = import_data(store, "bad.json", data)
        assert report.read and not report.taken and reason in report.invalid[0][1], (data[:40], report.invalid)
    assert store.count() == 1


def test_a_created_at_without_offset_is_imported_as_utc_with_a_note(store):
    data = make_record().to_dict()
    data["created_at"] = "2025-01-31T09:15:02.123456"
    report = import_data(store, "other-tool.json", json.dumps(data).encode())
    assert report.imported == [data["id"]]
    assert report.notes == [f"run {data['id']}: created_at 2025-01-31T09:15:02.123456 has no UTC offset; "
                            "imported as UTC"]
    assert store.get(data["id"]).created_datetime == T0


@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_forms_in_imported_fields_are_stored_as_text(store, text):
    record = make_record(learner=text[:100], label=text[:100], prediction=text, notes=text)
    if "\0" in text:  # a NUL is not text a learner typed: refused, naming the field
        assert import_data(store, "x.json", record.to_json().encode()).invalid == [
            ("", "learner holds U+0000 (a control character), which the workbench never stores or shows; "
                 "remove it from the file")]
        assert store.count() == 0
        return
    assert import_data(store, "x.json", record.to_json().encode()).imported == [record.id]
    assert store.get(record.id) == record
    assert store.query(RunFilter(label=text)).total == 1
    hostile_id = dict(record.to_dict(), id=text)
    if text != "_":  # "_" is a plain run id
        assert not import_data(store, "y.json", json.dumps(hostile_id).encode()).taken
        assert store.count() == 1


def test_one_transaction_per_file_nothing_half_imported(store, monkeypatch):
    records = [make_record(minutes=m) for m in range(3)]

    def fail_after_the_inserts(conn):
        raise RuntimeError("the process died here")

    monkeypatch.setattr(RunStore, "_changed", staticmethod(fail_after_the_inserts))
    with pytest.raises(RuntimeError):
        import_data(store, "bundle.json", export_json(records).encode())
    monkeypatch.undo()
    assert store.count() == 0
    assert import_data(store, "bundle.json", export_json(records).encode()).imported == [r.id for r in records]


# --- opening a store: versions, corrupt and foreign files ------------------------------------


def test_a_new_store_has_the_current_version_and_reopens(tmp_path):
    url = sqlite_url(tmp_path / "runs.db")
    with RunStore(url) as store:
        assert store.version == store_schema.current_version() == 6
        store.save(make_record())
    with RunStore(url, create=False) as again:
        assert again.count() == 1


def test_an_older_store_is_upgraded_on_open_and_keeps_its_runs(store_url, monkeypatch):
    with RunStore(store_url) as old:
        record = make_record()
        old.save(record)

    def add_an_index(conn):  # what a later release's step looks like
        conn.exec_driver_sql("CREATE INDEX ix_test_upgrade ON workbench_runs (notes)")

    monkeypatch.setattr(store_schema, "UPGRADES", [*store_schema.UPGRADES, add_an_index])
    with RunStore(store_url) as upgraded:
        assert upgraded.version == 7
        assert upgraded.get(record.id) == record
        assert "ix_test_upgrade" in {i["name"] for i in inspect(upgraded.engine).get_indexes("workbench_runs")}
    with RunStore(store_url) as again:  # upgraded once: the step does not run again
        assert again.version == 7


def back_to_version_5(conn) -> None:
    """A current store as version 5 left it: no page keys, the learners index of version 3."""
    for index in ("ix_workbench_runs_learner_owner_progress", "ix_workbench_runs_page"):
        conn.exec_driver_sql(f"DROP INDEX {index}")
    for name in ("page_key_hash", "explained_by_owner"):
        conn.exec_driver_sql(f'ALTER TABLE workbench_runs DROP COLUMN "{name}"')
    store_schema._LEARNERS_INDEX.create(conn)
    conn.execute(store_schema.meta.update().where(store_schema.meta.c.name == "store_version").values(value=5))


def test_a_version_5_store_gets_page_keys_and_no_run_of_it_is_changeable_or_credited(store_url):
    explained = make_record(minutes=1, learner="Ada", explanation="written before keys")
    with RunStore(store_url) as store:
        store.save(explained, key_hash=OWNER)
        with store.engine.begin() as conn:
            back_to_version_5(conn)
    with RunStore(store_url) as upgraded:
        assert upgraded.version == store_schema.current_version() == 6
        indexes = {i["name"]: i["column_names"] for i in inspect(upgraded.engine).get_indexes("workbench_runs")}
        assert indexes["ix_workbench_runs_page"] == ["page_key_hash", "created_at", "id"]
        assert "ix_workbench_runs_learner_progress" not in indexes
        assert upgraded.get(explained.id) == explained and upgraded.page_runs(OWNER) == []
        (ada,) = upgraded.learner_runs().learners
        assert (ada.runs, ada.explained_at) == (1, None)  # nothing says who wrote it
        with pytest.raises(NotOwnerError):
            upgraded.update_explanation(explained.id, "mine now?", key_hash=OWNER)


def test_a_version_1_store_gets_the_sort_indexes_and_keeps_its_runs(store_url):
    with RunStore(store_url) as store:
        records = [make_record(minutes=m, learner=f"L{m}") for m in range(3)]
        for record in records:
            store.save(record)
        with store.engine.begin() as conn:  # back to version 1: each column indexed alone
            for name in ("learner", "total_future_weight"):
                conn.exec_driver_sql(f"DROP INDEX ix_workbench_runs_{name}")
                conn.exec_driver_sql(f"CREATE INDEX ix_workbench_runs_{name} ON workbench_runs ({name})")
            conn.execute(store_schema.meta.update().where(store_schema.meta.c.name == "store_version")
                         .values(value=1))
    with RunStore(store_url) as upgraded:
        assert upgraded.version == store_schema.current_version()
        indexes = {i["name"]: i["column_names"] for i in inspect(upgraded.engine).get_indexes("workbench_runs")}
        assert indexes["ix_workbench_runs_learner"] == ["learner", "created_at", "id"]
        assert indexes["ix_workbench_runs_total_future_weight"] == ["total_future_weight", "created_at", "id"]
        page = upgraded.query(sort=[("learner", "desc"), ("created_at", "desc")], limit=2, offset=1)
        assert [r.learner for r in page.runs] == ["L1", "L0"] and page.total == 3


def test_a_version_2_store_counts_blank_text_as_none_and_gets_the_learners_index(store_url):
    with RunStore(store_url) as store:
        runs = [make_record(minutes=1, learner="Ada", prediction=" \u3000", explanation="\t"),
                make_record(minutes=2, learner="Ada", prediction="p", explanation=" e ")]
        store.import_records(runs)
        assert store.count(RunFilter(has_prediction=True)) == store.count(RunFilter(has_explanation=True)) == 1
        with store.engine.begin() as conn:  # back to version 2: any text was flagged, no such index
            back_to_version_5(conn)
            conn.execute(store_schema.runs.update().values(has_prediction=True, has_explanation=True))
            conn.exec_driver_sql("DROP INDEX ix_workbench_runs_learner_progress")
            conn.execute(store_schema.meta.update().where(store_schema.meta.c.name == "store_version")
                         .values(value=2))
    with RunStore(store_url) as upgraded:
        assert upgraded.version == store_schema.current_version()
        assert upgraded.count(RunFilter(has_prediction=True)) == upgraded.count(RunFilter(has_explanation=True)) == 1
        (ada,) = upgraded.learner_runs().learners
        # Imported: the explanation is the record's word alone, so not credited (version 6).
        assert (ada.predicted_at, ada.explained_at) == (runs[1].created_datetime, None)
        # Version 3 made the learners index; version 6 replaced it with the key-checked one.
        assert "ix_workbench_runs_learner_owner_progress" in {
            i["name"] for i in inspect(upgraded.engine).get_indexes("workbench_runs")}


def sqlite_query_plan(tmp_path, read, marker: str) -> str:
    """SQLite's plan for the statement holding ``marker`` that ``read(store)`` runs, over a store
    of one run (the SQL function the store registers stands in as a stub)."""
    from sqlalchemy import event

    seen = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    with RunStore(sqlite_url(tmp_path / "runs.db")) as store:
        store.save(make_record(learner="Ada", label="first", prediction="p"))
        event.listen(store.engine, "before_cursor_execute", keep)
        read(store)
        event.remove(store.engine, "before_cursor_execute", keep)
    statement, parameters = next((st, p) for st, p in seen if marker in st)
    raw = sqlite3.connect(tmp_path / "runs.db")
    raw.create_function("workbench_contains", 2, lambda a, b: 0)
    try:
        return " ".join(str(row) for row in raw.execute("EXPLAIN QUERY PLAN " + statement, parameters))
    finally:
        raw.close()


def test_the_learners_view_reads_its_index_alone_on_sqlite(tmp_path):
    """Its GROUP BY never reads the runs' rows (each holds a whole record): a covering index."""
    plan = sqlite_query_plan(tmp_path, lambda store: store.learner_runs(), "GROUP BY")
    assert "COVERING INDEX ix_workbench_runs_learner_owner_progress" in plan


def test_a_version_3_store_gets_the_newest_runs_index_with_the_text_filters_columns(store_url):
    with RunStore(store_url) as store:
        store.save(make_record(learner="Ada", label="first"))
        with store.engine.begin() as conn:  # back to version 3: the default order's index without the texts
            conn.exec_driver_sql("DROP INDEX ix_workbench_runs_newest_texts")
            conn.exec_driver_sql("CREATE INDEX ix_workbench_runs_created_at_id ON workbench_runs (created_at, id)")
            conn.execute(store_schema.meta.update().where(store_schema.meta.c.name == "store_version")
                         .values(value=3))
    with RunStore(store_url) as upgraded:
        assert upgraded.version == store_schema.current_version()
        indexes = {i["name"]: i["column_names"] for i in inspect(upgraded.engine).get_indexes("workbench_runs")}
        assert indexes["ix_workbench_runs_newest_texts"] == ["created_at", "id", "learner", "label"]
        assert "ix_workbench_runs_created_at_id" not in indexes
        assert labels(upgraded.query(RunFilter(learner="ADA", label="irs"), sort=[("created_at", "desc")],
                                     limit=20)) == ["first"]


def test_a_version_4_store_gets_the_complete_layers_columns_from_its_records(store_url):
    tests = Path(__file__).resolve().parent
    records = [ExperimentRecord.from_json(path.read_bytes())
               for path in sorted(tests.glob("records_v[12]/*.json"))]
    with RunStore(store_url) as store:
        store.import_records(records)
        with store.engine.begin() as conn:  # back to version 4: no columns for the complete layer
            for name in store_schema._LAYER_COLUMNS:
                conn.exec_driver_sql(f'ALTER TABLE workbench_runs DROP COLUMN "{name}"')
            conn.execute(store_schema.meta.update().where(store_schema.meta.c.name == "store_version")
                         .values(value=4))
    with RunStore(store_url) as upgraded:
        assert upgraded.version == 6
        by_id = {s.id: s for s in upgraded.query().runs}
        assert by_id == {r.id: RunSummary.of(r) for r in records}  # the columns as a save fills them
        assert {(s.B, s.T_k == s.T, s.has_w_o, s.cross_attention, s.causal_alignment, s.ablation_target)
                for s in by_id.values()} == {(1, True, False, False, None, None)}
        assert {i: s.d_v for i, s in by_id.items()} == {r.id: r.d_v for r in records}
        oldest_first = sorted(records, key=lambda r: r.created_datetime)
        assert "".join(iter_csv(upgraded.iter_csv_rows())) == export_csv(oldest_first)


def test_a_text_filter_on_the_newest_runs_reads_an_index_alone_on_sqlite(tmp_path):
    """The table's first page and the class picture under a learner or label filter never read the
    runs' rows (each holds a whole record) to find the runs that pass: the index holds the texts."""
    plan = sqlite_query_plan(tmp_path, lambda store: store.query(
        RunFilter(learner="ad", label="fi"), sort=[("created_at", "desc")], limit=20, counted=False), "LIMIT")
    assert "SCAN workbench_runs USING COVERING INDEX ix_workbench_runs_newest_texts" in plan


def test_a_store_from_a_newer_workbench_is_refused_with_a_message(store_url):
    with RunStore(store_url) as store:
        with store.engine.begin() as conn:
            conn.execute(store_schema.meta.update().where(store_schema.meta.c.name == "store_version")
                         .values(value=7))
    with pytest.raises(StoreOpenError, match=r"made by a newer attention-workbench \(store version 7; "
                                             r"this one reads versions up to 6\): upgrade"):
        RunStore(store_url)


@pytest.mark.parametrize(("content", "why"), [
    (b"this is not a database at all" * 100, "is not a database file"),
    (b"SQLite format 3\x00" + b"\x00" * 84 + b"garbage" * 200, "is not a database file|is damaged"),
])
def test_a_corrupt_file_is_a_clear_message_not_a_traceback(tmp_path, content, why):
    path = tmp_path / "runs.db"
    path.write_bytes(content)
    with pytest.raises(StoreOpenError, match=f"Store not opened: the store {path} ({why})"):
        RunStore(sqlite_url(path))
    assert path.read_bytes() == content


def test_another_programs_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (n INTEGER)")
    before = path.read_bytes()
    with pytest.raises(StoreOpenError, match="another program's database \\(tables: invoices\\)"):
        RunStore(sqlite_url(path))
    assert path.read_bytes() == before


def test_export_never_creates_a_store(tmp_path):
    with pytest.raises(StoreOpenError, match="there is no store at"):
        RunStore(sqlite_url(tmp_path / "none.db"), create=False)
    assert not (tmp_path / "none.db").exists()
    (tmp_path / "empty.db").touch()
    with pytest.raises(StoreOpenError, match="holds no runs yet"):
        RunStore(sqlite_url(tmp_path / "empty.db"), create=False)


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout_and_foreign_keys(tmp_path):
    from app.shutdown import SHUTDOWN_GRACE_S
    from app.store.dialects import BUSY_TIMEOUT_S

    # Long enough for a class's writers to take turns (Python's own default is 5 s), shorter than
    # the default shutdown grace: a save waiting on a held store ends, and is told, before it.
    assert 5 <= BUSY_TIMEOUT_S < SHUTDOWN_GRACE_S
    with RunStore(sqlite_url(tmp_path / "runs.db")) as store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == int(BUSY_TIMEOUT_S * 1000)
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_the_password_of_a_store_url_is_never_shown():
    with pytest.raises(StoreOpenError) as caught:
        RunStore("postgresql+psycopg://teacher:s3cret@127.0.0.1:1/class")
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)
    assert "cannot be reached" in str(caught.value)
    # A password holding '@' not percent-encoded: SQLAlchemy would read its rest as the host and
    # the database, shown in the message (a newcomer saw 9 of its 11 characters there).
    for url in ("postgresql+psycopg://teacher:p@ss/w:rd#1@localhost:5890/class",
                "postgresql+psycopg://teacher:p@ss@w@rd@localhost/class"):
        with pytest.raises(StoreOpenError, match="percent-encode its password") as caught:
            RunStore(url)
        message = str(caught.value)
        assert "postgresql+psycopg://***@localhost" in message
        assert not any(part in message for part in ("teacher", "ss/w", "rd#1", "w@rd")), message
    with pytest.raises(StoreOpenError, match="is not a store URL") as caught:
        RunStore("not a url teacher:s3cret@host")
    assert "s3cret" not in str(caught.value) and "teacher" not in str(caught.value)


def test_a_store_that_refuses_the_login_says_so_not_that_it_cannot_be_reached():
    """PostgreSQL reached, the URL's password wrong: the operator reads "refused the login" (a
    newcomer read "cannot be reached" for a server that answered); a learner, as before, only
    that it cannot be reached just now."""
    from sqlalchemy.engine import make_url

    from app.store.dialects import store_error

    url = make_url("postgresql+psycopg://teacher:wrong@127.0.0.1:5432/class")
    said = ('connection failed: connection to server at "127.0.0.1", port 5432 failed: '
            'FATAL:  password authentication failed for user "teacher"')
    error = store_error(OSError(said), url, "Store not opened")
    assert str(error) == (f"Store not opened: the store postgresql+psycopg://teacher:***@127.0.0.1:5432/class "
                          f"refused the login ({said}).")
    assert error.for_learner() == "Store not opened: the store cannot be reached just now."
    down = store_error(OSError("connection failed: Connection refused"), url, "Store not opened")
    assert "cannot be reached (connection failed: Connection refused)" in str(down)


def test_records_older_than_now_sort_by_their_utc_time_not_their_text(store):
    # 10:00+02:00 is 08:00 UTC: before 09:15 UTC although its text sorts after.
    early = dict(make_record(minutes=0).to_dict(), id="early", created_at="2025-01-31T10:00:00+02:00")
    store.import_records([ExperimentRecord.from_dict(early), make_record(minutes=0)])
    assert [r.id for r in store.query().runs][0] == "early"


# --- reliability: several processes, and a writer killed mid-save ---------------------------


TESTS = Path(__file__).resolve().parent
WRITER = TESTS / "store_writer.py"


def writer_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}


def test_four_processes_saving_fifty_runs_each_lose_nothing(store_url, tmp_path):
    # Without the busy timeout and IMMEDIATE transactions, SQLite's writers fail with "database is locked".
    RunStore(store_url).close()  # made once, so the writers race on saves, not on creating tables
    go = tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, str(WRITER), store_url, "50", str(go)], env=writer_env(),
                                stderr=subprocess.PIPE, text=True) for _ in range(4)]
    go.touch()
    results = [w.communicate(timeout=300) for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0, 0], [err[-2000:] for _, err in results]
    with RunStore(store_url) as store:
        assert store.count() == 200
        records = list(store.iter_records())
        assert len({r.id for r in records}) == 200
        assert sorted({r.learner for r in records}) == sorted(f"writer {w.pid}" for w in writers)
        assert store.change_token() == 200


def test_a_writer_killed_mid_save_loses_no_committed_run_and_the_store_opens(store_url, tmp_path):
    RunStore(store_url).close()
    done = tmp_path / "committed.txt"
    writer = subprocess.Popen([sys.executable, str(WRITER), store_url, "0", "-", str(done)], env=writer_env())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not done.exists() or len(done.read_text().split()) < 20):
            time.sleep(0.01)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    committed = done.read_text().split()
    assert len(committed) >= 20
    with RunStore(store_url) as store:  # opens: nothing half-written to recover by hand
        texts = list(store.iter_texts())
        ids = {json.loads(t)["id"] for t in texts}
        assert set(committed) <= ids and len(ids) - len(committed) <= 1  # at most the one in flight
        for text in texts[:3]:  # jsonschema is slow on 16×16×64 contributions: a sample suffices
            check_strict(ExperimentRecord.from_json(text))
        for text in texts:
            json.loads(text, parse_constant=refuse_constant)
        store.save(make_record())  # and takes new runs


def within(seconds: float, call, *args, **kwargs):
    """``call(*args, **kwargs)``'s result or exception, failing the test if it takes longer than
    ``seconds`` (left running in a daemon thread, so a store call that never ends fails, not hangs)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = call(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - raised again below, in the test's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{call.__name__} still waiting after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def test_a_postgresql_table_locked_past_the_busy_timeout_refuses_the_save_as_busy(postgres_server, monkeypatch):
    # A session holding the runs table would otherwise hold a save (and its page) as long as it likes.
    import psycopg

    from app.store import dialects

    monkeypatch.setattr(dialects, "BUSY_TIMEOUT_S", 0.5)
    url = postgres_server.new_database()
    with RunStore(url) as store, psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as lock:
        lock.execute("LOCK TABLE workbench_runs IN EXCLUSIVE MODE")
        with pytest.raises(StoreError) as refused:
            within(10, store.save, make_record(), key_hash=OWNER)
        assert str(refused.value).startswith("Run not saved: the store postgresql+psycopg://")
        assert str(refused.value).endswith(" is busy (another session held it longer than 0.5 s); try again.")
        assert refused.value.for_learner() == \
            "Run not saved: the store is busy (another session held it longer than 0.5 s); try again."
        assert refused.value.errno == errno.EBUSY  # an instructor page says busy, not gone
        lock.rollback()
        assert store.count() == 0
        store.save(make_record(), key_hash=OWNER)  # and once the lock is gone, saves go on
        assert store.count() == 1


def test_a_postgresql_host_that_never_answers_is_given_up_after_the_connect_timeout(monkeypatch):
    # A listening port that never answers, as a vanished database host behind a live address.
    import socket

    from app.store import dialects

    monkeypatch.setattr(dialects, "CONNECT_TIMEOUT_S", 2)  # libpq's least
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with pytest.raises(StoreOpenError) as refused:
            within(15, RunStore, f"postgresql+psycopg://nobody@127.0.0.1:{silent.getsockname()[1]}/runs")
    assert "cannot be reached" in str(refused.value), refused.value


def test_an_invalid_record_in_a_bundle_is_named_and_keeps_the_file_out(store):
    good = make_record()
    bad = dict(make_record(minutes=1).to_dict())
    bad["inputs"] = dict(bad["inputs"], queries=["1", 2, 3])
    bundle = json.dumps({"format": "attention-workbench-runs", "runs": [bad, good.to_dict()], "skipped": []})
    report = import_data(store, "bundle.json", bundle.encode())
    assert report.read and report.imported == [] and report.held_back == [good.id] and store.count() == 0
    assert [where for where, _ in report.invalid] == ["runs[0]"]
    assert "inputs.queries" in report.invalid[0][1]
    assert report.lines()[0] == "bundle.json: nothing imported (a file is taken whole), held back 1 valid, 1 not valid"
    assert report.lines()[1].startswith("bundle.json runs[0]: not an experiment record: inputs.queries")


def test_the_same_failure_is_logged_once_a_minute_with_how_often_it_came(tmp_path, caplog, monkeypatch):
    """A store that is down fails every read alike (an instructor page reads it every second): one
    line a minute per failure, not one per read."""
    import app.store.runs as runs_module

    clock = [1000.0]
    monkeypatch.setattr(runs_module.time, "monotonic", lambda: clock[0])
    path = tmp_path / "runs.db"
    store = RunStore(sqlite_url(path))
    try:
        for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
            (path.parent / name).unlink(missing_ok=True)
        store.engine.dispose()  # no pooled connection still reading the deleted file
        caplog.set_level("ERROR", logger=runs_module._log.name)

        def failures() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.getMessage().startswith("store error")]

        for _ in range(30):  # a minute of reads, one every 2 s
            with pytest.raises(StoreError, match="Runs not read"):
                store.count()
            clock[0] += 2.0
        assert len(failures()) == 1 and "repeated" not in failures()[0], failures()
        with pytest.raises(StoreError):
            store.count()
        assert len(failures()) == 2 and failures()[1].endswith(" repeated=29"), failures()
    finally:
        store.close()
