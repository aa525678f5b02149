"""Summary listings and the summary index: the same answers as a full listing, whatever the index.

The index is a cache other processes write too, so every test here ends by comparing
``list_summaries()`` with the summaries of a full ``list()``: stale, corrupt, tampered or
concurrently written indexes may cost parses, never change what is listed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from store_helpers import make_record
from test_store import WRITER, _dirty_store, writer_env

from attention_core.store import RunStore
from attention_core.summaries import INDEX_NAME, RunSummary, read_index, write_index


def expected(directory: Path):
    """What a summary listing must say: a full listing of a fresh store, summarised."""
    full = RunStore(directory, create=False).list()
    return [RunSummary.of(r) for r in full.records], full.problems


def same_as_full_listing(store: RunStore) -> list[RunSummary]:
    listing = store.list_summaries()
    summaries, problems = expected(store.directory)
    assert listing.records == summaries
    assert listing.problems == problems
    return listing.records


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """Names of the files the store opens to parse (the index is read with ``open``)."""
    names: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: names.append(Path(path).name)
                        or real_open(path, *a, **k))
    return names


def test_summaries_match_a_full_listing_of_a_dirty_store_with_and_without_the_index(tmp_path):
    store, good, d = _dirty_store(tmp_path)
    for m in range(3, 8):
        store.save(make_record("mask_after_softmax", minutes=m, learner="Grace",
                               prediction="p" * 2000, notes="line\nbreak"))
    without = same_as_full_listing(RunStore(d, index_slack=10**6))
    assert not (d / INDEX_NAME).exists()
    with_index = same_as_full_listing(RunStore(d, index_slack=1))
    assert (d / INDEX_NAME).exists()
    from_index = same_as_full_listing(RunStore(d))
    assert without == with_index == from_index
    assert [s.id for s in from_index[:3]] == [r.id for r in good]
    assert INDEX_NAME not in dict(store.list().problems)  # the index is not a run file


def test_a_cold_listing_reads_the_index_not_the_runs(tmp_path, opened):
    first = RunStore(tmp_path, index_slack=1)
    for m in range(5):
        first.save(make_record(minutes=m))
    names = sorted(f"{s.id}.json" for s in first.list_summaries().records)
    opened.clear()
    same_as_full_listing(RunStore(tmp_path))
    assert sorted(opened) == names  # once each, by the full listing it is compared with
    opened.clear()
    RunStore(tmp_path).list_summaries()
    assert opened == []


def test_the_index_lags_at_most_index_slack_runs(tmp_path, opened):
    store = RunStore(tmp_path, index_slack=3)
    for m in range(2):
        store.save(make_record(minutes=m))
    store.list_summaries()
    assert not (tmp_path / INDEX_NAME).exists()  # two behind: not worth a write
    store.save(make_record(minutes=2))
    store.list_summaries()
    assert len(read_index(tmp_path)) == 3
    newest = store.save(make_record(minutes=3)).name
    store.list_summaries()
    assert len(read_index(tmp_path)) == 3  # one behind
    opened.clear()
    same_as_full_listing(RunStore(tmp_path, index_slack=3))
    # The new run is parsed by both listings, the indexed ones by the full listing only.
    assert sorted(opened) == sorted([newest, *read_index(tmp_path), newest])


def test_an_entry_whose_file_changed_or_went_is_ignored(tmp_path):
    store = RunStore(tmp_path, index_slack=1)
    records = [store.save(make_record(minutes=m, learner=f"learner {m}")) for m in range(3)]
    store.list_summaries()
    stale = read_index(tmp_path)
    # Same name, new content: the stat differs, so the index's learner must not be shown.
    changed = make_record(minutes=0, learner="rewritten",
                          record_id=records[0].name.removesuffix(".json"))
    records[0].unlink()
    records[0].write_text(changed.to_json())
    records[1].unlink()
    (tmp_path / "broken.json").write_text("{")
    assert read_index(tmp_path) == stale
    fresh = RunStore(tmp_path, index_slack=10**6)
    summaries = same_as_full_listing(fresh)
    assert [s.learner for s in summaries] == ["rewritten", "learner 2"]
    # The store that wrote the index sees the change too (its memory is keyed by stat as well).
    assert store.list_summaries().records == summaries


@pytest.mark.parametrize("content", [
    b"", b"{", b"\xff\xfe", b"[]", b'{"format": "something else", "version": 1, "entries": {}}',
    b'{"format": "attention-workbench-summary-index", "version": 99, "entries": {}}',
    b'{"format": "attention-workbench-summary-index", "version": 1, "entries": []}',
    b'{"format": "attention-workbench-summary-index", "version": 1, "app_version": "0.0.1", '
    b'"entries": {}}',  # another version's checks may differ
])
def test_a_corrupt_or_foreign_index_is_ignored_and_rewritten(tmp_path, content):
    store = RunStore(tmp_path)
    for m in range(3):
        store.save(make_record(minutes=m))
    (tmp_path / INDEX_NAME).write_bytes(content)
    assert read_index(tmp_path) == {}
    same_as_full_listing(RunStore(tmp_path, index_slack=1))
    assert len(read_index(tmp_path)) == 3


@pytest.mark.parametrize("tamper", [
    lambda run: run.update(learner={"html": "<b>"}),
    lambda run: run.update(failed_checks="all"),
    lambda run: run.update(T=True),
    lambda run: run.update(total_future_weight="0.5"),
    lambda run: run.update(created_at="2025-01-31T09:15:02"),  # no offset: would not sort
    lambda run: run.update(created_at="yesterday"),
    lambda run: run.update(extra=1),
    lambda run: run.pop("notes"),
    lambda run: run.update(id="other"),  # an entry must be about its own file
])
def test_a_malformed_entry_is_ignored_and_its_file_parsed(tmp_path, tamper, opened):
    store = RunStore(tmp_path, index_slack=1)
    for m in range(2):
        store.save(make_record(minutes=m))
    store.list_summaries()
    data = json.loads((tmp_path / INDEX_NAME).read_text())
    name = sorted(data["entries"])[0]
    tamper(data["entries"][name][1])
    (tmp_path / INDEX_NAME).write_text(json.dumps(data))
    assert set(read_index(tmp_path)) == set(data["entries"]) - {name}
    opened.clear()
    same_as_full_listing(RunStore(tmp_path, index_slack=10**6))
    assert opened.count(name) == 2  # the summary listing and the full one


def test_an_index_that_cannot_be_written_changes_nothing(tmp_path, monkeypatch):
    store = RunStore(tmp_path, index_slack=1)
    for m in range(3):
        store.save(make_record(minutes=m))

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    same_as_full_listing(store)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_two_stores_writing_the_index_in_turn_never_mislead_each_other(tmp_path):
    a, b = RunStore(tmp_path, index_slack=1), RunStore(tmp_path, index_slack=1)
    a.save(make_record(minutes=0))
    same_as_full_listing(a)
    b.save(make_record(minutes=1))
    same_as_full_listing(b)  # b's index now holds both
    a.save(make_record(minutes=2))
    same_as_full_listing(a)  # a's view wins: last writer
    assert len(read_index(tmp_path)) == 3
    same_as_full_listing(RunStore(tmp_path, index_slack=10**6))


LISTER = """
import sys, time
from attention_core.store import RunStore
store, deadline = RunStore(sys.argv[1], index_slack=1), time.monotonic() + 100
while len(store.list_summaries().records) < int(sys.argv[2]) and time.monotonic() < deadline:
    pass
