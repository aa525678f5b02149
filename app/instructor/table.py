"""The filters and the runs table: one row per filtered run, sorted by a chosen column, a page at a time.

The table holds one page (:data:`~app.instructor.state.PAGE_SIZE` runs); the page, the sort and
the count are the state's store query, so paging or sorting 100,000 runs reads 20 of them. Learner
text reaches the table only as Tabulator ``textarea`` cells (escaped text that wraps), and the
ticked runs' full text and each row's "Open run" link (to ``./?run=<id>``) only as HTML built
with :func:`app.shared.html.html`, which escapes it.
"""

from __future__ import annotations

from urllib.parse import quote

import pandas as pd
import panel as pn
import param

from app.instructor.columns import created_texts, shorten
from app.instructor.state import ALL_MODES, PAGE_SIZE, InstructorState
from app.shared.compare import failed_checks_text
from app.shared.html import Markup, html, join
from app.shared.numbers import format_result
from app.shared.static import read_text
from app.shared.widgets import NO_SPIN_BUTTONS
from app.store import RunFilter, RunSummary
from attention_core.records import ExperimentRecord

_TEXT_COLUMNS = ("created (local)", "created (UTC)", "learner", "label", "mode", "failed checks",
                 "prediction", "explanation", "id")
_NUMBER_COLUMNS = ("tokens", "d_k", "d_model", "total future-token weight", "smallest row sum")
COLUMNS = ["id", "open", "created (local)", "created (UTC)", "learner", "label", "causal",
           "mask after softmax", "mode", "tokens", "d_k", "d_model", "total future-token weight",
           "smallest row sum", "failed checks", "prediction", "explanation"]
# The columns an instructor can show (all but the hidden id), and those shown at first: they fit a
# 1280 px window without sideways scrolling or a cut cell; the rest (UTC time, causal and mask
# after softmax, which the mode's title says, d_model) are a tick away in "Columns shown".
CHOOSABLE = COLUMNS[1:]
SHOWN = ["open", "created (local)", "learner", "label", "mode", "tokens", "d_k",
         "total future-token weight", "smallest row sum", "failed checks", "prediction", "explanation"]
def open_link(record: RunSummary | ExperimentRecord) -> str:
    """A link that opens the run in the learner's workbench (``./?run=<id>``, the id URL-encoded),
    named "Open run <id>" (and its label) for a screen reader; every text escaped. Relative to
    the instructor page, so it also holds under ``serve --prefix``."""
    label = f" “{record.label}”" if record.label else ""
    # Plain str: it is a cell of the table's DataFrame, which Bokeh serialises.
    return str(html('<a href="{}" target="_blank" rel="noopener" aria-label="{}">Open run</a>',
                    f"./?run={quote(record.id, safe='')}", f"Open run {record.id}{label} in the workbench"))


def runs_frame(rows: list[RunSummary], state: InstructorState) -> pd.DataFrame:
    """The table's rows, in the order given; free text shortened (full text under the table).

    Numbers and failed checks are the text the learner's Saved runs table shows
    (:func:`~app.shared.numbers.format_result`, check titles), built here for the first fill
    and every refresh alike: Tabulator sorts nothing (the store does), so it needs no numbers.
    """
    columns = {
        "id": [r.id for r in rows],
        "open": [open_link(r) for r in rows],
        "created (local)": created_texts(rows, state.timezone),
        "created (UTC)": created_texts(rows, "UTC"),
        "learner": [r.learner or "" for r in rows], "label": [r.label or "" for r in rows],
        "causal": [r.causal for r in rows],
        "mask after softmax": [r.mask_after_softmax for r in rows],
        "mode": [r.title for r in rows], "tokens": [str(r.T) for r in rows],
        "d_k": [str(r.d_k) for r in rows],
        # "—" unless the run was projected from X (matrix mode).
        "d_model": ["—" if r.d_model is None else str(r.d_model) for r in rows],
        "total future-token weight": [format_result(r.total_future_weight) for r in rows],
        "smallest row sum": [format_result(r.min_row_sum) for r in rows],
        "failed checks": [failed_checks_text(r) for r in rows],
        "prediction": [shorten(r.prediction) for r in rows],
        "explanation": [shorten(r.explanation) for r in rows],
    }
    # Dtypes set, not inferred: a page opened on an empty store would get float columns, whose
    # number formatters Tabulator keeps when the first runs arrive (3.0 for 3 tokens).
    return pd.DataFrame(columns, columns=COLUMNS).astype(
        {c: bool if c in ("causal", "mask after softmax") else str for c in COLUMNS})


_DETAILS_CSS = read_text(__package__, "table_details.css")
_CLEAR_JS = """
for (const field of [learner, label]) { field.value_input = ""; field.value = "" }
mode.value = all_modes
dates.value = null
"""


