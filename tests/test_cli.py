"""The attention-workbench command: export to stdout and files, problems on stderr, serve."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from store_helpers import make_record, refuse_constant

from app.cli import main
from attention_core.records import ExperimentRecord
from attention_core.store import CSV_COLUMNS, RunStore

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def runs(tmp_path) -> tuple[Path, list[ExperimentRecord]]:
    store = RunStore(tmp_path / "runs")
    records = [make_record(minutes=m, learner=f"learner {m}") for m in (2, 0, 1)]
    for r in records:
        store.save(r)
    (store.directory / "corrupt.json").write_text("{not json")
    (store.directory / "newer.json").write_text('{"schema_version": 7}')
    return store.directory, sorted(records, key=lambda r: r.created_at)


def test_export_json_to_stdout_with_problems_on_stderr(runs, capsys):
    runs_dir, records = runs
    assert main(["export", "--runs-dir", str(runs_dir), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    bundle = json.loads(out, parse_constant=refuse_constant)
    assert [ExperimentRecord.from_dict(r) for r in bundle["runs"]] == records
    assert "skipped corrupt.json: not valid JSON" in err
    assert "skipped newer.json: written by a newer workbench" in err
    assert "exported 3 runs, skipped 2 files" in err


def test_export_csv_to_a_file_atomically(runs, capsys, tmp_path):
    runs_dir, records = runs
    target = tmp_path / "out" / "class.csv"
    target.parent.mkdir()
    target.write_text("old content")
    code = main(["export", "--runs-dir", str(runs_dir), "--format", "csv", "-o", str(target)])
    assert code == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "skipped corrupt.json" in err
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"), newline="")))
    assert [row["id"] for row in rows] == [r.id for r in records]
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [p.name for p in target.parent.iterdir()] == ["class.csv"]  # no temp file left


def test_export_to_an_unwritable_place_exits_1(runs, capsys, tmp_path):
    runs_dir, _ = runs
    code = main(["export", "--runs-dir", str(runs_dir), "--format", "json",
                 "-o", str(tmp_path / "missing-dir" / "x.json")])
    assert code == 1
    assert "cannot write" in capsys.readouterr().err


def test_export_of_a_missing_runs_dir_exits_2_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["export", "--runs-dir", str(missing), "--format", "csv"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"runs directory {missing} does not exist" in err
    assert not missing.exists()


def test_export_reads_the_environment_variable(runs, capsys, monkeypatch):
    runs_dir, records = runs
    monkeypatch.setenv("ATTENTION_WORKBENCH_RUNS_DIR", str(runs_dir))
    assert main(["export", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == len(records)


def test_bad_usage_exits_2(capsys):
    for argv in (["export"], ["export", "--format", "xml"], [], ["serve", "--port", "x"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2


def test_serve_passes_its_options_to_app_server(monkeypatch, tmp_path):
    calls = []
    fake = types.ModuleType("app.server")
    fake.serve = lambda **kwargs: calls.append(kwargs)
    monkeypatch.setitem(sys.modules, "app.server", fake)
    monkeypatch.delenv("ATTENTION_WORKBENCH_RUNS_DIR", raising=False)
    monkeypatch.delenv("ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD", raising=False)
    monkeypatch.delenv("ATTENTION_WORKBENCH_EMBED_ORIGINS", raising=False)
    assert main(["serve"]) == 0
    assert main(["serve", "--runs-dir", str(tmp_path), "--port", "0", "--address", "0.0.0.0",
                 "--instructor-password", "pw"]) == 0
    rest = {"num_procs": 1, "no_instructor_auth": False, "embed_origins": []}
    assert calls == [
        {"runs_dir": Path("runs"), "port": 5006, "address": "localhost", "instructor_password": None, **rest},
        {"runs_dir": tmp_path, "port": 0, "address": "0.0.0.0", "instructor_password": "pw", **rest},
    ]


def test_python_dash_m_export_in_a_subprocess(runs):
    runs_dir, records = runs
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "export", "--runs-dir", str(runs_dir), "--format", "csv"],
        cwd=REPO, capture_output=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert b"skipped corrupt.json" in done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout.decode("utf-8"), newline="")))
    assert [row["learner"] for row in rows] == [r.learner for r in records]


def test_export_does_not_load_panel(runs):
    runs_dir, _ = runs
    code = ("import sys; from app.cli import main; "
            f"main(['export', '--runs-dir', {str(runs_dir)!r}, '--format', 'json']); "
            "print('PANEL', 'panel' in sys.modules, 'bokeh' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=60)
    assert b"PANEL False False" in done.stderr, done.stderr
