"""The run store: atomic saves, concurrent writers, SIGKILL, a dirty directory, disk errors."""

from __future__ import annotations

import csv
import dataclasses
import errno
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from store_helpers import check_strict, make_record, refuse_constant

from attention_core import store as store_module
from attention_core.records import ExperimentRecord
from attention_core.store import (
    CSV_COLUMNS,
    MAX_RECORD_BYTES,
    RunStore,
    StoreError,
    export_csv,
    export_json,
    resolve_runs_dir,
)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
WRITER = TESTS / "store_writer.py"


def writer_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}


def test_save_writes_one_strict_json_file_named_by_id(tmp_path):
    store = RunStore(tmp_path / "runs" / "nested")
    record = make_record(learner="Ada")
    path = store.save(record)
    assert path == store.directory / f"{record.id}.json"
    assert ExperimentRecord.from_json(path.read_bytes()) == record
    json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse_constant)
    assert sorted(p.name for p in store.directory.iterdir()) == [path.name]  # no temp left
    assert store.get(record.id) == record


def test_list_sorts_by_created_at_then_id(tmp_path):
    store = RunStore(tmp_path)
    for minutes, run_id in [(5, "b"), (1, "z"), (5, "a"), (3, "m")]:
        store.save(make_record(minutes=minutes, record_id=run_id))
    listing = store.list()
    assert [r.id for r in listing.records] == ["z", "m", "a", "b"]
    assert listing.problems == []


def test_saving_an_existing_id_never_overwrites(tmp_path):
    store = RunStore(tmp_path)
    first = make_record(record_id="same", learner="first")
    path = store.save(first)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="already exists"):
        store.save(make_record(record_id="same", learner="second"))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["same.json"]


@pytest.mark.parametrize("bad_id", [
    "../outside", "..", ".", "/etc/passwd", "a/b", "a\\b", "%2e%2e%2fx", "..%2F..%2Fetc",
    "", "x" * 65, "abc.json", "a b", "a\x00b", "\u00e9", None, 5,
])
def test_get_refuses_anything_but_a_run_id(tmp_path, bad_id):
    store = RunStore(tmp_path / "runs")
    (tmp_path / "outside.json").write_text(make_record(record_id="outside").to_json())
    with pytest.raises(ValueError, match="not a run id"):
        store.get(bad_id)


def test_get_of_a_missing_run_is_a_key_error(tmp_path):
    with pytest.raises(KeyError):
        RunStore(tmp_path).get("nope")


def _dirty_store(tmp_path) -> tuple[RunStore, list[ExperimentRecord], Path]:
    store = RunStore(tmp_path / "runs")
    good = [store.save(make_record(minutes=m)) for m in range(3)]
    d = store.directory
    (d / "corrupt.json").write_text('{"schema_version": 1, "id": "corrupt", ')
    (d / "empty.json").write_bytes(b"")
    (d / "foreign.json").write_text('{"name": "package", "version": "1.0.0"}')
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "nan.json").write_text(make_record(record_id="nan").to_json().replace(
        '"total_future_weight": 0.0', '"total_future_weight": NaN'))
    newer = make_record(record_id="newer").to_dict() | {"schema_version": 3}
    (d / "newer.json").write_text(json.dumps(newer))
    (d / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    with open(d / "huge.json", "wb") as f:  # sparse: big by stat, cheap on disk
        f.truncate(MAX_RECORD_BYTES + 1)
    (d / "notes.txt").write_text("hello")
    (d / "has space.json").write_text(make_record(record_id="space").to_json())
    (d / "renamed.json").write_text(make_record(record_id="original").to_json())
    (d / "folder.json").mkdir()
    outside = tmp_path / "secret.json"
    outside.write_text(make_record(record_id="secret").to_json())
    (d / "secret.json").symlink_to(outside)
    os.mkfifo(d / "pipe.json")
    (d / ".half-written.tmp").write_text('{"schema_ver')
    return store, [ExperimentRecord.from_json(p.read_bytes()) for p in good], d


EXPECTED_PROBLEMS = {
    "binary.json": "not valid JSON",
    "corrupt.json": "not valid JSON",
    "empty.json": "empty file",
    "folder.json": "not a regular file",
    "foreign.json": "not an experiment record",
    "has space.json": "not a run file",
    "huge.json": "larger than 2 MiB",
    "list.json": "not an experiment record",
    "nan.json": "not valid JSON",
    "newer.json": "newer workbench",
    "notes.txt": "not a run file",
    "pipe.json": "not a regular file",
    "renamed.json": "does not match its file name",
    "secret.json": "not a regular file",
}


def test_a_dirty_store_is_reported_and_skipped_never_fatal(tmp_path, monkeypatch):
    store, good, d = _dirty_store(tmp_path)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(Path(path).name)
                        or real_open(path, *a, **k))
    listing = store.list()
    assert listing.records == good
    problems = dict(listing.problems)
    assert set(problems) == set(EXPECTED_PROBLEMS)
    for name, reason in EXPECTED_PROBLEMS.items():
        assert reason in problems[name], (name, problems[name])
    for never_read in ("huge.json", "pipe.json", "secret.json", "folder.json", "notes.txt"):
        assert never_read not in opened
    assert [p for p, _ in listing.problems] == sorted(problems)  # stable order for display

    bundle = json.loads(export_json(listing.records, listing.problems))
    assert [r["id"] for r in bundle["runs"]] == [r.id for r in good]
    assert {s["file"] for s in bundle["skipped"]} == set(EXPECTED_PROBLEMS)
    rows = list(csv.DictReader(io.StringIO(export_csv(listing.records))))
    assert [row["id"] for row in rows] == [r.id for r in good]