# "Open run" wraps in a narrow column instead of being cut to "Open…" (Tabulator's cells do not
# wrap); with many columns shown a long word breaks rather than being cut; a ticked row's link is
# white on its blue (the browser's link blue on it has a contrast of 1.8); Panel's 1 px filler
# column is as wide in the rows as in the header (the Bootstrap theme's cell padding, which beats
# Panel's own rule for it, made rows 9 px wider than the table).
_TABLE_CSS = read_text(__package__, "table.css")
# Run in the browser once the page is ready: three fixes of third-party markup that axe-core rates
# critical, applied whenever the widget (re)draws (each one's shadow root is watched; Tabulator
# builds its table after the document is ready and rebuilds its rows with every page).
# - Tabulator's root has role="grid" but holds its focusable scroll box (.tabulator-tableholder,
#   tabindex=0) as a direct child, where a grid may only own rows and row groups
#   (aria-required-children; tabulator-tables/tabulator#4151). The scroll box becomes the body's
#   row group (the row group inside it presentational).
# - Bokeh's date pickers show the field flatpickr adds (altInput), which their <label for> does
#   not name (label): it gets the label's text as its aria-label.
# - Every row's tick box is named "Select Row" by Tabulator: each gets its run's learner, mode
#   and time ("Select run: Ada, No mask, 2025-01-31 10:32:00").
# Nothing moves and nothing else changes.
PAGE_ARIA_JS = read_text(__package__, "page_aria.js")
# Run in the browser once the page is ready. Two table updates in quick succession (an upload of
# several files, a filter typed while runs arrive) sometimes left Panel's Tabulator showing the
# first one's rows while its data held the second's (a browser test reproduced it 2 runs in 3):
# after each change of the table's data, once it has settled (and twice more, later), rows and
# data are compared (count, ids and rows drawn) and the rows redrawn from the data if they differ
# (CI once saw 3 rows drawn for 15 s over 1 row of data after a filter); a table still being built
# (whose view takes no data then) is looked at again, a bounded number of times. Nothing happens
# while they agree.
TABLE_RESYNC_JS = read_text(__package__, "table_resync.js")
_COUNT_CSS = read_text(__package__, "table_count.css")
_COLUMNS_CSS = read_text(__package__, "table_columns.css")


def run_details(record: ExperimentRecord | RunSummary) -> Markup:
    """A run's free text in full, escaped, for the ticked runs' details under the table."""
    items = join(html("<dt>{}</dt><dd>{}</dd>", field, getattr(record, field) or "—")
                 for field in ("learner", "label", "prediction", "explanation", "notes"))
    return html("<h4>Run {id} · {title}</h4><dl aria-label='Full text of run {id}'>{items}</dl>",
                id=record.id, title=record.title, items=items)


class FiltersView(pn.viewable.Viewer):
    """Learner, label, mode and date-range filters."""

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # A text filter applies on Enter (or leaving the field), one store query per filter, not
        # per key: the placeholder says so (a newcomer typed and waited).
        self.learner = pn.widgets.TextInput.from_param(s.param.learner, label="Learner contains",
                                                       placeholder="type, then Enter", width=180)
        self.label = pn.widgets.TextInput.from_param(s.param.label, label="Label contains",
                                                     placeholder="type, then Enter", width=180)
        self.mode = pn.widgets.Select.from_param(s.param.mode, label="Mode", width=330)
        # Bokeh's picker (Panel's DatetimeRangePicker drops a range of one day); its typed field
        # is named by PAGE_ARIA_JS.
        self.dates = pn.widgets.DateRangePicker(label="Created between (local dates)", width=230)
        self.dates.param.watch(self._set_dates, "value")
        # Cleared in the browser, each field sending its new value as if typed: cleared by the
        # server, its answer could arrive after the instructor had typed the next filter, and
        # wipe it from the field (a browser test saw it under load).
        self.clear = pn.widgets.Button(label="Clear filters", color="light", margin=(27, 10, 10, 10))
        self.clear.js_on_click(args={"learner": self.learner, "label": self.label, "mode": self.mode,
                                     "dates": self.dates, "all_modes": ALL_MODES}, code=_CLEAR_JS)

    def _set_dates(self, event) -> None:
        start, end = event.new if event.new else (None, None)
        self.state.param.update(start=start, end=end)

    def __panel__(self):
        return pn.FlexBox(self.learner, self.label, self.mode, self.dates, self.clear)


# Words for each direction of a sort, by what the column holds (the sort's direction buttons).
_ORDER_WORDS = {"created": ("Newest first", "Oldest first"), "text": ("Z to A", "A to Z"),
                "number": ("Largest first", "Smallest first")}