"""


def test_processes_listing_while_others_save_leave_a_sound_index(tmp_path):
    runs, go = tmp_path / "runs", tmp_path / "go"
    runs.mkdir()
    writers = [subprocess.Popen([sys.executable, str(WRITER), str(runs), "40", str(go)],
                                env=writer_env()) for _ in range(2)]
    go.touch()
    listers = [subprocess.Popen([sys.executable, "-c", LISTER, str(runs), "80"], env=writer_env())
               for _ in range(3)]
    assert [p.wait(timeout=120) for p in writers + listers] == [0] * 5
    index = read_index(runs)
    assert index  # someone wrote it, and it parsed
    for name, (key, summary) in index.items():
        st = os.lstat(runs / name)
        if key == (st.st_mtime_ns, st.st_size, st.st_ino):
            assert summary == RunSummary.of(RunStore(runs).get(name.removesuffix(".json")))
    summaries = same_as_full_listing(RunStore(runs))
    assert len(summaries) == 80
    assert [p.name for p in runs.iterdir() if p.name.endswith(".tmp")] == []


def test_write_index_is_atomic_and_leaves_no_temp_file(tmp_path):
    store = RunStore(tmp_path, index_slack=1)
    store.save(make_record())
    summary = store.list_summaries().records[0]
    key = (1, 2, 3)
    assert write_index(tmp_path, {f"{summary.id}.json": (key, summary)})
    assert read_index(tmp_path) == {f"{summary.id}.json": (key, summary)}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([INDEX_NAME, f"{summary.id}.json"])
    assert oct((tmp_path / INDEX_NAME).stat().st_mode & 0o777) == "0o644"


def test_summary_has_the_records_names_for_what_the_table_and_csv_read():
    record = make_record("mask_after_softmax", learner="Ada", notes="n")
    summary = RunSummary.of(record)
    for name in ("id", "created_at", "learner", "label", "prediction", "explanation", "notes",
                 "causal", "mask_after_softmax", "failure_mode", "T", "total_future_weight",
                 "min_row_sum", "max_row_sum_error", "failed_checks", "created_datetime"):
        assert getattr(summary, name) == getattr(record, name), name
    assert RunSummary.from_entry(json.loads(json.dumps(summary.to_entry()))) == summary


def test_read_records_reads_full_records_afresh_and_reports_the_missing(tmp_path):
    store = RunStore(tmp_path)
    records = [make_record(minutes=m) for m in range(3)]
    for r in records:
        store.save(r)
    (tmp_path / f"{records[1].id}.json").unlink()
    got = store.read_records([records[2].id, records[1].id, records[0].id])
    assert got.records == [records[2], records[0]]
    assert [name for name, _ in got.problems] == [f"{records[1].id}.json"]
    assert store._cache == {}  # an export does not keep the class in memory


def test_an_unchanged_directory_is_answered_from_memory_for_a_while(tmp_path, monkeypatch):
    from attention_core import store as store_module

    store = RunStore(tmp_path, index_slack=10**6)
    store.save(make_record(minutes=0))
    scans = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: scans.append(path) or real_scandir(path))
    first = store.list_summaries()
    assert len(scans) == 1
    # Just changed (within RACY_SECONDS of the listing): a change in the same timestamp tick
    # would be invisible in the mtime, so the directory is scanned again.
    assert store.list_summaries().records == first.records and len(scans) == 2
    monkeypatch.setattr(store_module, "RACY_SECONDS", 0.0)  # as if that listing began later
    again = store.list_summaries()
    assert len(scans) == 2 and again.records == first.records and again.records is not first.records
    store.save(make_record(minutes=1))  # a new file changes the directory
    assert len(store.list_summaries().records) == 2 and len(scans) == 3
    store.list_summaries()
    assert len(scans) == 3
    monkeypatch.setattr(store_module, "RESCAN_SECONDS", 0.0)  # a file edited in place shows
    store.list_summaries()
    assert len(scans) == 4


def test_an_index_from_another_workbench_version_is_ignored(tmp_path):
    store = RunStore(tmp_path, index_slack=1)
    store.save(make_record())
    store.list_summaries()
    data = json.loads((tmp_path / INDEX_NAME).read_text())
    assert len(read_index(tmp_path)) == 1
    data["app_version"] = "0.0.1"  # its checks, or its summaries, may differ from ours
    (tmp_path / INDEX_NAME).write_text(json.dumps(data))
    assert read_index(tmp_path) == {}
