"""Command-line arguments people get wrong: clear messages, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from store_helpers import make_record

from app.cli import main
from app.store import RunStore


def test_version_is_the_installed_distributions(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"attention-workbench {version('attention-workbench')}\n"


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_refuses_a_port_that_is_not_one(port, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--port", port])
    assert exit_info.value.code == 2
    assert "--port" in capsys.readouterr().err


def test_export_to_dash_writes_stdout_not_a_file_named_dash(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with RunStore("sqlite:///runs.db") as store:  # relative to the working directory
        store.save(make_record())
    assert main(["export", "--store", "sqlite:///runs.db", "--format", "json", "-o", "-"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 1
    assert not (tmp_path / "-").exists()


def test_export_from_a_file_says_it_is_not_a_directory(tmp_path, capsys):
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0")
    assert main(["export", "--runs-dir", str(a_file), "--format", "csv"]) == 2
    assert f"runs directory {a_file} is not a directory" in capsys.readouterr().err


def test_serve_from_a_file_says_it_is_not_a_directory_before_loading_the_server(tmp_path, capsys,
                                                                              monkeypatch):
    import types

    calls = []
    monkeypatch.setitem(sys.modules, "app.server", types.SimpleNamespace(serve=calls.append))
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0")
    assert main(["serve", "--runs-dir", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"\nattention-workbench serve: error: runs directory {a_file} is not a directory\n")
    assert err.count("\n") == 2 and "deprecated" in err.splitlines()[0]
    assert calls == []


def test_serve_under_a_file_says_the_runs_directory_cannot_be_made(tmp_path, capsys):
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0")
    assert main(["serve", "--runs-dir", str(a_file / "runs"), "--port", "0"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("attention-workbench serve: error: ") and str(a_file / "runs") in err
    assert "Traceback" not in err
    assert main(["serve", "--store", f"sqlite:///{a_file / 'runs.db'}", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attention-workbench serve: error: Store not opened: ") and str(a_file) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}",
             "--port", str(port), "--address", "127.0.0.1"],
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"attention-workbench serve: error: port {port} on 127.0.0.1 is already in use\n"
