"""Classroom load: 10, 50, 100 learners on one ``attention-workbench serve`` process.

Each learner is a ``bokeh.client`` session (a real websocket session of the real server, which
builds the whole learner page for it) driven from its own thread: it types a new ``Query 3``
every few seconds (a cell of the page's input grid, sent as that cell's edit as a browser
sends it; ``Query 3, component 1`` at ``size="largest"``, where each learner first sets 8 tokens,
values on and d_k = d_v = 4 through the page's own controls) and, every fifth edit, writes a
prediction and presses ``Save run``, then waits until the page's Saved runs ticks (a
CheckBoxGroup, one "Run N…" label per run) show the new run. An edit is timed from sending the
cell's edit from the client document until the client has received the new ``weights-source``
data, i.e. one full round trip through the server's recompute. Memory is the server's RSS;
issue 13 allows 4 MiB per open page. At ``size="layer"`` (issue 23's largest page) each learner
first loads the "Four-token trace (seed 000)" preset (matrix mode, values on), then sets 8
tokens, d_k = d_v = d_model = 4, Batch size 3 and ticks Output projection W_O, and types
``X item 1 token 3, component 1``, timed until item 1's ``weights-item-1-source`` changes;
issue 23 allows 5 MiB per open page there.

Levels are cumulative (10, then 40 more, then 50 more), so 100 pages are built, not 160.
Baseline RSS is taken after one warm-up session was opened, closed and cleaned up by the server
(``unused_session_lifetime`` in app/server.py), so one-off costs (imports, templates) are not
charged to the class. After all sessions close, the bench waits the same cleanup time and reads
RSS again (a figure, no target: the allocator keeps what a class made). Then a second class of
the same size as the last level opens, edits for the same time and closes (not with ``--quick``,
which does not wait for the cleanup): issue 25 allows its peak RSS (``VmHWM``, the high-water
mark) to be at most 10 % above the first class's.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import resource
import secrets
import threading
import time
from pathlib import Path

from common import cpu_seconds, rss_mib, send_frames_at_once, start_baseline, start_workbench, summary

THINK_S = (2.0, 6.0)  # a learner's pause between edits, uniform
RSS_TARGET_MIB = {"default": 4.0, "largest": 4.0, "layer": 5.0}  # per open page: issues 13, 23
SAVE_EVERY = 5
WAIT_TIMEOUT_S = 60.0  # an edit or save not shown by then is reported as the learner's error


def _register_panel_models() -> None:
    """The client must know every model class the server's document holds."""
    import panel.models

    import app.learner.page  # noqa: F401 - imports every model class the page uses

    for info in pkgutil.iter_modules(panel.models.__path__):
        try:
            importlib.import_module(f"panel.models.{info.name}")
        except Exception:  # noqa: BLE001 - optional extras (e.g. vtk) are not needed here
            pass


def _bokeh_client_sends_frames_at_once() -> None:
    """Each ``bokeh.client`` connection made from now on sends its frames at once, as a browser
    does (common.send_frames_at_once). Bokeh wraps every socket it connects in
    ``WebSocketClientConnectionWrapper``, which offers no option for it: wrapped here, once."""
    from bokeh.client import websocket

    wrapper = websocket.WebSocketClientConnectionWrapper
    if getattr(wrapper, "sends_frames_at_once", False):
        return
    wrap = wrapper.__init__

    def __init__(self, socket) -> None:
        wrap(self, socket)
        send_frames_at_once(socket)

    wrapper.__init__ = __init__
    wrapper.sends_frames_at_once = True


def _as_a_browser_does(doc) -> None:
    """Send the ``DocumentReady`` event BokehJS sends once it has drawn the page, and the page
    key its ``page_key.js`` sends (a learner page saves runs only once its key arrived).

    Panel only counts a session as loaded after it (``pn.state.loaded``, ``onload``); before it,
    updates go by a scheduled path a browser page never takes.
    """
    from bokeh.document.events import MessageSentEvent
    from bokeh.events import DocumentReady

    doc.callbacks.trigger_on_change(MessageSentEvent(doc, "bokeh_event", DocumentReady()))
    for model in list(doc.models):  # the PageKey component's data model (app/learner/page_key.py)
        data = getattr(model, "data", None)
        if data is not None and hasattr(data, "properties") and "page_key" in data.properties():
            data.page_key = secrets.token_hex(16)  # 128 bits, as crypto.getRandomValues gives


