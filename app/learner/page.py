"""The learner's page: one :class:`LearnerState` and the views over it, in one layout.

Each browser session builds its own :class:`LearnerPage` (``attention-workbench serve`` does,
per request), so no two learners share a widget or a value. Tests build one without a browser:
``page = LearnerPage(store=RunStore(sqlite_url(tmp / 'runs.db')))``, then set ``page.state`` and read the views.
"""

from __future__ import annotations

from functools import partial

import panel as pn
import param

from app.learner.ablation import LEAD, NEEDS_MATRIX_MODE, AblationPanel
from app.learner.checks import BannerView, ReadoutsView
from app.learner.contributions import ContributionsView
from app.learner.inputs import InputsView, checked_int_input, int_message
from app.learner.matrices import MatricesView
from app.learner.page_key import PageKey
from app.learner.projections import ProjectionsView
from app.learner.record import STALE_STATUS_JS, PredictionView, RecordView
from app.learner.runs import SavedRunsView
from app.learner.self_check import SelfCheckPanel
from app.learner.state import MAX_RESTORED_RUNS, LearnerState
from app.learner.steps import RowStepsView
from app.shared.connection import announce_lost_connection
from app.shared.html import Markup, html
from app.shared.static import read_text
from app.shared.widgets import Reflowing, insert_after, keyboard_callback, one_layout_callback, when_first
from app.store import RunStore, resolve_store_url
from app.upstream import send_updates_queued_during_a_write

TITLE = "Self-attention workbench"

INTRO = """<p>
Rows are querying tokens, columns are the keys they may read. With the <b>Causal mask</b> on, a
token cannot read later tokens: their scores become −∞ <em>before</em> softmax, so each row's
weights still sum to 1. Choose a <b>Failure mode</b> to see what each mistake of Self-attention,
<em>Common failure modes</em>, breaks, save a run in each, and compare them. Scores are divided
by √d_k, the head width: give each token a vector (<b>Head width d_k</b>), or X and the
projections W_Q, W_K, W_V (<b>Input mode</b>), to see why. Click a heat-map row (or set
<b>Row</b>) to see that row's computation step by step.
</p>"""

_HEADER = html("<header><h1 style='margin: 0; font-size: 1.6em; font-weight: normal; color: white;'>"
               "{}</h1></header>", TITLE)
# Named, not __package__: `panel serve app/learner/page.py` runs this file as a script, without a package.
_PACKAGE = "app.learner"
_OPENED_CSS = read_text(_PACKAGE, "page_opened.css")
# Its line on the side it meets the main area: the right beside it, the bottom above it (the
# window is then narrower than the two bases, 399 + 480 px).
_SIDEBAR_CSS = (":host { border-right: 1px solid #dee2e6; } @media (max-width: 878px) { "
                ":host { border-right: none; border-bottom: 1px solid #dee2e6; } }")
# WCAG 1.4.10 (reflow): the sidebar keeps its 399 px beside a main area of at least 480 px; in a
# narrower window (640 px, or 1280 px at 200 % zoom) it goes above the main area, full width.
# 399: the widest input grid still fits, and at 1280 px the main area (taking almost all the
# free width) holds the two widest heat maps side by side.
# min-width 0: a flex item is otherwise never narrower than its widest content.
_SIDEBAR_FLEX = {"flex": "1 1 399px", "min-width": "0"}
_MAIN_FLEX = {"flex": "99999 1 480px", "min-width": "0"}

_MATRIX_MODE = "matrices".__eq__  # a value of LearnerState.input_mode: the layer's inputs (X, W)

DISCONNECTED = ("Connection to the workbench server lost: nothing you do now is saved. "
                "Reload the page, again in a moment if it does not load; your saved runs are kept.")
# The lost-connection notice in the header bar's free right part, two lines high at most: in
# Panel's corner (bottom right) it covered Saved runs' Open links at the page's end. Notyf's
# ripple paints a toast only as wide as it is high, so the wide one gets its own background.
NOTICE_IN_HEADER_CSS = read_text(_PACKAGE, "page_notice_in_header.css")


