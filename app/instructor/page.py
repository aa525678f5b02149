"""The instructor page assembled: filters, class picture, table, exports, comparison.

:class:`InstructorPage` is one browser session's page over the server's store; tests build it
without a browser and read its ``state``. New runs appear without a reload: a periodic callback
per session reads the store's change token and re-reads the runs only when it moved, in a store
thread (:mod:`app.shared.store_calls`), as the check of its login is.
"""

from __future__ import annotations

import io
import threading
from datetime import UTC, datetime
from time import monotonic

import panel as pn
import param
from bokeh.models import CustomJS

from app.auth import LOGOUT_PATH
from app.instructor.chart import CHART_HEIGHT, ClassChartView
from app.instructor.columns import created_texts
from app.instructor.learners import LearnersView
from app.instructor.state import InstructorState, Refresh, zone
from app.instructor.table import PAGE_ARIA_JS, TABLE_RESYNC_JS, FiltersView, RunsTableView
from app.instructor.upload import UploadView
from app.logins import GuardedStore, LoginEnded, Logins, SessionLogin, store_problem
from app.shared import store_calls
from app.shared.compare import ComparisonView
from app.shared.connection import announce_lost_connection, mark_stale_js
from app.shared.html import html
from app.shared.static import read_text
from app.shared.widgets import keyboard_callback, like_the_first_paint, one_layout_callback
from app.store import RunStore, StoreError, resolve_store_url
from app.upstream import close_session_connections, send_updates_queued_during_a_write

# Each page's tick: a run saved anywhere is counted within 2 s (issue 25), reading and drawing
# included; one indexed read of the change token, in a store thread, after a cached login check
# (app.logins.RECHECK_S). Half a second, so waiting for the tick leaves room for the redraw on a
# loaded machine (bench/README.md, "the instructor page's tick").
REFRESH_MS = 500
# A tick that redrew the page keeps the next read this far off: a redraw holds the event loop
# every page of the process shares, so a class saving non-stop is redrawn once a second.
REDRAW_EVERY_S = 1.0
# How long after a page first hears its login has ended it sends the browser to the login page
# and closes its websocket (time for the browser to leave).
LEAVE_AFTER_MS = 200
CLOSE_AFTER_MS = 1500
LOGGED_OUT = ("<main data-testid='logged-out'><h2>Logged out</h2><p role='alert'>This instructor login has "
              "ended (logged out in another tab or window): this page shows nothing "
              "more. <a href='./login'>Log in again</a>.</p></main>")
# Sends the browser to the login page, beside this one (under serve --prefix too).
_TO_LOGIN_JS = "window.location.replace(new URL('login', window.location.href).href)"
INTRO = (
    "<p>Every run your learners saved, newest first. New runs appear within a few seconds. Tick "
    "two runs (or click two points in the class picture) to compare them; ticking a third "
    "replaces the oldest.</p>")
DISCONNECTED = ("Connection to the workbench server lost: this page no longer updates, and its filters, "
                "exports and comparison do nothing. Reload the page, again in a moment if it does not load; saved runs "
                "are kept.")
# The run count above the table says the table is stale too, long after the notice was read.
STALE_COUNT_JS = mark_stale_js(
    ".runs-count", " The connection to the server was lost: this table no longer updates; reload the page.")


# Named, not __package__: `panel serve app/instructor/page.py` runs this file as a script, without a package.
_PACKAGE = "app.instructor"
_LOGOUT_CSS = read_text(_PACKAGE, "page_logout.css")


# The most runs the page's JSON export sends (about 46 MB): a download travels through the page's
# WebSocket and is built in the browser's memory, and 100,000 runs (230 MB) never arrived.
# More are exported on the server with `attention-workbench export`.
PAGE_JSON_RUNS = 20_000


class ExportRefused(RuntimeError):
    """An export the store could not give (it cannot be reached); the page says so. ``refusal``:
    one line in the operator's log, without a traceback (:mod:`app.oplog`)."""

    refusal = True