def test_listing_again_rereads_only_changed_files(tmp_path, monkeypatch):
    store, good, d = _dirty_store(tmp_path)
    store.list()
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(Path(path).name)
                        or real_open(path, *a, **k))
    again = store.list()
    assert opened == []
    assert again.records == good and len(again.problems) == len(EXPECTED_PROBLEMS)

    (d / "corrupt.json").write_text(make_record(record_id="corrupt", minutes=9).to_json())
    (d / f"{good[0].id}.json").unlink()
    third = store.list()
    assert opened == ["corrupt.json"]
    assert [r.id for r in third.records] == [good[1].id, good[2].id, "corrupt"]
    assert "corrupt.json" not in dict(third.problems)


def test_temp_files_are_ignored_and_old_ones_cleaned_up(tmp_path):
    store = RunStore(tmp_path)
    kept = store.save(make_record())
    old, fresh = tmp_path / ".old123.tmp", tmp_path / ".fresh456.tmp"
    old.write_text('{"half')
    fresh.write_text('{"half')
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert store.list().problems == []
    assert store.cleanup_temp_files(older_than_seconds=600) == 1
    assert not old.exists() and fresh.exists() and kept.exists()
    assert store.cleanup_temp_files(older_than_seconds=0) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [kept.name]


@pytest.mark.parametrize(("where", "code", "message"), [
    ("mkstemp", errno.EROFS, "Run not saved: the runs directory .* is read-only."),
    ("mkstemp", errno.EACCES, "Run not saved: no permission to write to the runs directory"),
    ("fsync", errno.ENOSPC, "Run not saved: the runs directory .* is full."),
    ("link", errno.ENOSPC, "Run not saved: the runs directory .* is full."),
    ("link", errno.EROFS, "is read-only"),
    ("link", errno.EIO, r"could not be written \(Input/output error\)"),
])
def test_disk_errors_give_a_clear_message_and_leave_no_partial_file(
    tmp_path, monkeypatch, where, code, message
):
    store = RunStore(tmp_path)
    existing = store.save(make_record(minutes=0))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    target = {"mkstemp": (tempfile, "mkstemp"), "fsync": (os, "fsync"), "link": (os, "link")}
    monkeypatch.setattr(*target[where], fail)
    with pytest.raises(StoreError, match=message) as caught:
        store.save(make_record(minutes=1))
    monkeypatch.undo()
    assert isinstance(caught.value, OSError) and caught.value.errno == code
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert store.list().records == [ExperimentRecord.from_json(existing.read_bytes())]


def test_a_runs_directory_that_cannot_be_created_is_a_store_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreError, match="Runs directory not created"):
        RunStore(tmp_path / "file" / "runs")