_TEXT_SORTS = ("learner", "label", "mode", "failed checks")


def order_options(sort_by: str) -> dict[str, bool]:
    """The direction buttons' labels for sorting by ``sort_by`` (a key of ``SORTS``), each to
    whether it sorts descending."""
    kind = "created" if sort_by == "created" else "text" if sort_by in _TEXT_SORTS else "number"
    first, second = _ORDER_WORDS[kind]
    return {first: True, second: False}


class PagerView(pn.viewable.Viewer):
    """Sort by a column, in either direction, and move through the table's pages.

    Each control writes one state parameter (``sort_by``, ``descending``, ``page``); the state
    reads that page from the store.
    """

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.sort_by = pn.widgets.Select.from_param(s.param.sort_by, width=230)
        self.order = pn.widgets.RadioButtonGroup(
            label="Order", options=order_options(s.sort_by), value=s.descending, color="light",
            variant="outline", align="end", margin=(5, 10, 12, 10))
        self.order.param.watch(lambda e: setattr(s, "descending", e.new), "value")
        self.first = pn.widgets.Button(label="« First", description="First page")
        self.previous = pn.widgets.Button(label="‹ Previous", description="Previous page")
        self.next = pn.widgets.Button(label="Next ›", description="Next page")
        self.last = pn.widgets.Button(label="Last »", description="Last page")
        for button, to in ((self.first, lambda: 1), (self.previous, lambda: s.page - 1),
                           (self.next, lambda: s.page + 1), (self.last, lambda: s.pages)):
            button.param.update(button_type="light", align="end", margin=(5, 4, 12, 4))
            button.on_click(lambda event, to=to: setattr(s, "page", min(max(to(), 1), s.pages)))
        # No bounds on the field (the browser would keep an out-of-range number without sending
        # it): a number past either end goes to that end.
        self.page = pn.widgets.IntInput(label="Page", value=s.page, width=90, stylesheets=[NO_SPIN_BUTTONS])
        self.page.param.watch(self._typed, "value")
        self.where = pn.pane.HTML("", name="runs-page", align="end", margin=(5, 10, 14, 4))
        s.param.watch(self._update, ["page", "matching", "total"])
        s.param.watch(self._sorted_by, "sort_by")
        s.param.watch(lambda e: setattr(self.order, "value", e.new), "descending")
        self._update()

    def _typed(self, event) -> None:
        s = self.state
        s.page = min(max(event.new or 1, 1), s.pages)
        self.page.value = s.page

    def _sorted_by(self, event) -> None:
        options = order_options(event.new)
        self.order.options = options
        self.order.value = self.state.descending

    def _update(self, *events) -> None:
        s = self.state
        self.page.value = s.page
        first = (s.page - 1) * PAGE_SIZE + 1
        last = min(s.page * PAGE_SIZE, s.matching)
        shown = (f"runs {first:,}–{last:,} of {s.matching:,}" if s.matching else
                 "no run passes the filters" if s.total else "no runs yet")
        self.where.object = html("<span data-testid='runs-page'>of {:,} ({})</span>", s.pages, shown)
        self.first.disabled = self.previous.disabled = s.page <= 1
        self.next.disabled = self.last.disabled = s.page >= s.pages

    def __panel__(self):
        return pn.FlexBox(self.sort_by, self.order, self.first, self.previous, self.page, self.where,
                          self.next, self.last, align_items="flex-end")