def _wait(session, predicate, timeout_s: float) -> bool:
    """Run the client's loop until ``predicate()`` or ``timeout_s``; return ``predicate()``.

    bokeh.client re-checks the predicate only when a message arrives, so a timer stops the
    loop if none does.
    """
    connection = session._connection  # the client's own way to wait for messages
    timer = connection._loop.call_later(timeout_s, connection._loop.stop)
    try:
        connection._loop_until(lambda: predicate() or not session.connected)
    finally:
        connection._loop.remove_timeout(timer)
    return predicate()


def _saved_rows(doc) -> int:
    """Runs in the page's Saved runs: the ticks' checkbox group has one "Run N…" label per run.

    Other checkbox groups (Padding i, the masks) never label an option "Run ".
    """
    from bokeh.models import CheckboxGroup

    return max((len(m.labels) for m in doc.select({"type": CheckboxGroup})
                if m.labels and all(label.startswith("Run ") for label in m.labels)), default=0)


SIZES = {"default": None, "largest": (8, 4), "layer": (8, 4)}  # tokens, d_k = d_v; None: as it opens
LAYER = {"layer": {"batch": 3, "d_model": 4}}  # the sizes in matrix mode, with W_O


def _grid_cell(doc, label: str):
    """The input grid's model holding the cell named ``label``, and the cell's place."""
    from panel.models.esm import ReactiveESM

    for model in doc.select({"type": ReactiveESM}):
        for i, row in enumerate(getattr(model.data, "labels", None) or []):
            if label in row:
                return model, i, row.index(label)
    raise LookupError(f"no grid cell is named {label!r}")


def _type(doc, label: str, text: str) -> None:
    """Type ``text`` into the cell ``label`` as the browser does: that cell's edit, counted,
    as a Bokeh event to the grid (``model.send_msg`` in app/shared/grid.py)."""
    from panel.models.esm import DataEvent

    model, _, _ = _grid_cell(doc, label)
    edit = {"seq": model.data.acked + 1, "label": label, "text": text}
    doc.callbacks.send_event(DataEvent(model, edit))


def _has_cell(doc, label: str) -> bool:
    try:
        _grid_cell(doc, label)
    except LookupError:
        return False
    return True


def _click(doc, button) -> None:
    from bokeh.document.events import MessageSentEvent
    from bokeh.events import ButtonClick

    doc.callbacks.trigger_on_change(MessageSentEvent(doc, "bokeh_event", ButtonClick(button)))


def _control(doc, kind, what: str, matches):
    """The first ``kind`` model of ``doc`` for which ``matches(model)`` holds; LookupError naming
    ``what`` if none does (a learner's error in the results says which control was missing)."""
    found = next((m for m in doc.select({"type": kind}) if matches(m)), None)
    if found is None:
        raise LookupError(f"the page has no {what}")
    return found


def _largest_page(session, doc, size: str) -> None:
    """Set the page to ``size`` by its own controls: Tokens, Use values, d_k, d_v (at the layer
    size first the four-token preset for matrix mode, then also d_model, Batch size and W_O)."""
    from bokeh.models import Button, CheckboxGroup, NumericInput, Select

    if SIZES[size] is None:
        return
    tokens, width = SIZES[size]
    layer = LAYER.get(size)
    if layer is not None:
        _click(doc, _control(doc, Button, "Four-token trace button",
                             lambda m: m.label == "Four-token trace (seed 000)"))
        # Matrix mode's own controls (d_model, Batch size, W_O) are made when it is first shown.
        if not _wait(session, lambda: _has_cell(doc, "W_V row 2, column 2") and any(
                m.title == "Batch size" for m in doc.select({"type": Select})), WAIT_TIMEOUT_S):
            raise RuntimeError(f"the page did not take the four-token preset in {WAIT_TIMEOUT_S} s")
    _control(doc, NumericInput, "Tokens field", lambda m: m.title == "Tokens").value = tokens
    _control(doc, CheckboxGroup, "Use values box",
             lambda m: m.labels == ["Use values (adds output and contributions)"]).active = [0]
    selects = {"Head width d_k": width, "Value width d_v": width}
    if layer is not None:
        selects.update({"Model width d_model": layer["d_model"], "Batch size": layer["batch"]})
    for title, value in selects.items():
        _control(doc, Select, f"{title} select", lambda m, t=title: m.title == t).value = str(value)
    last, weights = f"Value {tokens}, component {width}", "weights-source"
    if layer is not None:
        _control(doc, CheckboxGroup, "Output projection W_O box",
                 lambda m: m.labels == ["Output projection W_O"]).active = [0]
        last = f"W_O row {width}, column {layer['d_model']}"
        weights = f"weights-item-{layer['batch']}-source"

    def ready() -> bool:
        # Looked up each time: a batch item's maps exist only once the server has made them.
        source = doc.get_model_by_name(weights)
        return source is not None and _has_cell(doc, last) and len(source.data["value"]) == tokens * tokens

    if not _wait(session, ready, WAIT_TIMEOUT_S):
        raise RuntimeError(f"the page did not take the {size} size in {WAIT_TIMEOUT_S} s")