def test_four_processes_saving_fifty_runs_each_lose_nothing(tmp_path):
    runs, go = tmp_path / "runs", tmp_path / "go"
    writers = [
        subprocess.Popen([sys.executable, str(WRITER), str(runs), "50", str(go)], env=writer_env())
        for _ in range(4)
    ]
    go.touch()
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    listing = RunStore(runs).list()
    assert listing.problems == []
    assert len(listing.records) == 200
    assert len({r.id for r in listing.records}) == 200
    assert not [p for p in runs.iterdir() if p.name.startswith(".")]


def test_a_writer_killed_mid_save_leaves_every_json_readable(tmp_path):
    runs = tmp_path / "runs"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(runs), "0"], env=writer_env())
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not runs.is_dir() or len(list(runs.glob("*.json"))) < 25
        ):
            time.sleep(0.01)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    files = list(runs.glob("*.json"))
    assert len(files) >= 25
    for path in files:
        json.loads(path.read_bytes(), parse_constant=refuse_constant)
        ExperimentRecord.from_json(path.read_bytes())
    for path in files[:3]:  # jsonschema is slow on 16×16×64 contributions: a sample suffices
        check_strict(ExperimentRecord.from_json(path.read_bytes()))
    store = RunStore(runs)
    listing = store.list()
    assert listing.problems == []
    assert len(listing.records) == len(files)
    store.cleanup_temp_files()  # as the server does on start: the dead writer's temp files go
    assert sorted(runs.iterdir()) == sorted(files)


def test_export_json_is_a_strict_bundle(tmp_path):
    records = [make_record(minutes=m, learner="<b>Ada</b>") for m in range(2)]
    records.append(make_record("naive_softmax", minutes=3))
    text = export_json(records, [("bad.json", "not valid JSON")])
    bundle = json.loads(text, parse_constant=refuse_constant)
    assert bundle["format"] == "attention-workbench-runs"
    assert bundle["schema_version"] == 2
    assert bundle["exported_at"].endswith("+00:00")
    assert [ExperimentRecord.from_dict(r) for r in bundle["runs"]] == records
    assert bundle["skipped"] == [{"file": "bad.json", "reason": "not valid JSON"}]


def test_export_csv_one_row_per_run_with_formula_guard(tmp_path):
    plain = make_record(minutes=0, learner="Ada", label="first try")
    hostile = make_record("mask_after_softmax", minutes=1, learner="=1+1", label="@SUM(A1)",
                          prediction="-2", explanation="+x", notes="line\nbreak, \"quoted\"")
    overflow = check_strict(ExperimentRecord.from_result(_overflowing_result()))
    text = export_csv([plain, hostile, overflow])
    assert text.startswith(",".join(CSV_COLUMNS) + "\r\n")
    # Added last: the columns before them keep the places they had before they existed.
    assert CSV_COLUMNS == ("id", "created_at", "learner", "label", "causal", "mask_after_softmax",
                           "failure_mode", "T", "total_future_weight", "min_row_sum",
                           "max_row_sum_error", "failed_checks", "prediction", "explanation",
                           "notes", "mode", "d_k", "d_model")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == 3
    assert rows[0]["learner"] == "Ada" and rows[0]["causal"] == "true"
    assert rows[0]["failure_mode"] == "correct" and rows[0]["T"] == "3"
    assert [row["mode"] for row in rows] == [
        "Correct, causal", "Mask after softmax (broken)", "Naive softmax, bidirectional"]
    assert float(rows[0]["total_future_weight"]) == plain.total_future_weight
    assert float(rows[0]["min_row_sum"]) == plain.min_row_sum
    assert rows[0]["failed_checks"] == ""
    assert rows[1]["learner"] == "'=1+1" and rows[1]["label"] == "'@SUM(A1)"
    assert rows[1]["prediction"] == "'-2" and rows[1]["explanation"] == "'+x"
    assert rows[1]["notes"] == "line\nbreak, \"quoted\""
    assert rows[1]["mask_after_softmax"] == "true"
    assert rows[1]["failed_checks"] == ";".join(hostile.failed_checks) != ""
    assert float(rows[1]["min_row_sum"]) < 1  # numbers are never prefixed
    assert rows[2]["max_row_sum_error"] == ""  # not finite: an empty cell, never nan
    assert "nan" not in text.lower().replace("naive", "")


def _overflowing_result():
    from attention_core import scaled_dot_product_attention

    return scaled_dot_product_attention([1000.0, 1000.0], [1000.0, 999.0], causal=False,
                                        failure_mode="naive_softmax")