class ExportView(pn.viewable.Viewer):
    """Download the filtered runs as a JSON bundle or CSV; fresh content on every click.

    JSON for at most :data:`PAGE_JSON_RUNS` runs; past that its button is off and a note says
    to filter or to export on the server. After an export that left out runs it could not read,
    the note names them until the next export.
    """

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        self._stamp, self._repeats = "", 0  # the last file name's time, and how often it was given
        self.json = pn.widgets.FileDownload(
            callback=lambda: self._download("json"), filename="class-runs.json",
            label="Export JSON", embed=False, color="primary")
        self.csv = pn.widgets.FileDownload(
            callback=lambda: self._download("csv"), filename="class-runs.csv",
            label="Export CSV", embed=False, color="primary")
        self.note = pn.pane.HTML("", name="export-note", sizing_mode="stretch_width")
        self._left_out: list = []  # the last export's runs that could not be read
        self._refused = False  # the last export found the store unreachable
        self.state.param.watch(self._limit, ["matching", "store_problem"])
        self._limit()

    def _limit(self, *events) -> None:
        too_many = self.state.matching > PAGE_JSON_RUNS
        self.json.disabled = too_many
        note = (
            html("<p>Exports hold the runs the filters keep, text exactly as saved.</p>") if not too_many else
            html("<p data-testid='export-note'>Exports hold the runs the filters keep, text exactly as saved. "
                 "<b>JSON from this page holds at most {:,} runs</b> (the filters keep {:,}): filter by "
                 "date, learner or mode, or export them all on the server with <code>attention-workbench "
                 "export --format json -o class-runs.json</code>.</p>", PAGE_JSON_RUNS, self.state.matching))
        if self._refused and self.state.store_problem:
            note += html("<p role='alert' data-testid='export-refused'><b>Not exported:</b> the class's "
                         "store cannot be reached just now; try again in a moment.</p>")
        if self._left_out:
            n = len(self._left_out)
            note += html("<p role='alert' data-testid='export-left-out'><b>The last export left out {:,} "
                         "run{} that could not be read</b> (the store was changed by hand): {}</p>", n,
                         "s" if n != 1 else "", "; ".join(f"{e.run_id} ({e.reason})" for e in self._left_out[:5])
                         + ("; …" if n > 5 else ""))
        self.note.object = note

    def _download(self, fmt: str) -> io.StringIO:
        widget = self.json if fmt == "json" else self.csv
        try:
            self.state.refresh()  # runs saved since the last tick are in the file too
            left_out: list = []
            text = self.state.export(fmt, left_out)
        except StoreError as error:
            self._refused = True
            self.state.store_problem = store_problem(error)
            self._limit()
            raise ExportRefused(f"{fmt} export: the store cannot be read") from None
        self._refused = False
        widget.filename = self._name(fmt, datetime.now(UTC))
        if left_out or self._left_out:
            self._left_out = left_out
            self._limit()
        return io.StringIO(text)

    def _name(self, fmt: str, now: datetime) -> str:
        """``class-runs-<UTC time to the ms>.<fmt>``, with ``-2``, ``-3``… for a second export of
        this page within the same millisecond: a browser would otherwise name it ``… (1)``, or
        overwrite the first."""
        stamp = f"{now:%Y%m%dT%H%M%S}.{now.microsecond // 1000:03d}Z"
        self._repeats = self._repeats + 1 if stamp == self._stamp else 1
        self._stamp = stamp
        return f"class-runs-{stamp}{'' if self._repeats == 1 else f'-{self._repeats}'}.{fmt}"

    def __panel__(self):
        return pn.Row(self.json, self.csv, self.note, sizing_mode="stretch_width")


def comparison_names(records, timezone: str) -> list[str]:
    """What the comparison calls each run: learner, label and created time in ``timezone`` (as the
    table shows it), so two runs of one learner, or two unlabelled runs, can be told apart; the id
    is added where that still leaves two names alike. Plain text (the comparison escapes it)."""
    times = created_texts(records, timezone, "%Y-%m-%d %H:%M:%S %Z")
    names = [f"{r.learner or 'no learner name'} · {f'“{r.label}”' if r.label else 'no label'} · {t}"
             for r, t in zip(records, times, strict=True)]
    if len(set(names)) < len(names):
        names = [f"{name} · {r.id}" for name, r in zip(names, records, strict=True)]
    return names


class ComparisonPanel(pn.viewable.Viewer):
    """The comparison of the selected runs, and a hint while fewer than two are selected."""

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        self.compare = ComparisonView()
        self.hint = pn.pane.HTML("", name="compare-hint")
        self.state.param.watch(self._update, ["selected_ids", "changes", "timezone"])
        self._update()  # runs may have been selected before the page was complete

    def _update(self, *events) -> None:
        compared = self.state.read_or_say(lambda: self.state.compared)
        if compared is None:  # the store cannot be read: the comparison keeps what it showed
            return
        missing = 2 - len(compared)
        self.hint.object = ("" if missing <= 0 else
                            html("<h3>Comparison</h3><p>Select {} more run{} to compare (tick it in the "
                                 "table or click its point).</p>", missing, "s" if missing > 1 else ""))
        self.compare.show(compared, names=comparison_names(compared[:2], self.state.timezone))

    def __panel__(self):
        # Two maps side by side are wider than a 640 px window: they scroll in this box, not the page.
        return pn.Column(self.hint, self.compare, sizing_mode="stretch_width",
                         styles={"overflow-x": "auto"}, css_classes=["scroll-box"])