def _edited(size: str) -> str:
    if size in LAYER:
        return "X item 1 token 3, component 1"
    return "Query 3" if SIZES[size] is None else "Query 3, component 1"


def _watched(size: str) -> str:
    """The source an edit is timed until: the edited item's weights."""
    return "weights-item-1-source" if size in LAYER else "weights-source"


def _cells(source) -> tuple[str, ...]:
    """A heat map's cell values as text: masked cells are NaN, and NaN != NaN would make an
    unchanged map look changed."""
    return tuple(repr(float(x)) for x in source.data["value"])


class Learner(threading.Thread):
    def __init__(self, index: int, url: str, opener: threading.Semaphore, bench: Classroom,
                 size: str = "default"):
        super().__init__(daemon=True, name=f"learner-{index}")
        self.index, self.url, self.opener, self.bench, self.size = index, url, opener, bench, size
        self.ready = threading.Event()
        self.active = threading.Event()
        self.stop = threading.Event()
        self.open_s: float | None = None
        self.error: str | None = None
        self.edits = 0
        self.saves = 0

    def run(self) -> None:
        from bokeh.client import pull_session
        from bokeh.models import Button, TextAreaInput

        try:
            with self.opener:
                t = time.monotonic()
                session = pull_session(url=self.url)
                self.open_s = time.monotonic() - t
        except Exception as exc:  # noqa: BLE001 - reported in the results
            self.error = repr(exc)
            self.ready.set()
            return
        doc = session.document
        _as_a_browser_does(doc)
        try:
            _largest_page(session, doc, self.size)
        except Exception as exc:  # noqa: BLE001 - reported in the results
            self.error = repr(exc)
            self.ready.set()
            session.close()
            return
        label = _edited(self.size)
        prediction = _control(doc, TextAreaInput, "Prediction field", lambda m: m.title == "Prediction")

        def save_button():
            return next((m for m in doc.select({"type": Button}) if m.label == "Save run"), None)

        # The page sends what lies below its maps after the first paint, as a learner sees it.
        if not _wait(session, lambda: save_button() is not None, WAIT_TIMEOUT_S):
            self.error = f"no Save run in {WAIT_TIMEOUT_S} s"
            self.ready.set()
            session.close()
            return
        save = save_button()
        weights = doc.get_model_by_name(_watched(self.size))
        rng = random.Random(self.index)
        self.ready.set()
        try:
            while not self.stop.is_set():
                if not self.active.wait(timeout=0.5):
                    continue
                time.sleep(rng.uniform(*THINK_S))
                if self.stop.is_set() or not self.active.is_set():
                    continue
                before = _cells(weights)
                q = f"{rng.uniform(-3, 3):.4f}"
                t = time.monotonic()
                _type(doc, label, q)
                changed = _wait(session, lambda b=before: _cells(weights) != b,
                                WAIT_TIMEOUT_S)
                elapsed = time.monotonic() - t
                if not changed:
                    self.error = ("disconnected" if not session.connected
                                  else f"edit not shown in {WAIT_TIMEOUT_S} s")
                    return
                self.bench.record(elapsed)
                self.edits += 1
                if self.edits % SAVE_EVERY == 0:
                    prediction.value = f"learner {self.index}: row 3 moves towards key 3"
                    _click(doc, save)
                    # Wait for the saved run's tick. Not force_roundtrip(): bokeh.client drops
                    # every PATCH-DOC that arrives while it waits for a reply
                    # (client/states.py, WAITING_FOR_REPLY), so the save's patch would be lost.
                    if not _wait(session, lambda n=self.saves + 1: _saved_rows(doc) >= n,
                                 WAIT_TIMEOUT_S):
                        self.error = ("disconnected during a save" if not session.connected
                                      else f"save {self.saves + 1} not shown in {WAIT_TIMEOUT_S} s")
                        return
                    self.saves += 1
        except Exception as exc:  # noqa: BLE001
            self.error = repr(exc)
        finally:
            session.close()