def test_resolve_runs_dir_prefers_flag_then_environment_then_runs(monkeypatch):
    monkeypatch.delenv("ATTENTION_WORKBENCH_RUNS_DIR", raising=False)
    assert resolve_runs_dir() == Path("runs")
    monkeypatch.setenv("ATTENTION_WORKBENCH_RUNS_DIR", "/srv/class")
    assert resolve_runs_dir() == Path("/srv/class")
    assert resolve_runs_dir("mine") == Path("mine")
    monkeypatch.setenv("ATTENTION_WORKBENCH_RUNS_DIR", "")
    assert resolve_runs_dir(None) == Path("runs")


def test_store_error_is_an_os_error():
    assert issubclass(StoreError, OSError)
    assert store_module.MAX_RECORD_BYTES == 2 * 1024 * 1024


def test_cleanup_removes_a_dead_writers_fresh_temp_file_but_not_a_live_ones(tmp_path):
    store = RunStore(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = tmp_path / f".{dead.pid}-abc123.tmp"
    in_progress = tmp_path / f".{os.getpid()}-def456.tmp"
    leftover.write_text('{"half')
    in_progress.write_text('{"half')
    assert store.cleanup_temp_files() == 1  # default age limit: only the pid decides here
    assert not leftover.exists() and in_progress.exists()


def test_save_names_its_temp_file_after_the_writing_process(tmp_path, monkeypatch):
    seen = []
    real_link = os.link

    def spy(src, dst):
        seen.append(Path(src).name)
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", spy)
    RunStore(tmp_path).save(make_record())
    assert len(seen) == 1 and seen[0].startswith(f".{os.getpid()}-") and seen[0].endswith(".tmp")


@pytest.mark.parametrize("count", [0, 1, 3])
def test_export_json_writes_a_run_per_line_with_the_records_exact_content(count):
    records = [make_record(minutes=m, learner="Ada\u202e", notes="x\ny") for m in range(count)]
    text = export_json(records, [("bad.json", "not valid JSON")])
    bundle = json.loads(text, parse_constant=refuse_constant)
    assert bundle["runs"] == [r.to_dict() for r in records]
    assert bundle["skipped"] == [{"file": "bad.json", "reason": "not valid JSON"}]
    assert text.endswith("}\n")
    run_lines = [line.rstrip(",") for line in text.splitlines()[1:-1]]
    assert [json.loads(line) for line in run_lines] == [r.to_dict() for r in records]


def test_update_explanation_changes_only_the_explanation_and_adds_no_run(tmp_path):
    store = RunStore(tmp_path)
    other = make_record(minutes=0, learner="Grace")
    store.save(other)
    first = make_record(minutes=1, learner="Ada", prediction="row 2 ignores token 3")
    path = store.save(first)
    assert len(store.list_summaries().records) == 2  # listed (and cached) before the update
    updated = store.update_explanation(first.id, "The mask hides token 3 before softmax.")
    assert updated == dataclasses.replace(first, explanation="The mask hides token 3 before softmax.")
    assert updated.to_dict() | {"explanation": None} == first.to_dict()
    assert ExperimentRecord.from_json(path.read_bytes()) == updated
    check_strict(updated)
    assert store.get(first.id) == updated
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{other.id}.json", path.name])
    listing = store.list()
    assert [r.id for r in listing.records] == [other.id, first.id] and listing.problems == []
    assert listing.records[1] == updated
    summaries = store.list_summaries().records
    assert [s.explanation for s in summaries] == [None, "The mask hides token 3 before softmax."]
    # Another store (another server process) over the directory sees the new text too.
    assert [s.explanation for s in RunStore(tmp_path).list_summaries().records] == [
        None, "The mask hides token 3 before softmax."]
    assert store.update_explanation(first.id, None) == first
    assert store.list_summaries().records[1].explanation is None


def test_an_explanation_update_is_not_hidden_by_the_summary_index(tmp_path):
    store = RunStore(tmp_path, index_slack=1)
    record = make_record()
    store.save(record)
    store.list_summaries()  # writes the index, which holds "no explanation"
    assert (tmp_path / ".summary-index.json").exists()
    store.update_explanation(record.id, "because")
    fresh = RunStore(tmp_path, index_slack=1)  # cold: reads the index first
    assert [s.explanation for s in fresh.list_summaries().records] == ["because"]
    assert [s.explanation for s in RunStore(tmp_path).list_summaries().records] == ["because"]


@pytest.mark.parametrize("two_stores", [False, True], ids=["one store", "two stores"])
def test_concurrent_updates_of_one_run_leave_one_whole_valid_record(tmp_path, two_stores):
    store = RunStore(tmp_path)
    record = make_record()
    path = store.save(record)
    stores = [store, RunStore(tmp_path) if two_stores else store]
    texts = {n: [f"writer {n}, try {k}: " + "x" * (k * 37 % 500) for k in range(25)] for n in (0, 1)}
    errors = []

    def write(n):
        try:
            for text in texts[n]:
                stores[n].update_explanation(record.id, text)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = check_strict(ExperimentRecord.from_json(path.read_bytes()))
    assert final.explanation in (texts[0][-1], texts[1][-1])
    assert final.to_dict() | {"explanation": None} == record.to_dict()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file left, no new run
    assert RunStore(tmp_path).list().records == [final]


@pytest.mark.parametrize(("where", "code", "message"), [
    ("replace", errno.ENOSPC, r"Explanation not saved: the runs directory .* is full\."),
    ("fsync", errno.EIO, r"Explanation not saved: .* could not be written \(Input/output error\)\."),
    ("mkstemp", errno.EROFS, r"Explanation not saved: the runs directory .* is read-only\."),
])
def test_a_failed_explanation_write_leaves_the_old_record_byte_identical(tmp_path, monkeypatch, where,
                                                                          code, message):
    store = RunStore(tmp_path)
    record = make_record(learner="Ada")
    path = store.save(record)
    store.update_explanation(record.id, "first thoughts")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    target = {"replace": (os, "replace"), "fsync": (os, "fsync"), "mkstemp": (tempfile, "mkstemp")}
    monkeypatch.setattr(*target[where], fail)
    with pytest.raises(StoreError, match=message) as caught:
        store.update_explanation(record.id, "second thoughts")
    monkeypatch.undo()
    assert caught.value.errno == code
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert store.get(record.id).explanation == "first thoughts"
    assert [r.explanation for r in store.list_summaries().records] == ["first thoughts"]
    assert ExperimentRecord.from_json(path.read_bytes()).explanation == "first thoughts"


def test_update_explanation_of_an_unknown_run_is_a_key_error_and_writes_nothing(tmp_path):
    store = RunStore(tmp_path)
    store.save(make_record(record_id="known"))
    with pytest.raises(KeyError):
        store.update_explanation("unknown", "text")
    assert [p.name for p in tmp_path.iterdir()] == ["known.json"]


def test_an_explanation_for_a_run_removed_meanwhile_adds_no_run(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    record = make_record()
    path = store.save(record)
    real_fsync = os.fsync

    def fsync_then_remove(fd):  # the run is removed while the new file is being written
        real_fsync(fd)
        if path.exists():
            path.unlink()

    monkeypatch.setattr(os, "fsync", fsync_then_remove)
    with pytest.raises(KeyError):
        store.update_explanation(record.id, "text")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad_id", ["../x", "a/b", "..", "/etc/passwd", "a\\b", "", "x" * 65, None])
def test_update_explanation_refuses_anything_but_a_run_id(tmp_path, bad_id):
    store = RunStore(tmp_path / "runs")
    outside = tmp_path / "x.json"
    outside.write_text(make_record(record_id="x").to_json())
    (store.directory / "b.json").write_text(make_record(record_id="b").to_json())
    before = outside.read_bytes()
    with pytest.raises(ValueError, match="not a run id"):
        store.update_explanation(bad_id, "text")
    assert outside.read_bytes() == before
    assert [p.name for p in store.directory.iterdir()] == ["b.json"]


def test_update_explanation_refuses_text_a_record_cannot_hold(tmp_path):
    store = RunStore(tmp_path)
    record = make_record()
    path = store.save(record)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="explanation is too long: 2001 characters"):
        store.update_explanation(record.id, "x" * 2001)
    with pytest.raises(ValueError, match="explanation holds a lone surrogate"):
        store.update_explanation(record.id, "bad \ud800")
    assert path.read_bytes() == before
