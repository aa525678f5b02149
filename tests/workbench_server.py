"""Start a real ``attention-workbench serve`` for browser tests, and watch a page for trouble.

The server runs as a subprocess exactly as a learner starts it, on a free port, over a SQLite
store of the test's own (``runs.db`` in a directory of its own: ``runs_dir``).
:class:`PageWatch` records page errors, console errors and every
request that would leave the local server (those are aborted), so tests can assert none happened.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def store_url_in(directory: Path) -> str:
    """The URL of the SQLite store a test server keeps in ``directory``."""
    return f"sqlite:///{Path(directory).absolute() / 'runs.db'}"


@dataclass
class RunningServer:
    url: str
    runs_dir: Path  # the directory holding the server's store, runs.db
    process: subprocess.Popen
    log: Path

    @property
    def store_url(self) -> str:
        return store_url_in(self.runs_dir)

    def store(self):
        """The server's store, opened here (another process, as an instructor's export would be)."""
        from app.store import RunStore

        return RunStore(self.store_url)

    def records(self) -> list[dict]:
        """Every saved run's record as stored, oldest first."""
        with self.store() as store:
            return [json.loads(text) for text in store.iter_texts()]

    def texts(self) -> list[str]:
        """Every saved run's stored record text, oldest first."""
        with self.store() as store:
            return list(store.iter_texts())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(runs_dir: Path, log: Path, *extra: str, timeout: float = 60.0,
                 env: dict[str, str] | None = None) -> RunningServer:
    """Start the CLI server over the store ``runs_dir/runs.db`` (the directory is made) and wait
    until it answers; fail with its log if it does not.

    ``extra`` are more ``serve`` options; ``env`` adds to (or, with a None value, removes from)
    the server's environment.
    """
    port = free_port()
    runs_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "app.cli", "serve", "--store", store_url_in(runs_dir),
           "--port", str(port), *extra]
    env = {k: v for k, v in {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}.items()
           if v is not None}
    out = open(log, "w")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://localhost:{port}/"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return RunningServer(url, runs_dir, process, log)
        except OSError:
            time.sleep(0.1)
    process.kill()
    pytest.fail(f"server did not listen within {timeout} s:\n{log.read_text()}")


@dataclass
class PageWatch:
    """What went wrong on a page: uncaught errors, console errors, requests leaving the server."""

    origin: str
    errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and self.console_errors.append(msg.text))
        local = re.compile(rf"^(?:{re.escape(self.origin)}|data:|blob:|about:)")

        def route(r):
            if local.match(r.request.url):
                r.continue_()
            else:
                self.outside_requests.append(r.request.url)
                r.abort()

        page.context.route("**/*", route)

    def assert_clean(self) -> None:
        assert self.errors == [], f"page errors: {self.errors}"
        assert self.outside_requests == [], f"requests left the local server: {self.outside_requests}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"


_LEARNER_PAGE_READY = ("() => window.Bokeh && Bokeh.documents.length > 0 && "
                       "Bokeh.documents[0].get_model_by_name('weights-source') && "
                       "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")


def open_learner_page(page, url: str, *, at_1280: bool = False) -> None:
    """Open the learner page at ``url`` and wait until its heat maps hold data (the page's first
    result has arrived). ``at_1280``: in a 1280×720 window first."""
    from playwright.sync_api import expect

    if at_1280:
        page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(url)
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_function(_LEARNER_PAGE_READY)


# Panel's Tabulator redraws every row once after its first layout (``after_layout`` asks for a
# resize redraw), replacing each cell's elements: a click landing during that redraw is lost (the
# mouse goes down on the old link and up on the new one). These are the view's own flags for "a
# redraw is pending or running".
_TABLES_DRAWN = """() => {
  const tables = (view, out) => {
    if (view == null) return out
    if (view.tabulator !== undefined) out.push(view)
    for (const child of (view.child_views || [])) tables(child, out)
    return out
  }
  const found = window.Bokeh ? Object.values(Bokeh.index).flatMap(root => tables(root, [])) : []
  return found.length > 0 && found.every(v => v.tabulator != null && !v._initializing
    && !v._resize_pending && v._resize_flush == null && !v.is_drawing)
}"""


def wait_for_tables_drawn(page) -> None:
    """Wait until every Tabulator on ``page`` has finished its first layout's redraw, after which
    its rows (and the links and boxes in them) stay put until the data or the size changes."""
    page.wait_for_function(_TABLES_DRAWN)


BLOCKING = {"critical", "serious"}


def blocking_violations(page) -> list[str]:
    """axe-core's critical and serious violations on ``page`` as it is now, one line each.

    axe-core comes inside the ``axe-playwright-python`` package (no download at test time); it
    reads open shadow roots, where Bokeh and Panel draw.
    """
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']} at "
            + "; ".join(" > ".join(map(str, n["target"])) for n in v["nodes"][:3])
            for v in results.response["violations"] if v["impact"] in BLOCKING]
