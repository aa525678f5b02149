"""The session lifetimes ``serve`` sets reach Bokeh under names it knows; its workers end with it."""

from __future__ import annotations

import inspect
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from bokeh.server.tornado import BokehTornado
from workbench_server import start_server

import app.server
from app.store import sqlite_url


def test_unused_sessions_are_dropped_on_our_schedule(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(app.server.pn, "serve", lambda apps, **kwargs: seen.update(kwargs))
    monkeypatch.setattr(app.server, "_run_until_stopped", lambda *a: None)  # nothing was started
    app.server.serve(sqlite_url(tmp_path / "runs.db"), port=0)
    assert seen["check_unused_sessions_milliseconds"] == app.server.CHECK_UNUSED_SESSIONS_MS
    assert seen["unused_session_lifetime_milliseconds"] == app.server.UNUSED_SESSION_LIFETIME_MS
    known = set(inspect.signature(BokehTornado.__init__).parameters)  # where Server passes them
    assert {"check_unused_sessions_milliseconds", "unused_session_lifetime_milliseconds"} <= known
    seen.clear()
    app.server.serve(sqlite_url(tmp_path / "runs.db"), port=0, unused_session_lifetime=3)
    assert seen["unused_session_lifetime_milliseconds"] == 3000
    assert seen["check_unused_sessions_milliseconds"] == 1500  # checked at half a short lifetime
    with pytest.raises(ValueError, match="--unused-session-lifetime must be above 0 seconds, got 0"):
        app.server.serve(sqlite_url(tmp_path / "runs.db"), port=0, unused_session_lifetime=0)


def test_serve_takes_the_unused_session_lifetime_in_seconds(capsys):
    from app.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["serve"]).unused_session_lifetime is None
    assert parser.parse_args(["serve", "--unused-session-lifetime", "2.5"]).unused_session_lifetime == 2.5
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--unused-session-lifetime", "-1"])
    assert "--unused-session-lifetime: -1 is not a number of seconds above 0" in capsys.readouterr().err


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # fields[0] is the state, [1] the parent pid
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_stopping_serve_stops_its_num_procs_workers(tmp_path):
    running = start_server(tmp_path / "runs", tmp_path / "server.log", "--num-procs", "2")
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(workers := _children(running.process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers) == 2, f"expected two workers, found {workers}"
        running.process.terminate()  # the first process alone, as `kill <pid>` does
        running.process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (alive := [w for w in workers if Path(f"/proc/{w}").exists()]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive == [], f"workers {alive} outlived the server they were forked from"
    finally:
        running.stop()
        for w in workers:  # by then re-parented, so no longer found as the server's children
            if Path(f"/proc/{w}").exists():
                os.kill(w, signal.SIGKILL)