class Classroom:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.samples: list[float] = []

    def record(self, seconds: float) -> None:
        with self._lock:
            self.samples.append(seconds)

    def take(self) -> list[float]:
        with self._lock:
            out, self.samples = self.samples, []
        return out


def client_floor(workdir: Path, edits: int = 20, size: str = "default") -> dict:
    """The same client timing against the bare echo app (bench/baseline_app.py), one session,
    with the page's fields at ``size``."""
    from bokeh.client import pull_session
    from bokeh.models import TextInput

    _bokeh_client_sends_frames_at_once()
    server = start_baseline(workdir / "classroom-baseline.log", *(SIZES[size] or (3, 1)), **LAYER.get(size, {}))
    samples = []
    try:
        session = pull_session(url=server.url)
        doc = session.document
        _as_a_browser_does(doc)
        query3 = next(m for m in doc.select({"type": TextInput}) if m.title == _edited(size))
        echo = doc.get_model_by_name("echo-source")
        for i in range(edits + 2):
            text = f"{i / 7:.4f}"
            t = time.monotonic()
            query3.value = text
            if not _wait(session, lambda t=text: echo.data["value"][0] == t, WAIT_TIMEOUT_S):
                raise RuntimeError(f"the echo app did not answer an edit in {WAIT_TIMEOUT_S} s")
            if i >= 2:
                samples.append(time.monotonic() - t)
            time.sleep(0.3)
        session.close()
    finally:
        server.stop()
    return summary(samples, 1e3)


def _settle(pid: int, seconds: float) -> float:
    time.sleep(seconds)
    return rss_mib(pid)


