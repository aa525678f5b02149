"""The session lifetimes ``serve`` sets reach Bokeh under names it knows."""

from __future__ import annotations

import inspect

from bokeh.server.tornado import BokehTornado

import app.server


def test_unused_sessions_are_dropped_on_our_schedule(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(app.server.pn, "serve", lambda apps, **kwargs: seen.update(kwargs))
    app.server.serve(tmp_path / "runs", port=0)
    assert seen["check_unused_sessions_milliseconds"] == app.server.CHECK_UNUSED_SESSIONS_MS
    assert seen["unused_session_lifetime_milliseconds"] == app.server.UNUSED_SESSION_LIFETIME_MS
    known = set(inspect.signature(BokehTornado.__init__).parameters)  # where Server passes them
    assert {"check_unused_sessions_milliseconds", "unused_session_lifetime_milliseconds"} <= known