class RunsTableView(pn.viewable.Viewer):
    """The table's page of runs in a Tabulator; ticking a row selects the run, and the ticked
    runs' full text shows under it.

    Which columns it shows is the instructor's choice (``shown``, the "Columns shown" boxes); the
    shown ones share the table's width, so it fits the page whatever is chosen. Sorting and paging
    are the :class:`PagerView`'s (a store query), so Tabulator's own header sorting is off.
    """

    state = param.ClassSelector(class_=InstructorState)
    shown = param.ListSelector(default=SHOWN, objects=CHOOSABLE, doc="The columns the table shows.")

    def __init__(self, **params):
        super().__init__(**params)
        self._ids: list[str] = []
        self._replacing = False
        self.table = pn.widgets.Tabulator(
            runs_frame([], self.state), label="Runs of the class", show_index=False,
            selectable="checkbox", disabled=True, hidden_columns=self._hidden(), sortable=False,
            sizing_mode="stretch_width", layout="fit_columns",
            formatters={
                # "textarea" is Tabulator's plain text (HTML-escaped) that wraps within the column.
                **{c: {"type": "textarea"} for c in _TEXT_COLUMNS},
                "causal": {"type": "tickCross"}, "mask after softmax": {"type": "tickCross"},
                "open": {"type": "html"},  # open_link's HTML, built from escaped text
            },
            # Numbers come as text (runs_frame), right-aligned as numbers are.
            text_align=dict.fromkeys(_NUMBER_COLUMNS, "right"),
            header_align=dict.fromkeys(_NUMBER_COLUMNS, "right"),  # over their numbers
            # No widths: the shown columns share the width equally (fitColumns) and their text
            # wraps, so choosing columns changes only which are hidden. A change of widths
            # rebuilds Tabulator in the browser, and a second change arriving mid-build threw.
            # Each column at least as wide as its longest header word, so no word is cut on a
            # narrow screen: the table scrolls sideways in its own box instead (its tick boxes
            # frozen), as WCAG's reflow allows a data table.
            # Tabulator's virtual renderer (its default) rebuilds every row whenever the table
            # scrolls back into view, and a click on an Open run link or a tick box landing then is
            # lost; a page holds 20 rows, so the basic renderer (all rows, drawn once) costs nothing.
            configuration={"columnDefaults": {"headerWordWrap": True, "minWidth": 90}, "renderVertical": "basic"},
            stylesheets=[_TABLE_CSS],
        )
        self.pager = PagerView(state=self.state)
        self.count = pn.pane.HTML("", name="runs-count", stylesheets=[_COUNT_CSS])
        self.details = pn.pane.HTML("", name="run-details", stylesheets=[_DETAILS_CSS],
                                    sizing_mode="stretch_width")
        self.columns = pn.widgets.CheckBoxGroup.from_param(
            self.param.shown, label="Columns shown", inline=True, sizing_mode="stretch_width",
            stylesheets=[_COLUMNS_CSS])
        self.chooser = pn.Card(self.columns, title="Columns shown", collapsed=True, sizing_mode="stretch_width",
                               margin=(5, 10))
        self.state.param.watch(self._update, ["page_runs", "timezone"])
        self.state.param.watch(self._count, ["matching", "total", "timezone", "store_problem"])
        self.state.param.watch(self._sync_selection, "selected_ids")
        self.state.param.watch(self._show_details, ["selected_ids", "changes"])
        self.table.param.watch(self._selected, "selection")
        self._update()
        self._count()
        self._show_details()

    def _hidden(self) -> list[str]:
        return ["id", *(c for c in CHOOSABLE if c not in self.shown)]

    @param.depends("shown", watch=True)
    def _show_columns(self) -> None:
        self.table.hidden_columns = self._hidden()

    def _update(self, *events) -> None:
        s = self.state
        self._ids = [r.id for r in s.page_runs]
        self._replacing = True  # Tabulator resets its selection with new rows: not the user's doing
        try:
            self.table.value = runs_frame(s.page_runs, s)
        finally:
            self._replacing = False
        self._sync_selection()

    def _count(self, *events) -> None:
        s = self.state
        self.count.object = html("<p class='runs-count' data-testid='runs-count'>"
                                 "<b data-testid='runs-shown'>{:,}</b> of "
                                 "<span data-testid='runs-total'>{:,}</span> runs shown. "
                                 "Times are in {}; exports keep UTC.</p>", s.matching, s.total, s.timezone)
        if s.store_problem:
            self.count.object += html("<p role='alert' data-testid='store-problem'>{}</p>", s.store_problem)

    def _show_details(self, *events) -> None:
        """The ticked runs' free text in full (read from the store: a run may be on another page)."""
        ids = self.state.selected_ids
        read = self.state.read_or_say(self.state.store.query, RunFilter(ids=ids)) if ids else None
        if ids and read is None:  # the store cannot be read: the details keep what they showed
            return
        found = {r.id: r for r in read.runs} if ids else {}
        runs = [found[i] for i in ids if i in found]
        self.details.object = ("" if not runs else
                               html("<h3>Full text of the ticked runs</h3>{}", join(map(run_details, runs))))

    def _sync_selection(self, *events) -> None:
        where = {run_id: n for n, run_id in enumerate(self._ids)}
        wanted = [where[i] for i in self.state.selected_ids if i in where]
        if sorted(self.table.selection) != sorted(wanted):
            self.table.selection = wanted

    def _selected(self, event) -> None:
        if self._replacing:
            return
        ticked = [self._ids[n] for n in event.new if n < len(self._ids)]
        shown = set(self._ids)
        # Runs selected but not on this page (another page, or filtered out) stay selected.
        kept = [i for i in self.state.selected_ids if i in ticked or i not in shown]
        for run_id in ticked:
            if run_id not in kept:
                kept.append(run_id)
        self.state.selected_ids = kept[-2:]
        self._sync_selection()

    def __panel__(self):
        return pn.Column(self.count, self.pager, self.chooser, self.table, self.details,
                         sizing_mode="stretch_width")
