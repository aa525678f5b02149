"""Start a real ``attention-workbench serve`` for browser tests, watch a page for trouble, and
the helpers every browser test shares (each defined once, here).

The server runs as a subprocess exactly as a learner starts it, on a free port, over a SQLite
store of the test's own (``runs.db`` in a directory of its own: ``runs_dir``).
:class:`PageWatch` records page errors, console errors and every
request that would leave the local server (those are aborted), so tests can assert none happened.
Browser tests read what the page shows, what its Bokeh document holds and what lands in the
store; the page helpers wait by polling (``expect``, ``wait_for_function`` or
:func:`wait_until`), never by sleeping a fixed time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.auth import PASSWORD_ENV

ROOT = Path(__file__).resolve().parent.parent
# Written on every run (git ignores test-results/); the README's pictures are made by `make screenshots`.
SCREENSHOTS = ROOT / "test-results" / "screenshots"
# start_server's env for a server whose instructor page is open without a password, whatever
# the environment says.
NO_PASSWORD = {PASSWORD_ENV: None}


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
        stop_process(self.process)


def stop_process(process: subprocess.Popen) -> None:
    """Stop a server process: SIGTERM, then SIGKILL if it has not ended within 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def listening(port: int) -> bool:
    """Whether something accepts a connection on 127.0.0.1:``port`` now."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_listening(process: subprocess.Popen, port: int, log: Path, timeout: float = 60.0) -> None:
    """Wait until ``process`` accepts connections on loopback ``port``; fail with its ``log`` if
    it exits first or does not listen within ``timeout`` seconds (it is then killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    process.kill()
    pytest.fail(f"server did not listen within {timeout} s:\n{log.read_text()}")


def start_server(runs_dir: Path, log: Path, *extra: str, timeout: float = 60.0,
                 env: dict[str, str] | None = None, store: str | None = None) -> RunningServer:
    """Start the CLI server over the store ``runs_dir/runs.db`` (the directory is made), or over
    the store URL ``store`` if given, and wait until it answers; fail with its log if it does not.

    ``extra`` are more ``serve`` options; ``env`` adds to (or, with a None value, removes from)
    the server's environment.
    """
    port = free_port()
    runs_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "app.cli", "serve", "--store", store or store_url_in(runs_dir),
           "--port", str(port), *extra]
    env = {k: v for k, v in {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}.items()
           if v is not None}
    out = open(log, "w")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    wait_listening(process, port, log, timeout)
    return RunningServer(f"http://localhost:{port}/", runs_dir, process, log)


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
        # Seen, not routed: a route turns the context's HTTP cache off (Playwright's documented
        # rule), and a page kept from test to test (tests/kept_tab.py) opens faster with it.
        page.context.on("request", lambda r: local.match(r.url) or self.outside_requests.append(r.url))

    def assert_clean(self) -> None:
        assert self.errors == [], f"page errors: {self.errors}"
        assert self.outside_requests == [], f"requests left the local server: {self.outside_requests}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"


# The maps hold data, and the part below them (sent after the first paint) has arrived.
_LEARNER_PAGE_READY = ("() => window.Bokeh && Bokeh.documents.length > 0 && "
                       "Bokeh.documents[0].get_model_by_name('weights-source') && "
                       "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0 && "
                       "Bokeh.documents[0].get_model_by_name('contributions-source') !== null")


