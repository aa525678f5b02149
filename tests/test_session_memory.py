"""A learner page whose session ended leaves nothing behind in the server: not its state, not its
widgets' Bokeh document, not the notification area Panel added to it.

A real Panel server on a free port, in a child process (its event loop cannot run inside a test
run whose Playwright loop is already running): a page request builds a session as a browser's
does, and is moved out of full collections as ``serve`` does once a page has loaded
(``gc.freeze``); the session is then dropped as unused (after tens of milliseconds here, a minute
in ``serve``) and Panel's destroy hooks run. What the page built must then be garbage.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import time
import weakref
from pathlib import Path

import panel as pn
from tornado.httpclient import AsyncHTTPClient
from workbench_server import run_coroutine

from app import server as server_module
from app.learner.page import create_page
from app.server import _collect_closed_pages, _count_opened_page, _out_of_full_collections
from app.store import RunStore, sqlite_url


def _serve_pages_and_let_them_end(store: RunStore, pages: int) -> list[tuple[weakref.ref, ...]]:
    """Open ``pages`` sessions of the learner page, wait until the server has destroyed each
    one, and return weak references to what each built (its state, its document, and the
    notification area Panel put on it)."""
    built: list[tuple[weakref.ref, ...]] = []
    ended: list[str] = []

    def factory():
        page = create_page(store)
        doc = pn.state.curdoc
        built.append((weakref.ref(page.state), weakref.ref(doc), weakref.ref(pn.state.notifications)))
        pn.state.on_session_destroyed(lambda context: ended.append(context.id))
        # As serve does once a page has loaded (app.server): out of full collections; its
        # session's end must bring it back under the collector, or its cycles would stay.
        _out_of_full_collections()
        return page

    server_module.COLLECT_DELAY_S = 0.05  # a second in serve: here the test waits for it
    pn.state.on_session_created(_count_opened_page)  # as serve registers them
    pn.state.on_session_destroyed(_collect_closed_pages)
    server = pn.serve({"/": factory}, port=0, address="127.0.0.1", show=False, start=False,
                      check_unused_sessions_milliseconds=50, unused_session_lifetime_milliseconds=50)

    async def visit() -> None:
        client = AsyncHTTPClient()
        for _ in range(pages):
            response = await client.fetch(f"http://127.0.0.1:{server.port}/")
            assert response.code == 200
        deadline = time.monotonic() + 20
        while (len(ended) < pages or server_module._pages["collecting"]) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # ended, and the closed pages' collection done
        await asyncio.sleep(0.1)  # the rest of the destroy hooks, after ours

    server.start()  # its unused-session check, as serve's
    try:
        server.io_loop.run_sync(visit, timeout=30)
    finally:
        server.stop()
    assert len(ended) == pages, f"{len(ended)} of {pages} sessions were destroyed"
    return built


def check_ended_sessions(store_file: str) -> None:
    """Serve two pages, let their sessions end, and assert nothing they built is alive."""
    built = _serve_pages_and_let_them_end(RunStore(sqlite_url(store_file)), pages=2)
    gc.collect()
    assert len(built) == 2
    for state, doc, notifications in built:
        assert notifications() is None, "the session's notification area outlived it"
        assert doc() is None, "the session's Bokeh document outlived it"
        assert state() is None, "the session's LearnerState outlived it"


def test_an_ended_session_leaves_no_page_document_or_notification_area_behind(tmp_path):
    tests = Path(__file__).resolve().parent
    code = (f"import sys; sys.path.insert(0, {str(tests)!r}); import test_session_memory as t; "
            f"t.check_ended_sessions({str(tmp_path / 'runs.db')!r}); print('ok')")
    child = subprocess.run([sys.executable, "-c", code], cwd=tests.parent, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 0 and child.stdout.strip().endswith("ok"), child.stderr[-3000:]


def test_closed_pages_are_collected_once_they_are_a_quarter_of_the_open_ones(monkeypatch):
    """A collection walks every open page, stopping each of them: with 100 pages open, the 25th
    page to close brings every object back under the collector, not each one; one collection then
    frees the closed pages' cycles and freezes the rest again."""
    calls: list[str] = []
    monkeypatch.setattr(server_module, "_pages", {"open": 0, "closed": 0, "collecting": False})
    monkeypatch.setattr(server_module, "COLLECT_DELAY_S", 0.01)
    for name in ("unfreeze", "collect", "freeze"):
        monkeypatch.setattr(server_module.gc, name, lambda name=name: calls.append(name))

    async def class_of_100() -> None:
        for _ in range(100):
            _count_opened_page(None)
        for closed in range(1, 20):
            _collect_closed_pages(None)
            assert calls == [], f"collected after {closed} of 100 pages closed"
        _collect_closed_pages(None)  # 20 closed, 80 open: a quarter
        assert calls == [] and server_module._pages["collecting"]  # a moment later
        _collect_closed_pages(None)  # closes while the collection waits: that one frees it too
        await asyncio.sleep(0.1)
        assert calls == ["unfreeze", "collect", "freeze"]
        calls.clear()
        for closed in range(1, 15):  # 78 open, one closed since: collected again after 15 more
            _collect_closed_pages(None)
            assert not server_module._pages["collecting"], f"collecting after {closed} more"
        _collect_closed_pages(None)
        assert server_module._pages["collecting"]
        await asyncio.sleep(0.1)
        assert calls == ["unfreeze", "collect", "freeze"]
        calls.clear()
        while server_module._pages["open"] > 0:  # the class leaves: the last page is collected too
            _collect_closed_pages(None)
        await asyncio.sleep(0.1)
        assert calls[-3:] == ["unfreeze", "collect", "freeze"] and not server_module._pages["collecting"]

    run_coroutine(class_of_100())  # the test process may already run an event loop (Playwright's)
