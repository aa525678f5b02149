"""The learner's workbench page: assembles the views in a Panel template.

Serve it with ``attention-workbench serve`` (or ``panel serve app/workbench.py``). Each browser
session calls :func:`create_workbench` and so gets its own state and widgets.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

import panel as pn
from bokeh.models import Column as BokehColumn
from bokeh.models import Div
from tornado.ioloop import IOLoop, PeriodicCallback

from app.runs import RunsView, SaveView
from app.state import WorkbenchState
from app.views import InputsView, MatricesView, ReadoutsView
from attention_core.store import RunStore, resolve_runs_dir

INTRO = """<p>
Type a query and a key for each token. Rows are querying tokens, columns are the keys they may
read. With the <b>Causal mask</b> on, a token cannot read later tokens: their scores become −∞
<em>before</em> softmax, so each row's weights still sum to 1. Switch on <b>Mask after softmax
(broken)</b> to see what goes wrong when the mask is applied afterwards. Save a run in each mode
and compare their future-token weight and row sums. Here d = 1, so scores are divided by √1 = 1.
</p>"""


DISCONNECTED = ("Connection to the workbench server lost: nothing you do now is saved. "
                "Reload the page once the server is back; your saved runs are kept.")


class _MemoryReclaimer:
    """Runs the server's full garbage collections: after a burst of closes, and every 10 min.

    A destroyed session's objects sit in reference cycles until a full garbage collection, and
    the allocator keeps freed pages mapped: a server that held a class kept its peak RSS. One
    full collection and ``malloc_trim`` a few seconds after the last close fixes that where the
    C library is glibc; elsewhere it only collects. Process-wide by nature, so one instance.

    A full collection walks every open page's objects and stops every learner meanwhile (0.4-0.7 s
    with 50-100 pages open on 2 cores), so after closes it runs only once at most
    ``CHEAP_PAGES`` pages are still open: a learner who reloads in a full class no longer
    freezes everyone else's page. The rest waits for the periodic collection.

    ``serve`` switches the collector's own full collections off (app/server.py,
    ``_settle_heap``): with 50 open pages each one walked every page's objects, stopped every
    learner for 0.3-0.8 s and found about a thousand objects of garbage. The young generations
    are still collected as usual; what reaches the old one waits for a close or the timer.
    """

    DELAY_S = 5.0  # after the last close of a burst (Bokeh discards idle sessions in batches)
    EVERY_S = 600.0  # the periodic full collection, for garbage that outlives its edit
    CHEAP_PAGES = 10  # open pages a collection after closes may walk (~6 ms each here)

    def __init__(self) -> None:
        self.open_pages = 0
        self._pending = False
        self._periodic: PeriodicCallback | None = None
        try:
            self._trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            self._trim = None

    def session_destroyed(self, session_context) -> None:
        self.open_pages = max(0, self.open_pages - 1)
        if not self._pending:
            self._pending = True
            IOLoop.current().call_later(self.DELAY_S, self._after_closes)

    def _after_closes(self) -> None:
        self._pending = False
        if self.open_pages <= self.CHEAP_PAGES:
            self._reclaim()

    def start(self) -> None:
        """Count a new page; start the periodic full collection on this process's loop (from its
        first page)."""
        self.open_pages += 1
        if self._periodic is None:
            self._periodic = PeriodicCallback(self._reclaim, self.EVERY_S * 1000)
            self._periodic.start()

    def _reclaim(self) -> None:
        gc.collect()
        if self._trim is not None:
            self._trim(0)


_reclaimer = _MemoryReclaimer()


def _keep_saved_runs_in_url(state: WorkbenchState) -> None:
    """Keep the ids of this page's saved runs in its URL (``?runs=id1,id2``), so a reload or a
    bookmark shows the same Saved runs again. The ids are only ever looked up in the store."""
    location, args = pn.state.location, pn.state.session_args or {}
    if location is None:
        return
    ids = b",".join(args.get("runs", [])).decode("ascii", "replace")
    state.restore_runs([i for i in ids.split(",") if i])

    def write(event) -> None:
        location.update_query(runs=",".join(r.id for r in event.new))
    state.param.watch(write, "saved")


def create_workbench(store: RunStore | None = None) -> pn.template.BootstrapTemplate:
    """Build one session's workbench page over ``store`` (default: the resolved runs dir)."""
    state = WorkbenchState(store if store is not None else RunStore(resolve_runs_dir()))
    # Session-local config: a learner whose server went away is told so, instead of clicking
    # Save run into a dead connection and believing the run was saved.
    pn.config.notifications = True
    pn.config.disconnect_notification = DISCONNECTED
    template = pn.template.BootstrapTemplate(
        title="Self-attention workbench", sidebar_width=420, header_background="#37474f",
        # Panel's busy indicator follows one process-wide flag: every learner's edit would send
        # a patch to every open page, so a class of 40 waited on each other's edits.
        busy_indicator=None,
    )
    template.sidebar.append(InputsView(state=state))
    readouts = ReadoutsView(state=state)
    matrices = MatricesView(state=state)
    # Everything down to Save run is plain Bokeh models in two Bokeh layouts, so two Panel panes:
    # each Panel pane costs the server some 25-35 KiB for every open page (and a Panel Row it
    # builds for itself), a Bokeh model about a third of that. Two, because BokehJS lays out a
    # whole layout again, at once, for every Div whose text changes: an edit changes the mirror
    # tables and the readouts, and kept in the figures' layout they made the browser lay out
    # and redraw both heat maps three more times per edit. Each item of the template's main
    # area is a layout (a document root) of its own.
    figures = BokehColumn(children=[
        Div(text=INTRO, sizing_mode="stretch_width", margin=(5, 10)),
        readouts.banner,
        matrices.model,
    ], sizing_mode="stretch_width")
    texts = BokehColumn(children=[
        matrices.tables,
        readouts.table,
        SaveView(state=state).model,
    ], sizing_mode="stretch_width")
    for layout in (figures, texts):
        template.main.append(pn.pane.Bokeh(layout, sizing_mode="stretch_width", margin=0))
    template.main.append(RunsView(state=state))
    template.state = state  # for tests without a browser
    if pn.state.curdoc is not None:
        pn.state.on_session_destroyed(_reclaimer.session_destroyed)
        _reclaimer.start()
        _keep_saved_runs_in_url(state)
    return template


if __name__.startswith("bokeh"):
    create_workbench().servable()