def open_learner_page(page, url: str, *, at_1280: bool = False):
    """Open the learner page at ``url`` (any query, e.g. ``?run=…``) and wait until its heat maps
    hold data (the page's first result has arrived) and the part below them has arrived too.
    ``at_1280``: in a 1280×720 window first. Returns the page request's response."""
    from playwright.sync_api import expect

    if at_1280:
        page.set_viewport_size({"width": 1280, "height": 720})
    response = page.goto(url)
    # "Tokens" is on the page in every input mode (Query 1 is only there for numbers).
    expect(page.get_by_label("Tokens", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_function(_LEARNER_PAGE_READY)
    return response


def back_to_the_default_input(page) -> None:
    """Put an open learner page back on the default input without reloading it: the worked-row
    preset (the default page's numbers; every other input it leaves at its default: vectors,
    d_k = 1, no padding, batch of 1, failure mode Correct) with its values off again."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Worked row (seed 003)").click()
    values = page.get_by_label("Use values (adds output and contributions)", exact=True)
    expect(values).to_be_checked()
    values.uncheck()
    expect(values).not_to_be_checked()
    expect(page.get_by_label("Failure mode")).to_have_value("Correct")
    expect(page.get_by_label("Key 3", exact=True)).to_have_value("9")


def watched(page, server) -> PageWatch:
    """A :class:`PageWatch` on ``page`` that also keeps (and dismisses) every dialog the page
    opens, in ``watch.dialogs``: learner text that ran as code would open one."""
    watch = PageWatch(origin=server.url.rstrip("/"))
    watch.attach(page)
    watch.dialogs = []
    page.on("dialog", lambda d: (watch.dialogs.append(d.message), d.dismiss()))
    return watch


def open_instructor(page, server) -> None:
    """Open ``server``'s instructor page and wait until its table and class picture are drawn."""
    from playwright.sync_api import expect

    page.goto(server.url + "instructor")
    expect(page.get_by_test_id("runs-total")).to_be_visible(timeout=30_000)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                           "Bokeh.documents[0].get_model_by_name('class-source')")
    wait_for_tables_drawn(page)


def table_rows(page):
    """The instructor table's rows."""
    return page.locator(".tabulator-row")


def watched_session(browser, server):
    """Another learner's session: a browser context of its own with a :class:`PageWatch` on its
    page. Returns ``(context, page, watch)``; the caller asserts the watch and closes the context."""
    context = browser.new_context()
    page = context.new_page()
    watch = PageWatch(origin=server.url.rstrip("/"))
    watch.attach(page)
    return context, page, watch


def wait_until(condition, what: str, *, page=None, timeout: float = 15.0):
    """Poll ``condition()`` until it returns something true, and return that (``timeout`` s at
    most; then fail saying ``what`` never happened, with the last value seen).

    For what the page cannot signal (the store on disk, a value computed from several Bokeh
    sources). With ``page``, each pause is the page's own wait, so its events keep flowing.
    """
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if page is None:
            time.sleep(0.05)
        else:
            page.wait_for_timeout(50)
    raise AssertionError(f"never happened: {what} (last: {value!r})")


# A Bokeh data source's columns by its model name, NaN read as None (JSON has no NaN).
_SOURCE_JS = """name => {
  const doc = window.Bokeh && Bokeh.documents.length && Bokeh.documents[0];
  const src = doc && doc.get_model_by_name(name);
  if (!src) return null;
  const out = {};
  for (const k of Object.keys(src.data))
    out[k] = Array.from(src.data[k]).map(v => (typeof v === 'number' && isNaN(v)) ? null : v);
  return out;
}"""


def source(page, name: str) -> dict | None:
    """The columns of the Bokeh data source called ``name`` on ``page`` (None if there is none)."""
    return page.evaluate(_SOURCE_JS, name)


def cell(data: dict, row: int, column: int, key: str = "value"):
    """Cell (``row``, ``column``) (from 1) of a heat map's source data, its ``key`` column."""
    for i, (r, c) in enumerate(zip(data["row"], data["column"], strict=True)):
        if (r, c) == (str(row), str(column)):
            return data[key][i]
    raise AssertionError(f"no cell ({row}, {column}) in {data['row']} {data['column']}")


def row_of(data: dict, row: int, T: int, key: str = "value") -> list:
    """Row ``row`` (from 1) of a heat map's source data, columns 1 … T."""
    return [cell(data, row, c, key) for c in range(1, T + 1)]


def wait_for_cell(page, name: str, row: int, column: int, predicate, key: str = "value") -> dict:
    """Poll the heat-map source ``name`` until ``predicate(cell value)`` holds; return its data."""
    def holds():
        data = source(page, name)
        try:
            return data if data and data["row"] and predicate(cell(data, row, column, key)) else None
        except AssertionError:  # no such cell yet
            return None
    return wait_until(holds, f"{name} cell ({row}, {column}) satisfies the condition", page=page)


def wait_for_row(page, name: str, row: int, T: int, predicate) -> list:
    """Poll the heat-map source ``name`` until ``predicate(row values)`` holds; return the row."""
    def holds():
        data = source(page, name)
        try:
            values = row_of(data, row, T)
        except (AssertionError, TypeError):  # no source, or no such row yet
            return None
        return [values] if predicate(values) else None  # wrapped: a row of zeros is an answer too
    return wait_until(holds, f"{name} row {row} satisfies the condition", page=page)[0]


def wait_for_source(page, name: str, column: str, expected: list) -> None:
    """Wait until the Bokeh source ``name``'s ``column`` equals ``expected``."""
    page.wait_for_function(
        """([name, column, expected]) => {
          const src = Bokeh.documents[0].get_model_by_name(name);
          return src && JSON.stringify(Array.from(src.data[column] || [])) === JSON.stringify(expected);
        }""", arg=[name, column, expected])


def wait_for_weights(page, cells: int) -> None:
    """Wait until the weights heat map holds ``cells`` cells (T × T for T tokens)."""
    page.wait_for_function(
        "n => Bokeh.documents[0].get_model_by_name('weights-source').data.row.length === n", arg=cells)


def set_largest_vector_inputs(page) -> None:
    """With values on, 8 tokens and d_k = d_v = 4 (the widest grid and maps of vector mode); waits
    until the 64-cell weights map is drawn."""
    from playwright.sync_api import expect

    page.get_by_label("Use values (adds output and contributions)", exact=True).check()
    type_number(page, "Tokens", "8")
    page.get_by_label("Head width d_k").select_option("4")
    page.get_by_label("Value width d_v").select_option("4")
    expect(page.get_by_label("Value 8, component 4", exact=True)).to_be_visible()
    wait_for_weights(page, 64)


def type_number(page, label: str, text: str) -> None:
    """Type ``text`` into the field named ``label`` and send it with Enter, as a learner does."""
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Enter")


def save_run(page, label: str, prediction: str | None = None):
    """Save the run under ``label`` (after writing ``prediction``, if given) and wait for the
    page's "Saved run “label”" message, which is returned (a locator)."""

    if prediction is not None:
        page.get_by_label("Prediction").fill(prediction)
    page.get_by_label("Label", exact=True).fill(label)
    page.get_by_label("Label", exact=True).press("Tab")
    page.get_by_role("button", name="Save run").click()
    status = page.get_by_role("status").filter(has_text=f"Saved run “{label}”")
    expect_save_answer(page, status)
    return status


# What the browser's copy of the page holds of Save run's answer: each status pane's text (as
# the server last sent it) and whether it is shown, and the button.
# A save that got no answer at all has been seen twice in the whole suite; this tells the next
# one whether the server's answer reached the browser.
SAVE_STATUS_JS = """() => {
  const doc = Bokeh.documents[0]
  // Panel sends an HTML pane's text escaped (the browser decodes it as it draws).
  const panes = [...doc.all_models].filter(m => typeof m.text === 'string' && m.text.includes('status')
                                               && m.text.includes('role='))
  const button = [...doc.all_models].find(m => m.label === 'Save run')
  return {panes: panes.map(m => ({text: m.text.slice(0, 300), visible: m.visible})),
          button: button ? {disabled: button.disabled, visible: button.visible} : null}
}"""


def expect_save_answer(page, status) -> None:
    """``expect(status).to_be_visible()``; when it fails, the message says what the browser holds
    of the save's answer (:data:`SAVE_STATUS_JS`)."""
    from playwright.sync_api import expect

    try:
        expect(status).to_be_visible()
    except AssertionError as error:
        raise AssertionError(f"{error}\nthe browser's save status: {page.evaluate(SAVE_STATUS_JS)}") from None


def saved_runs(page):
    """The rows of the Saved runs table."""
    return page.get_by_role("table", name="Saved runs").locator("tbody tr")


def saved_run_row(page, run: int):
    """The Saved runs row of run number ``run``, found by its run cell, not its place."""
    return saved_runs(page).filter(
        has=page.locator("td:first-child").filter(has_text=re.compile(rf"^{run}$")))


def row_steps(page):
    """The row steps' list."""
    return page.locator("ol.row-steps")


def screenshot(page, name: str, full_page: bool = True) -> Path:
    """Save a screenshot of ``page`` as ``test-results/screenshots/name``; return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=full_page)
    return path


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


class HealthWatch:
    """Ask a server's ``/healthz`` over and over on a thread of its own, from start until its
    port is closed, keeping every answer in order: a status, or ``"closed"`` (refused).
    """

    def __init__(self, host: str, port: int, path: str = "/healthz", headers: dict | None = None) -> None:
        import threading

        self.host, self.port, self.path, self.headers = host, port, path, headers or {}
        self.answers: list[int | str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import http.client

        while True:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                conn.request("GET", self.path, headers=self.headers)
                answer = conn.getresponse()
                answer.read()
                self.answers.append(answer.status)
            except ConnectionRefusedError:
                self.answers.append("closed")
                return
            except (OSError, http.client.HTTPException):
                self.answers.append("dropped")  # the process ended while answering
            finally:
                conn.close()
            time.sleep(0.02)

    def wait_closed(self, timeout: float = 30.0) -> list[int | str]:
        """Wait until the port is closed; every answer, in order."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the port stayed open; answers so far: {self.answers}"
        return self.answers


def failed_before_closing(answers: list[int | str]) -> bool:
    """Whether health ``answers`` went 200 … 503 … closed: failing only after answering, never
    answering 200 again once failing, and failing before the port closed."""
    if not answers or answers[0] != 200 or answers[-1] != "closed" or 503 not in answers:
        return False
    failing = answers[answers.index(503):]
    return 200 not in failing and "closed" not in failing[:-1]


class PageRequest(threading.Thread):
    """A new learner's page request, sent now and answered whenever the server gets to it."""

    def __init__(self, port: int, path: str = "/") -> None:
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.sent = threading.Event()
        self.answer: tuple[int, str] | None = None
        self.start()

    def run(self) -> None:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", self.path)
            self.sent.set()
            response = conn.getresponse()
            self.answer = (response.status, response.read().decode())
        finally:
            self.sent.set()
            conn.close()

    def result(self) -> tuple[int, str] | None:
        self.join(60)
        return self.answer


class ExitWatch(threading.Thread):
    """When a process ends, seen from a thread of its own: ``ended_after(since)`` is the seconds
    from ``since`` (a ``time.monotonic()``) to its end, whatever the test did meanwhile."""

    def __init__(self, process: subprocess.Popen) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.ended_at: float | None = None
        self.start()

    def run(self) -> None:
        self.process.wait()
        self.ended_at = time.monotonic()

    def ended_after(self, since: float, timeout: float = 60.0) -> float:
        self.join(timeout)
        assert self.ended_at is not None, f"the process did not end within {timeout} s"
        return self.ended_at - since


def run_coroutine(coroutine):
    """``asyncio.run`` on a thread of its own, returning its result or raising its error: on a
    pytest worker that has run a browser test, Playwright's sync API keeps an event loop running
    in the main thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
