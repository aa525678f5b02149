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
    assert "Attention workbench:" not in done.stdout  # no line saying where it would have been


def _secret(tmp_path, text: str, mode: int = 0o600):
    path = tmp_path / "cookie-secret"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_serve_passes_the_proxy_options_on(fake_server, tmp_path, monkeypatch, capsys):
    from app.auth import COOKIE_SECRET_FILE_ENV

    secret = _secret(tmp_path, "a long shared secret, 32 characters or more\n")
    store = ["--store", f"sqlite:///{tmp_path / 'runs.db'}", "--instructor-password", "pw"]
    assert main(["serve", *store, "--cookie-secret-file", str(secret), "--use-xheaders", "--prefix", "class/",
                 "--allow-websocket-origin", "class.example.org", "--allow-websocket-origin",
                 "proxy.example.org:8443"]) == 0
    assert "no --cookie-secret-file" not in capsys.readouterr().err
    monkeypatch.setenv(COOKIE_SECRET_FILE_ENV, str(secret))
    assert main(["serve", *store]) == 0
    call, from_env = fake_server
    assert call["cookie_secret"] == from_env["cookie_secret"] == "a long shared secret, 32 characters or more"
    assert call["use_xheaders"] is True and call["prefix"] == "/class"
    assert call["allow_websocket_origin"] == ["class.example.org", "proxy.example.org:8443"]
    assert from_env["use_xheaders"] is False and from_env["prefix"] == "" and from_env["allow_websocket_origin"] == []


def test_serve_without_a_cookie_secret_says_once_that_logins_end_at_restart(fake_server, tmp_path, capsys):
    store = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    assert main(["serve", *store, "--instructor-password", "pw"]) == 0
    err = capsys.readouterr().err
    assert err.count("no --cookie-secret-file: instructor logins end when this server restarts") == 1
    assert fake_server[0]["cookie_secret"] is None
    assert main(["serve", *store]) == 0  # no password, no login to lose
    assert "cookie" not in capsys.readouterr().err


@pytest.mark.parametrize("text, mode, why", [
    (None, 0o600, "does not exist"), ("", 0o600, "is empty: write the secret in it"),
    ("secret\n", 0o644, r"can be read or changed by other users \(mode -rw-r--r--\); make it yours alone: "
                        r"chmod 600 {path}"),
    ("abc\n", 0o600, r"holds 3 characters: a secret needs at least 32, e.g. \(umask 077; head -c 32 "
                     r"/dev/urandom \| base64 > {path}\)"),
])
@pytest.mark.parametrize("env", [False, True])
def test_serve_refuses_a_bad_cookie_secret_file_in_one_line(fake_server, tmp_path, monkeypatch, capsys, text,
                                                            mode, why, env):
    import re

    from app.auth import COOKIE_SECRET_FILE_ENV

    path = tmp_path / "cookie-secret" if text is None else _secret(tmp_path, text, mode)
    args = ["serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--instructor-password", "pw"]
    if env:
        monkeypatch.setenv(COOKIE_SECRET_FILE_ENV, str(path))
    else:
        args += ["--cookie-secret-file", str(path)]
    assert main(args) == 2
    source = COOKIE_SECRET_FILE_ENV if env else "--cookie-secret-file"
    expected = (f"attention-workbench serve: error: cookie secret file {path} "
                f"{why.format(path=re.escape(str(path)))} \\(from {re.escape(source)}\\)\n")
    assert re.fullmatch(expected, capsys.readouterr().err)
    assert fake_server == []


@pytest.mark.parametrize("args, message", [
    (["--prefix", "/a class"], "--prefix '/a class' is not a URL path"),
    (["--prefix", "/class?x"], "--prefix '/class?x' is not a URL path"),
    (["--allow-websocket-origin", "https://class.example.org"], "--allow-websocket-origin "
                                                                "'https://class.example.org' is not HOST[:PORT]"),
    (["--allow-websocket-origin", "class.example.org:https"], "is not HOST[:PORT]"),
])
def test_serve_refuses_a_prefix_or_websocket_origin_that_is_not_one(fake_server, tmp_path, capsys, args, message):
    assert main(["serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attention-workbench serve: error: ") and message in err and err.count("\n") == 1
    assert fake_server == []


def test_serve_passes_the_shutdown_grace_on_its_default_the_servers(fake_server, tmp_path, capsys):
    from app.shutdown import SHUTDOWN_GRACE_S

    store = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    assert main(["serve", *store]) == 0
    assert main(["serve", *store, "--shutdown-grace", "2.5"]) == 0
    assert [call["shutdown_grace"] for call in fake_server] == [SHUTDOWN_GRACE_S, 2.5]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--help"])
    assert exit_info.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--shutdown-grace SECONDS on SIGTERM or Ctrl-C:" in help_text and "(default 10;" in help_text
    assert "a save waiting on a held store gives up after 8 s, so keep it above that)" in help_text


@pytest.mark.parametrize("seconds", ["0", "-1", "soon", "inf", "nan"])
def test_serve_refuses_a_shutdown_grace_that_is_not_some_seconds(fake_server, seconds, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--shutdown-grace", seconds])
    assert exit_info.value.code == 2
    assert "--shutdown-grace" in capsys.readouterr().err
    assert fake_server == []