def opened_html(message: str, ok: bool, edited: bool) -> str:
    """What the page says about a saved run it was asked to open: shown (a note), edited since,
    or why it could not open it (an alert). ``message`` is escaped: it can quote a label or a URL."""
    if not message:
        return ""
    if not ok:
        return html("<div class='opened refused' role='alert'>{}</div>", message)
    kind = "edited" if edited else "shown"
    return html("<div class='opened {}' role='note' data-testid='opened-run'>{}</div>", kind, message)


class LearnerPage(pn.viewable.Viewer):
    """The whole learner page over one state: inputs in the sidebar, the maps and what they
    say in the main area, then the record form and the saved runs."""

    store = param.ClassSelector(class_=RunStore, doc="Where runs are saved.")
    state = param.ClassSelector(class_=LearnerState, doc="This page's one state.")
    map_size = param.Integer(default=300, bounds=(120, None), constant=True,
                             doc="Height of each heat map in pixels (the embed's are smaller).")
    ablations = param.Boolean(default=True, doc=(
        "Whether the projection-ablation panel is made (on the first switch to matrix mode) and "
        "follows each edit: the embed lays it out nowhere, and turns it off."))

    def __init__(self, **params):
        super().__init__(**params)
        self.ablation_panel: AblationPanel | None = None  # made on the first switch to matrix mode
        if self.store is None:
            self.store = RunStore(resolve_store_url())
        if self.state is None:
            self.state = LearnerState(store=self.store)
        s = self.state
        self.inputs = InputsView(state=s)
        self.prediction = PredictionView(state=s)
        self.banner = BannerView(state=s)
        self.matrices = MatricesView(state=s, size=self.map_size)
        self.projections = ProjectionsView(state=s)
        self.row = checked_int_input(s, "row", "Row", s.set_row)
        # The browser's page key, over the websocket: what makes this page's runs its own.
        self.page_key = PageKey(visible=False)
        self.page_key.param.watch(lambda event: s.take_page_key(event.new), "page_key")
        self._row_controls = pn.Row(self.row, pn.pane.HTML(
            "<p>Click a heat-map row, or set Row, for its steps below.</p>", margin=(22, 0, 0, 0)), margin=0)
        # Which batch item's row steps and contributions are shown (each has its own maps): a
        # batch is matrix mode's, so the choice is made the first time the page is in it.
        self.item: pn.widgets.Select | None = None
        when_first(s, "input_mode", self.make_item_select, _MATRIX_MODE)
        self.sidebar = pn.Column(self.inputs, margin=(10, 0), stylesheets=[_SIDEBAR_CSS],
                                 sizing_mode="stretch_width", styles=_SIDEBAR_FLEX)
        self.main = pn.Column(
            self.prediction, self.banner, self.projections, self.matrices,
            self._row_controls, sizing_mode="stretch_width", margin=0, styles=_MAIN_FLEX)
        # Why a typed row was refused, made the first time one is.
        self.row_message: pn.pane.HTML | None = None
        when_first(s, "row_error", self.make_row_message)
        # What the page says about a run it was asked to open (?run=), under the prediction.
        self.opened: pn.pane.HTML | None = None
        when_first(s, "open_message", self.make_opened)
        # A served page is usable once its inputs and maps show: what lies below the maps is made
        # and sent once the browser has drawn them (at once when not served).
        self._below_made = False
        pn.state.onload(self.make_below_maps)

    def make_row_message(self) -> None:
        """Make Row's message (:attr:`row_message`) and put it under Row, once."""
        if self.row_message is None:
            self.row_message = int_message(self.state, "row")
            insert_after(self.main, self._row_controls, self.row_message)

    def make_opened(self) -> None:
        """Make the note on an opened run (:func:`opened_html`; :attr:`opened`) and put it under
        the prediction, once: made when the page is first asked to open a run."""
        if self.opened is not None:
            return
        s = self.state
        self.opened = pn.pane.HTML(
            pn.bind(opened_html, s.param.open_message, s.param.open_ok, s.param.opened_edited),
            visible=pn.bind(bool, s.param.open_message), stylesheets=[_OPENED_CSS],
            margin=(5, 10), sizing_mode="stretch_width")
        insert_after(self.main, self.prediction, self.opened)

    def make_item_select(self) -> None:
        """Make ``Batch item`` (:attr:`item`) and put it before ``Row``, once; it shows only when
        the layer has a batch of more than one item, each in its own maps."""
        if self.item is not None:
            return
        s = self.state
        self.item = pn.widgets.Select.from_param(
            s.param.item, label="Batch item", options=pn.bind(lambda b: list(range(1, b + 1)), s.param.batch_size),
            description=None, width=100, margin=(5, 10),
            visible=pn.bind(lambda layer: layer is not None and layer.B > 1 and not layer.flattened, s.param.layer))
        self._row_controls.insert(0, self.item)

    def make_below_maps(self) -> None:
        """Make the views below the maps (readouts, row steps, contributions, ablations, the
        self-check, the record form and Saved runs) and add them to :attr:`main`, once."""
        if self._below_made:
            return
        self._below_made = True
        s = self.state
        self.steps = RowStepsView(state=s)
        self.contributions = ContributionsView(state=s)
        self.readouts = ReadoutsView(state=s)
        self.record = RecordView(state=s)
        self.self_check = SelfCheckPanel(state=s)
        self.runs = SavedRunsView(state=s)
        # The ablation panel (two figures, a grid and its controls) is made the first time the
        # page is in matrix mode, the only mode it works in, and put before the introduction;
        # until then the introduction's pane starts with its heading and a sentence saying so.
        self.ablation: pn.Column | None = None
        self.intro = pn.pane.HTML(self._intro_html(), margin=(0, 10), sizing_mode="stretch_width")
        s.param.watch(lambda _event: setattr(self.intro, "object", self._intro_html()), "revealed")
        self.main.extend([
            self.readouts, self.steps, self.contributions, self.intro, self.self_check,
            self.record, self.runs])
        when_first(s, "input_mode", self._make_ablation, _MATRIX_MODE)

    def _intro_html(self) -> str:
        # Each part in a box of its own (flow-root), so their paragraphs keep the space between
        # them that two panes had. Ablations change the weights: they wait for a prediction.
        waiting = self.ablation is None and self.state.revealed
        ablation = html("<div style='display: flow-root'>{}<p>{}</p></div>", LEAD, NEEDS_MATRIX_MODE) if waiting else ""
        return html("{}<div style='display: flow-root'>{}</div>", ablation, Markup(INTRO))

    def _make_ablation(self) -> None:
        if not self.ablations or self.ablation_panel is not None:
            return
        # Hidden with the weights until a prediction is written: it waits as long.
        self.ablation_panel = AblationPanel(self.state, on_save=self.state.save_ablation,
                                            active=self._ablation_shown())
        self.ablation = pn.Column(self.ablation_panel, margin=0, sizing_mode="stretch_width",
                                  visible=self.state.param.revealed)
        self.intro.object = self._intro_html()
        insert_after(self.main, self.contributions, self.ablation)
        # The panel's answer is about its own last save: it follows what that save says (a
        # served page's "Saving…", then its answer) and goes once Save run says something else.
        s = self.state
        s.param.watch(lambda *events: self.ablation_panel.param.update(
            save_message=s.save_message if s.save_from_ablation else "", save_ok=s.save_ok,
            save_pending=s.save_pending), ["save_message", "save_ok", "save_pending"])

    @param.depends("state.revealed", "ablations", watch=True)
    def _activate_ablation(self) -> None:
        if self.ablation_panel is not None:
            self.ablation_panel.active = self._ablation_shown()

    def _ablation_shown(self) -> bool:
        return self.ablations and self.state.revealed

    def serve_session(self, notice_in_header: bool = True) -> LearnerPage:
        """Set this browser session up for the page: its disconnect notice (in the header bar,
        unless ``notice_in_header`` is false: a layout without this page's header), its saved
        runs listed from its key (:attr:`page_key`; Save run waits for it) and kept in the URL.
        Returns the page, for ``pn.serve``."""
        send_updates_queued_during_a_write()  # under `panel serve` too: a save is always confirmed
        # A learner whose server went away is told so, instead of clicking Save run into a dead
        # connection and believing the run was saved.
        if notice_in_header:
            announce_lost_connection(DISCONNECTED, STALE_STATUS_JS, position="top-right",
                                     css=NOTICE_IN_HEADER_CSS)
        else:
            announce_lost_connection(DISCONNECTED, STALE_STATUS_JS)
        if pn.state.curdoc is not None:
            self.state.awaiting_key = not self.page_key.page_key
            self._keep_saved_runs_in_url()
            pn.state.curdoc.js_on_event("document_ready", keyboard_callback())
            pn.state.curdoc.js_on_event("document_ready", one_layout_callback())
        args = pn.state.session_args or {}
        if args.get("predict") == [b"first"]:  # the lesson's page: predict before the weights show
            self.state.predict_first = True
        return self

    def _keep_saved_runs_in_url(self) -> None:
        """Keep the ids of the page's Saved runs in its URL (``?runs=id1,id2``): a link that shows
        them to anyone, to read (only the page holding the key they were saved with can explain
        them: :meth:`LearnerState.take_page_key` lists and marks its own, with or without
        ``?runs=``). The ids are only ever looked up in the store."""
        location, args = pn.state.location, pn.state.session_args or {}
        if location is None:
            return
        ids = b",".join(args.get("runs", [])).decode("ascii", "replace")
        run = args["run"][0].decode("utf-8", "replace") if args.get("run") else None  # a link to one run
        if ids or run:  # read in a store thread: a page opening on a slow store holds no other page
            pn.state.execute(partial(self._restore_and_open, [i for i in ids.split(",") if i], run))
        # The latest MAX_RESTORED_RUNS, what a reload takes back from it: the key lists up to
        # PAGE_RUNS, whose ids would make an address past what a proxy takes (nginx: 8 KB).
        self.state.param.watch(lambda event: location.update_query(
            runs=",".join(r.id for r in event.new[-MAX_RESTORED_RUNS:])), "saved")

    async def _restore_and_open(self, run_ids: list[str], run: str | None) -> None:
        await self.state.restore_runs_in_thread(run_ids)
        if run is not None:  # e.g. from the instructor's table
            await self.state.open_run_id_in_thread(run)

    def __panel__(self):
        # No template: Bootstrap's puts the sidebar's content inside a <ul> (axe: a serious
        # violation); a plain header, sidebar and main area read the same.
        header = pn.pane.HTML(_HEADER, sizing_mode="stretch_width", margin=0,
                              styles={"background": "#37474f", "padding": "14px 24px"})
        body = pn.FlexBox(self.sidebar, self.main, flex_wrap="wrap", align_items="flex-start",
                          sizing_mode="stretch_width", margin=0)
        return pn.Column(header, body, self.page_key, sizing_mode="stretch_width", margin=0)


def create_page(store: RunStore | None = None) -> LearnerPage:
    """One session's learner page over ``store`` (default: ``--store``'s default, :func:`resolve_store_url`)."""
    pn.config.design = Reflowing  # this session's: see there
    return LearnerPage(store=store).serve_session()


if pn.state.served:
    # `panel serve app/learner/page.py`: the page over the store `attention-workbench serve` opens
    # by default, one per server process (as there) rather than one per session.
    create_page(pn.state.as_cached("attention-workbench-store", RunStore, url=resolve_store_url())).servable(
        title=TITLE)