def peak_rss_mib(pid: int) -> float:
    """The high-water mark of ``pid``'s resident set in MiB (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def _second_class(server, opener: threading.Semaphore, size: str, sessions: int, phase_s: float) -> dict:
    """A class of ``sessions`` new learners on the same server, after the first has gone: opened,
    editing for ``phase_s``, closed. Returns its edit times, errors and the peak RSS it left."""
    bench = Classroom()
    learners = [Learner(10_000 + n, server.url, opener, bench, size) for n in range(sessions)]
    t = time.monotonic()
    for learner in learners:
        learner.start()
    for learner in learners:
        learner.ready.wait()
    ramp_s = time.monotonic() - t
    rss_open = rss_mib(server.pid)
    for learner in learners:
        learner.active.set()
    time.sleep(phase_s)
    for learner in learners:
        learner.active.clear()
    time.sleep(THINK_S[1] + 1)
    for learner in learners:
        learner.stop.set()
    for learner in learners:
        learner.join(timeout=30)
    return {"sessions": sessions, "ramp_s": ramp_s, "rss_after_open_mib": rss_open,
            "edit_ms": summary(bench.take(), 1e3), "saves": sum(x.saves for x in learners),
            "errors": [x.error for x in learners if x.error], "peak_rss_mib": peak_rss_mib(server.pid)}


def run(workdir: Path, levels: tuple[int, ...], phase_s: float, wait_cleanup: bool,
        size: str = "default", ablation: bool = True) -> dict:
    from app.server import CHECK_UNUSED_SESSIONS_MS, UNUSED_SESSION_LIFETIME_MS

    _register_panel_models()
    _bokeh_client_sends_frames_at_once()
    # Bokeh discards idle sessions; the collector then frees them.
    cleanup_s = (UNUSED_SESSION_LIFETIME_MS + CHECK_UNUSED_SESSIONS_MS) / 1000 + 5
    runs_dir = workdir / "class-runs"
    server = start_workbench(runs_dir, workdir / "classroom.log", ablation=ablation)
    bench = Classroom()
    opener = threading.Semaphore(2)
    learners: list[Learner] = []
    result: dict = {"levels": {}, "think_s": THINK_S, "phase_s": phase_s, "size": size,
                    "ablation_panel": ablation}
    try:
        result["client_floor_echo_ms"] = client_floor(workdir, size=size)
        result["rss_idle_mib"] = _settle(server.pid, 1.0)
        warm = Learner(-1, server.url, opener, bench, size)
        warm.start()
        warm.ready.wait()
        warm.stop.set()
        warm.join()
        if wait_cleanup:
            result["rss_baseline_mib"] = _settle(server.pid, cleanup_s)
            result["baseline_note"] = "after one warm-up session was opened, closed and cleaned up"
        else:
            result["rss_baseline_mib"] = _settle(server.pid, 2.0)
            result["baseline_note"] = "after one warm-up session closed (not yet cleaned up: --quick)"
        for level in levels:
            t = time.monotonic()
            while len(learners) < level:
                learner = Learner(len(learners), server.url, opener, bench, size)
                learner.start()
                learners.append(learner)
            for learner in learners:
                learner.ready.wait()
            ramp_s = time.monotonic() - t
            rss_open = rss_mib(server.pid)
            bench.take()
            cpu0, wall0 = cpu_seconds(server.pid), time.monotonic()
            client0 = resource.getrusage(resource.RUSAGE_SELF)
            for learner in learners:
                learner.active.set()
            time.sleep(phase_s)
            for learner in learners:
                learner.active.clear()
            time.sleep(THINK_S[1] + 1)  # let edits in flight finish
            wall = time.monotonic() - wall0
            client1 = resource.getrusage(resource.RUSAGE_SELF)
            samples = bench.take()
            rss = rss_mib(server.pid)
            opens = [x.open_s for x in learners if x.open_s is not None]
            result["levels"][str(level)] = {
                "sessions": level,
                "edit_ms": summary(samples, 1e3),
                "edits_per_s": len(samples) / wall,
                "server_cpu_share": (cpu_seconds(server.pid) - cpu0) / wall,
                "client_cpu_share": (client1.ru_utime + client1.ru_stime - client0.ru_utime
                                     - client0.ru_stime) / wall,
                "open_session_s": summary(opens),
                "ramp_s": ramp_s,
                "rss_after_open_mib": rss_open,
                "rss_mib": rss,
                "rss_per_session_mib": (rss - result["rss_baseline_mib"]) / level,
                "errors": [x.error for x in learners if x.error],
            }
        for learner in learners:
            learner.stop.set()
        for learner in learners:
            learner.join(timeout=30)
        result["saves"] = sum(x.saves for x in learners)
        from app.store import RunStore, sqlite_url

        with RunStore(sqlite_url(runs_dir / "runs.db")) as store:
            result["runs_on_disk"] = store.count()
        result["rss_just_closed_mib"] = _settle(server.pid, 2.0)
        if wait_cleanup:
            result["rss_after_close_mib"] = _settle(server.pid, cleanup_s)
            result["cleanup_wait_s"] = cleanup_s
        result["peak_rss_first_class_mib"] = peak_rss_mib(server.pid)
        if wait_cleanup:  # the first class's sessions must be gone (not in --quick)
            second = result["second_class"] = _second_class(server, opener, size, max(levels), phase_s)
            second["peak_ratio"] = second["peak_rss_mib"] / result["peak_rss_first_class_mib"]
    finally:
        server.stop()
    top = result["levels"][str(max(levels))]
    base = result["rss_baseline_mib"]
    after = result.get("rss_after_close_mib")
    second = result.get("second_class")
    result["checks"] = {
        "p95_edit_ms_at_top": {"value": top["edit_ms"]["p95"], "target": 250,
                               "pass": top["edit_ms"]["p95"] is not None and top["edit_ms"]["p95"] <= 250
                               if max(levels) >= 100 else None},
        "rss_per_session_mib": {"value": top["rss_per_session_mib"], "target": RSS_TARGET_MIB[size],
                                "pass": top["rss_per_session_mib"] <= RSS_TARGET_MIB[size]},
        # Issue 25: the allocator keeps a class's high-water mark; a second class must reuse it.
        "second_class_peak_ratio": {"value": second["peak_ratio"], "target": 1.10,
                                    "pass": second["peak_ratio"] <= 1.10} if second else
                                   {"value": None, "target": 1.10, "pass": None},
    }
    result["rss_after_close_ratio"] = None if after is None else after / base
    return result
