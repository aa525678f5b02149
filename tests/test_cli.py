"""The attention-workbench command: export to stdout and files, import, the store options, serve."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from store_helpers import make_record, refuse_constant, sqlite_store

from app.cli import main
from app.store import CSV_COLUMNS, RunStore, sqlite_url
from attention_core.records import ExperimentRecord

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def runs(tmp_path) -> tuple[str, list[ExperimentRecord]]:
    store = sqlite_store(tmp_path)
    records = [make_record(minutes=m, learner=f"learner {m}") for m in (2, 0, 1)]
    for r in records:
        store.save(r)
    store.close()
    return sqlite_url(tmp_path / "runs.db"), sorted(records, key=lambda r: r.created_at)


def test_export_json_to_stdout_byte_for_byte_what_the_store_holds(runs, capsys):
    url, records = runs
    assert main(["export", "--store", url, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    bundle = json.loads(out, parse_constant=refuse_constant)
    assert [ExperimentRecord.from_dict(r) for r in bundle["runs"]] == records
    assert bundle["skipped"] == []
    with RunStore(url) as store:
        assert [line.rstrip(",") for line in out.splitlines()[1:-1]] == list(store.iter_texts())
    assert f"exported 3 runs from {Path(url.removeprefix('sqlite:///'))}" in err


def test_export_counts_the_runs_as_a_reader_writes_them(tmp_path, capsys):
    from class_runs import write_runs

    write_runs(tmp_path / "class", 1_200)
    url = sqlite_url(tmp_path / "class" / "runs.db")
    assert main(["export", "--store", url, "--format", "csv", "-o", str(tmp_path / "class.csv")]) == 0
    assert "exported 1,200 runs from" in capsys.readouterr().err
    one = tmp_path / "one"
    with sqlite_store(one) as store:
        store.save(make_record())
    assert main(["export", "--store", sqlite_url(one / "runs.db"), "--format", "json", "-o",
                 str(tmp_path / "one.json")]) == 0
    assert "exported 1 run from" in capsys.readouterr().err


def test_export_csv_to_a_file_atomically(runs, capsys, tmp_path):
    url, records = runs
    target = tmp_path / "out" / "class.csv"
    target.parent.mkdir()
    target.write_text("old content")
    assert main(["export", "--store", url, "--format", "csv", "-o", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"), newline="")))
    assert [row["id"] for row in rows] == [r.id for r in records]
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [p.name for p in target.parent.iterdir()] == ["class.csv"]  # no temp file left


def test_export_to_an_unwritable_place_exits_1(runs, capsys, tmp_path):
    url, _ = runs
    code = main(["export", "--store", url, "--format", "json", "-o", str(tmp_path / "missing-dir" / "x.json")])
    assert code == 1
    assert "cannot write" in capsys.readouterr().err


def test_export_of_a_missing_store_exits_2_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nope.db"
    assert main(["export", "--store", sqlite_url(missing), "--format", "csv"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"there is no store at {missing}" in err
    assert not missing.exists()


def test_export_of_a_missing_runs_dir_exits_2_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["export", "--runs-dir", str(missing), "--format", "csv"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"runs directory {missing} does not exist" in err
    assert not missing.exists()


def test_export_reads_the_store_environment_variable(runs, capsys, monkeypatch):
    url, records = runs
    monkeypatch.setenv("ATTENTION_WORKBENCH_STORE", url)
    assert main(["export", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == len(records)


def test_the_deprecated_runs_dir_means_its_runs_db_with_a_one_line_notice(runs, capsys, monkeypatch, tmp_path):
    url, records = runs
    monkeypatch.delenv("ATTENTION_WORKBENCH_STORE", raising=False)
    assert main(["export", "--runs-dir", str(tmp_path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["runs"]) == len(records)
    notice = [line for line in err.splitlines() if line.startswith("attention-workbench:")]
    assert notice == [f"attention-workbench: --runs-dir is deprecated and goes in the next release: runs are "
                      f"kept in the SQLite store {tmp_path / 'runs.db'}; say --store {url} instead."]
    monkeypatch.setenv("ATTENTION_WORKBENCH_RUNS_DIR", str(tmp_path))
    assert main(["export", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["runs"]) == len(records) and "$ATTENTION_WORKBENCH_RUNS_DIR is deprecated" in err
    # --store and $ATTENTION_WORKBENCH_STORE win over a runs directory.
    monkeypatch.setenv("ATTENTION_WORKBENCH_STORE", sqlite_url(tmp_path / "other.db"))
    assert main(["export", "--format", "json"]) == 2
    assert "there is no store at" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["mysql://x/y", "not a url", "sqlite://", "sqlite:///:memory:"])
def test_a_store_url_that_cannot_be_used_exits_2_in_one_line(url, capsys):
    assert main(["export", "--store", url, "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attention-workbench export: error: ") and err.count("\n") == 1


def test_bad_usage_exits_2(capsys):
    for argv in (["export"], ["export", "--format", "xml"], [], ["serve", "--port", "x"], ["import"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2


def test_serve_passes_its_options_and_the_opened_store_to_app_server(monkeypatch, tmp_path):
    calls = []
    fake = types.ModuleType("app.server")
    fake.serve = lambda **kwargs: calls.append(kwargs)
    monkeypatch.setitem(sys.modules, "app.server", fake)
    monkeypatch.chdir(tmp_path)
    for name in ("ATTENTION_WORKBENCH_RUNS_DIR", "ATTENTION_WORKBENCH_STORE",
                 "ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD", "ATTENTION_WORKBENCH_EMBED_ORIGINS",
                 "ATTENTION_WORKBENCH_COOKIE_SECRET_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["serve"]) == 0
    assert main(["serve", "--store", sqlite_url(tmp_path / "class.db"), "--port", "0", "--address", "0.0.0.0",
                 "--instructor-password", "pw"]) == 0
    stores = [call.pop("store") for call in calls]
    assert [s.where for s in stores] == [str(tmp_path / "runs.db"), str(tmp_path / "class.db")]
    rest = {"num_procs": 1, "no_instructor_auth": False, "embed_origins": [], "cookie_secret": None,
            "allow_websocket_origin": [], "use_xheaders": False, "prefix": "", "shutdown_grace": 10.0,
            "unused_session_lifetime": None}
    assert calls == [
        {"port": 5006, "address": "localhost", "instructor_password": None, **rest},
        {"port": 0, "address": "0.0.0.0", "instructor_password": "pw", **rest},
    ]


def test_serve_tells_once_how_to_import_an_earlier_runs_folder(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "app.server", types.SimpleNamespace(serve=lambda **kw: None))
    monkeypatch.chdir(tmp_path)
    for name in ("ATTENTION_WORKBENCH_RUNS_DIR", "ATTENTION_WORKBENCH_STORE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "runs").mkdir()
    old = [make_record(minutes=m) for m in range(3)]
    for r in old:
        (tmp_path / "runs" / f"{r.id}.json").write_text(r.to_json())
    assert main(["serve"]) == 0
    err = capsys.readouterr().err
    assert err.count("attention-workbench import runs") == 1
    assert "runs holds 3 run files from an earlier workbench" in err
    assert main(["serve"]) == 0
    assert "import" not in capsys.readouterr().err  # told once: the store remembers it told
    other = sqlite_url(tmp_path / "class.db")  # another store lacks them too: told there, once
    assert main(["serve", "--store", other]) == 0
    assert f"`attention-workbench import runs --store {other}`" in capsys.readouterr().err
    assert main(["serve", "--store", other]) == 0
    assert "import" not in capsys.readouterr().err
    assert main(["import", "runs"]) == 0
    assert "imported 3 runs" in capsys.readouterr().out
    assert main(["serve"]) == 0
    assert "import" not in capsys.readouterr().err  # nothing left to bring in: no notice
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(f"{r.id}.json" for r in old)


def test_python_dash_m_export_in_a_subprocess(runs):
    url, records = runs
    done = subprocess.run([sys.executable, "-m", "app.cli", "export", "--store", url, "--format", "csv"],
                          cwd=REPO, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout.decode("utf-8"), newline="")))
    assert [row["learner"] for row in rows] == [r.learner for r in records]


def test_export_to_a_reader_that_stops_early_ends_without_a_traceback(runs):
    # `attention-workbench export --format csv | head -1` printed a BrokenPipeError traceback.
    url, _ = runs
    process = subprocess.Popen([sys.executable, "-m", "app.cli", "export", "--store", url, "--format", "csv"],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the first line
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err


def test_export_and_import_do_not_load_panel(runs, tmp_path):
    url, _ = runs
    bundle = tmp_path / "bundle.json"
    code = ("import sys; from app.cli import main; "
            f"main(['export', '--store', {url!r}, '--format', 'json', '-o', {str(bundle)!r}]); "
            f"main(['import', {str(bundle)!r}, '--store', {url!r}]); "
            "print('PANEL', 'panel' in sys.modules, 'bokeh' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=60)
    assert b"PANEL False False" in done.stderr, done.stderr
    assert b"skipped 3 already in the store" in done.stdout, done.stdout


def test_import_takes_files_folders_and_bundles_whole_reports_each_and_exits_1_when_one_was_not_taken(
        tmp_path, capsys):
    url = sqlite_url(tmp_path / "class.db")
    laptop = tmp_path / "laptop" / "runs"
    laptop.mkdir(parents=True)
    records = [make_record(minutes=m, learner="Ada") for m in range(4)]
    for r in records[:2]:
        (laptop / f"{r.id}.json").write_text(r.to_json())
    (laptop / ".summary-index.json").write_text("{}")  # an old index: hidden, left alone
    (laptop / "notes.json").write_text("{not json")
    bundle = tmp_path / "class-runs.json"
    with RunStore(url) as store:
        store.save(records[0])
    from app.store import export_json

    bundle.write_text(export_json([records[0], dataclasses.replace(records[1], learner="Mallory"), records[2]]))
    naive = records[3].to_dict() | {"created_at": "2025-01-31T09:18:02.123456"}
    other = tmp_path / "other-tool.json"
    other.write_text(json.dumps(naive))
    assert main(["import", "--store", url, str(tmp_path / "laptop"), str(bundle), str(other),
                 str(tmp_path / "missing.json")]) == 1
    out = capsys.readouterr().out
    assert f"{laptop / records[0].id}.json: imported 0, skipped 1 already in the store" in out
    assert f"{laptop / records[1].id}.json: imported 1" in out
    assert f"{laptop / 'notes.json'}: not valid JSON" in out
    # One run of the bundle refused keeps the bundle out whole: never a half import.
    assert f"{bundle}: nothing imported (a file is taken whole), held back 1 valid, skipped 1 already in the " \
           f"store, refused 1 whose id is in the store with different content ({records[1].id})" in out
    assert "created_at 2025-01-31T09:18:02.123456 has no UTC offset; imported as UTC" in out
    assert f"{tmp_path / 'missing.json'}: no such file or folder" in out
    assert out.rstrip().splitlines()[-1].startswith(
        "imported 2 runs, skipped 2 already in the store, refused 1 (same id, different content), 0 not valid, "
        "2 of 6 files not read, 1 file refused whole (1 valid run held back)")
    with RunStore(url) as store:
        assert sorted(r.id for r in store.iter_records()) == sorted(r.id for r in [records[0], records[1], records[3]])
        assert [r.learner for r in store.iter_records()] == ["Ada"] * 3
    assert main(["import", "--store", url, str(laptop / f"{records[1].id}.json")]) == 0  # skipped: not refused
    assert main(["import", "--store", url, str(tmp_path / "missing.json"), str(laptop / "notes.json")]) == 1


def test_a_folder_import_says_which_files_it_passed_over_because_they_are_not_json(tmp_path, capsys):
    url = sqlite_url(tmp_path / "class.db")
    runs = tmp_path / "runs"
    (runs / "week 2").mkdir(parents=True)
    record = make_record(learner="Ada")
    (runs / f"{record.id}.json").write_text(record.to_json())
    (runs / "notes.txt").write_text("bring laptops")
    (runs / "Thumbs.db").write_bytes(b"\0")
    (runs / "week 2" / "photo.png").write_bytes(b"\x89PNG")
    (runs / ".DS_Store").write_bytes(b"\0")  # hidden: left alone, as hidden folders are
    assert main(["import", "--store", url, str(runs)]) == 0
    out = capsys.readouterr().out
    assert f"{runs}: passed over 3 files that are not .json: notes.txt, Thumbs.db, week 2/photo.png\n" in out
    assert out.rstrip().endswith(f"0 of 1 files not read, 3 passed over (not .json) (store {tmp_path / 'class.db'})")
    assert f"{runs / record.id}.json: imported 1" in out
    # Many: a few names, then "…"; one: in the singular; a folder of nothing else: no line.
    for n in range(7):
        (runs / f"scan {n}.pdf").write_bytes(b"%PDF")
    main(["import", "--store", url, str(runs)])
    assert (f"{runs}: passed over 10 files that are not .json: notes.txt, scan 0.pdf, scan 1.pdf, "
            "scan 2.pdf, scan 3.pdf, …\n") in capsys.readouterr().out
    only = tmp_path / "only"
    only.mkdir()
    (only / "readme.txt").write_text("hello")
    assert main(["import", "--store", url, str(only)]) == 1
    out = capsys.readouterr().out
    assert f"{only}: passed over 1 file that is not .json: readme.txt\n" in out
    assert f"{only}: a folder without .json files\n" in out
    main(["import", "--store", url, str(runs / f"{record.id}.json")])
    assert "passed over" not in capsys.readouterr().out