class InstructorPage(pn.viewable.Viewer):
    """One session's instructor page over the server's store.

    The first paint carries the filters, the run count and the table; the class picture (two
    figures, many Bokeh models and a point per run), the exports and the comparison are built
    once the browser has drawn it (``pn.state.onload``; at once without a browser session).

    With a ``login`` (a server with a password) the page reads the store only while that login
    holds: every store call asks it first (:class:`app.logins.GuardedStore`), and so does a check
    once a second. When it has ended the page empties itself, sends the browser to the login page
    and then closes its websocket.
    """

    state = param.ClassSelector(class_=InstructorState, doc="This session's runs, filters and selection.")

    def __init__(self, store: RunStore | None = None, login: SessionLogin | None = None, **params):
        self.login = login
        if "state" not in params:
            guarded = store if login is None else GuardedStore(store, login.holds_now, login.unanswered)
            params["state"] = InstructorState(store=guarded)
        super().__init__(**params)
        self.class_chart: ClassChartView | None = None  # these once the browser drew the rest
        self.exports: ExportView | None = None
        # Built with the first paint: FilePond, added to a page already shown, takes no file.
        self.upload = UploadView(state=self.state)
        self.comparison: ComparisonPanel | None = None
        self.learners: LearnersView | None = None
        # The class picture's space (heading and one row of figures) is kept, so the table does
        # not jump down when it arrives; what follows the table needs none.
        self.chart = pn.Column(sizing_mode="stretch_width", min_height=CHART_HEIGHT)
        self.below = pn.Column(sizing_mode="stretch_width")
        self._to_login = pn.pane.HTML("", visible=False, name="to-login")
        self._to_login.jscallback(text=_TO_LOGIN_JS)  # the Bokeh name of its `object`
        self._layout = pn.Column(
            pn.pane.HTML(INTRO),
            FiltersView(state=self.state),
            self.chart,
            pn.pane.HTML("<h3>Runs</h3>"),
            RunsTableView(state=self.state),
            self.below,
            self.upload,
            self._to_login,
            sizing_mode="stretch_width",
        )
        pn.state.onload(self._rest)
        self._follow_browser_timezone()
        self._thread = threading.get_ident()  # the event loop's, for a served page
        self._ticking = False  # a tick's reads are in a store thread
        self._redrawn = float("-inf")  # monotonic() of the last tick that redrew the page
        self._callbacks = [pn.state.add_periodic_callback(self._tick, period=REFRESH_MS)]
        if login is not None:
            login.on_end(self._login_ended)
        if pn.state.curdoc is not None:
            pn.state.curdoc.on_session_destroyed(lambda context: self._stop_callbacks())

    def _stop_callbacks(self) -> None:
        for callback in self._callbacks:
            callback.stop()

    def _refresh(self) -> None:
        """Read the store again; while it cannot be read, say so above the table, which keeps
        what it last read. (What a tick does, all on the calling thread.)"""
        self._show_tick(self._read_tick())

    def _tick(self) -> None:
        """Every :data:`REFRESH_MS`: on a served page the tick's reads run in a store thread
        (:mod:`app.shared.store_calls`), one at a time, so a store that stops answering holds that
        thread, not the event loop every page of the process shares; without a server, at once.
        Each asks first whether the login holds (the page closes itself once it has ended)."""
        if not store_calls.served():
            self._refresh()
        elif self._due():
            self._ticking = True
            pn.state.execute(self._refresh_in_thread)

    def _due(self) -> bool:
        """Whether a served page's tick reads now: none in flight, and the last redraw at least
        :data:`REDRAW_EVERY_S` ago."""
        return not self._ticking and monotonic() - self._redrawn >= REDRAW_EVERY_S

    async def _refresh_in_thread(self) -> None:
        try:
            read = await store_calls.in_thread(self._read_tick)
            with pn.io.hold():  # the tick's changes leave together, as an edit's do on the learner page
                self._show_tick(read)
            if isinstance(read, Refresh):
                self._redrawn = monotonic()
        finally:
            self._ticking = False

    def _read_tick(self) -> Refresh | None | str:
        """The tick's store reads: what changed (:meth:`InstructorState.read_refresh`), ``None``
        when nothing did or the login has ended, or what the page says when the store cannot be
        read (:func:`app.logins.store_problem`)."""
        if self.login is not None and not self.login.holds():
            return self.login.problem if self.login.unknown else None
        try:
            return self.state.read_refresh()
        except StoreError as error:  # logged by the store, once a minute
            return store_problem(error)
        except LoginEnded:  # ended since holds() said yes: the page is closing
            return None

    def _show_tick(self, read: Refresh | None | str) -> None:
        if isinstance(read, str):  # the store could not be read
            self.state.store_problem = read
        elif self.login is None or not self.login.ended:
            self.state.show_refresh(read)
            self.state.store_problem = ""

    def _login_ended(self) -> None:
        """Show nothing more: the page's views go, the browser is sent to the login page, and the
        websocket is closed a moment later (whatever the browser does). Found in a store thread,
        this runs on the event loop's next tick (Bokeh's way to change a page from a thread)."""
        doc = pn.state.curdoc
        if threading.get_ident() != self._thread and doc is not None and doc.session_context is not None:
            doc.add_next_tick_callback(self._login_ended)
            return
        self._stop_callbacks()
        if doc is None or doc.session_context is None:
            self._leave()
            return
        # A moment later: the tab that logged out has gone by then, and nothing is written to its
        # closing websocket (Tornado would log a traceback).
        doc.add_timeout_callback(self._leave, LEAVE_AFTER_MS)
        doc.add_timeout_callback(lambda: close_session_connections(doc), CLOSE_AFTER_MS)

    def _leave(self) -> None:
        self._layout.objects = [pn.pane.HTML(LOGGED_OUT, name="logged-out", sizing_mode="stretch_width"),
                                self._to_login]
        self._to_login.object = "login ended"  # last: runs _TO_LOGIN_JS in the browser

    def _rest(self) -> None:
        if self.login is not None and not self.login.holds() and not self.login.unknown:
            return  # ended: the page is closing (a store that cannot say is not an ended login)
        with like_the_first_paint():
            self.class_chart = ClassChartView(state=self.state)
            self.exports = ExportView(state=self.state)
            self.comparison = ComparisonPanel(state=self.state)
            self.learners = LearnersView(self.state.store, lambda: zone(self.state.timezone), count_now=False)
            # A store that cannot be read as the page opens: the page says so, and the next tick
            # that reads it counts again (``changes``), as every view's.
            self.state.read_or_say(self.learners.refresh)
            self.state.param.watch(lambda *events: self.state.read_or_say(self.learners.refresh),
                                   ["changes", "timezone"])
            self.chart.append(self.class_chart)
            self.below.objects = [self.exports, self.comparison, self.learners]

    def _follow_browser_timezone(self) -> None:
        info = pn.state.browser_info
        if info is None:
            return

        def _set(*events):
            if info.timezone:
                self.state.timezone = info.timezone
        info.param.watch(_set, "timezone")
        _set()

    def serve_session(self) -> InstructorPage:
        """Set this browser session up for the page: its disconnect notice and the runs table's
        and date picker's ARIA fixes (see ``PAGE_ARIA_JS``). Returns the page."""
        send_updates_queued_during_a_write()  # under `panel serve` too (app.upstream)
        # After a server restart the page would keep a stale table whose filters and exports
        # silently do nothing: say so, as the learner page does.
        announce_lost_connection(DISCONNECTED, STALE_COUNT_JS)
        if pn.state.curdoc is not None:
            pn.state.curdoc.js_on_event("document_ready", CustomJS(code=PAGE_ARIA_JS))
            pn.state.curdoc.js_on_event("document_ready", CustomJS(code=TABLE_RESYNC_JS))
            pn.state.curdoc.js_on_event("document_ready", keyboard_callback())  # as the learner page
            pn.state.curdoc.js_on_event("document_ready", one_layout_callback())
        return self

    def template(self) -> pn.template.BootstrapTemplate:
        """This page in the workbench's template, ready to serve."""
        template = pn.template.BootstrapTemplate(
            title="Self-attention workbench · Instructor", header_background="#37474f",
            busy_indicator=None,  # process-wide flag: see the learner page's template
        )
        template.main.append(self)
        if pn.state.user:  # logged in through the instructor password (app.auth)
            template.header.append(pn.pane.HTML(
                html("<a href='.{}' class='logout'>Log out</a>", LOGOUT_PATH), name="logout", align="center",
                stylesheets=[_LOGOUT_CSS], margin=(0, 20, 0, 0)))
        return template

    def __panel__(self):
        return self._layout


def create_instructor(store: RunStore, logins: Logins | None = None) -> pn.template.BootstrapTemplate:
    """Build one session's instructor page over the server's ``store``, in its template; with
    ``logins`` (a server with a password) bound to the login of the request that opened it."""
    # The upload's FilePond scripts (and the disconnect notice's), asked for before the page is built.
    pn.extension("filedropper", "tabulator", notifications=True)
    login = None if logins is None else logins.session_login(pn.state.cookies)
    return InstructorPage(store, login).serve_session().template()


if pn.state.served:
    # `panel serve app/instructor/page.py`: the page over the store `attention-workbench serve`
    # opens by default, one per server process; no password (that is `serve`'s).
    create_instructor(pn.state.as_cached("attention-workbench-store", RunStore, url=resolve_store_url())).servable()
