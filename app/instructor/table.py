"""The filters and the runs table: one row per filtered run, newest first, a page at a time.

Learner text reaches the table only as Tabulator ``textarea`` cells (escaped text that wraps),
and its expanded row and each row's "Open run" link (to ``/?run=<id>``) only as ``html.escape``d
HTML.
"""

from __future__ import annotations

import html
from urllib.parse import quote

import pandas as pd
import panel as pn
import param
from bokeh.models.widgets.tables import NumberFormatter

from app.instructor.columns import created_texts, numbers, shorten
from app.instructor.state import ALL_MODES, InstructorState
from app.store import RunSummary
from attention_core.records import ExperimentRecord

PAGE_SIZE = 20
_TEXT_COLUMNS = ("created (local)", "created (UTC)", "learner", "label", "mode", "failed checks",
                 "prediction", "explanation", "id")
COLUMNS = ["id", "open", "created (local)", "created (UTC)", "learner", "label", "causal",
           "mask after softmax", "mode", "tokens", "d_k", "d_model", "total future-token weight",
           "smallest row sum", "failed checks", "prediction", "explanation"]
# The columns an instructor can show (all but the hidden id), and those shown at first: they fit a
# 1280 px window without sideways scrolling or a cut cell; the rest (UTC time, causal and mask
# after softmax, which the mode's title says, d_model) are a tick away in "Columns shown".
CHOOSABLE = COLUMNS[1:]
SHOWN = ["open", "created (local)", "learner", "label", "mode", "tokens", "d_k",
         "total future-token weight", "smallest row sum", "failed checks", "prediction", "explanation"]
# Each column's share of the table's width in per cent when the columns first shown are shown:
# each fits its header and its cells at 1280 px. Another choice of columns scales them to fit.
_SHARES = {"open": 6, "created (local)": 8, "created (UTC)": 8, "learner": 7, "label": 6, "causal": 6,
           "mask after softmax": 7, "mode": 9, "tokens": 7, "d_k": 5, "d_model": 7,
           "total future-token weight": 7, "smallest row sum": 8, "failed checks": 10, "prediction": 9,
           "explanation": 10}
# Per cent of the table's width for these columns: the rest is the expand and tick columns (40 px
# each), Tabulator's cell borders, and its 1 px filler column, which a wider table pushed out of
# sight behind a sideways scroll bar.
_CONTENT_SHARE = 92


def column_widths(shown: list[str]) -> dict[str, str]:
    """Tabulator widths of the ``shown`` columns, so the table fits the page at any choice.

    Whole per cents (Tabulator reads a width with ``parseInt``, so "5.8%" would be 5 %) in
    :data:`_SHARES`' proportions, together :data:`_CONTENT_SHARE` (largest remainders round up).
    """
    total = sum(_SHARES[c] for c in shown) or 1
    exact = {c: _CONTENT_SHARE * _SHARES[c] / total for c in shown}
    whole = {c: int(x) for c, x in exact.items()}
    left = _CONTENT_SHARE - sum(whole.values()) if shown else 0
    for c in sorted(shown, key=lambda c: whole[c] - exact[c])[:left]:
        whole[c] += 1
    return {c: f"{w}%" for c, w in whole.items()}


def open_link(record: RunSummary | ExperimentRecord) -> str:
    """A link that opens the run in the learner's workbench (``/?run=<id>``, the id URL-encoded),
    named "Open run <id>" (and its label) for a screen reader; every text escaped."""
    label = f" “{record.label}”" if record.label else ""
    name = html.escape(f"Open run {record.id}{label} in the workbench", quote=True)
    href = html.escape(f"/?run={quote(record.id, safe='')}", quote=True)
    return f'<a href="{href}" target="_blank" rel="noopener" aria-label="{name}">Open run</a>'


def runs_frame(records: list[RunSummary], state: InstructorState) -> pd.DataFrame:
    """The table's rows, newest first; free text shortened (full text in the row's details)."""
    rows = records[::-1]
    columns = {
        "id": [r.id for r in rows],
        "open": [open_link(r) for r in rows],
        "created (local)": created_texts(rows, state.timezone),
        "created (UTC)": created_texts(rows, "UTC"),
        "learner": [r.learner or "" for r in rows], "label": [r.label or "" for r in rows],
        "causal": [r.causal for r in rows],
        "mask after softmax": [r.mask_after_softmax for r in rows],
        "mode": [r.title for r in rows], "tokens": [r.T for r in rows], "d_k": [r.d_k for r in rows],
        # NaN (shown as "-") unless the run was projected from X (matrix mode).
        "d_model": numbers(r.d_model for r in rows),
        "total future-token weight": numbers(r.total_future_weight for r in rows),
        "smallest row sum": numbers(r.min_row_sum for r in rows),
        "failed checks": [", ".join(r.failed_checks) or "none" for r in rows],
        "prediction": [shorten(r.prediction) for r in rows],
        "explanation": [shorten(r.explanation) for r in rows],
    }
    return pd.DataFrame(columns, columns=COLUMNS)


# The expanded row sits inside a Tabulator row whose hover style sets white text: set our own
# colours, or the text vanishes on a white background while the pointer is over it.
_DETAILS_CSS = """
:host, :host(:hover) { color: #212529 !important; background: #ffffff; }
dl { margin: 4px 12px; color: #212529; } dd { unicode-bidi: isolate; } dt { font-weight: bold; margin-top: 4px; }
dd { margin: 0 0 0 12px; white-space: pre-wrap; overflow-wrap: anywhere; max-width: 900px; }
"""


# "Open run" wraps in a narrow column instead of being cut to "Open…" (Tabulator's cells do not
# wrap); with many columns shown a long word breaks rather than being cut; a ticked row's link is
# white on its blue (the browser's link blue on it has a contrast of 1.8).
_TABLE_CSS = """
:host .tabulator { font-size: 13px; }
.tabulator-row .tabulator-cell[tabulator-field="open"] { white-space: normal; }
.tabulator-col-title { font-size: 12px; }
.tabulator-col-title, .tabulator-cell { overflow-wrap: anywhere; }
.tabulator-row.tabulator-selected a { color: #ffffff; }
"""
# Run in the browser once the page is ready: two fixes of third-party markup that axe-core rates
# critical, applied whenever the widget (re)draws (each one's shadow root is watched; Tabulator
# builds its table after the document is ready and rebuilds rows and pager as it pages).
# - Tabulator's root has role="grid" but holds its focusable scroll box (.tabulator-tableholder,
#   tabindex=0) and its pager's buttons as direct children, where a grid may only own rows and row
#   groups (aria-required-children; tabulator-tables/tabulator#4151). The scroll box becomes the
#   body's row group (the row group inside it presentational), the pager a row with one cell, and
#   an opened row's details (Panel's row_content) a cell of its row.
# - Bokeh's date pickers show the field flatpickr adds (altInput), which their <label for> does
#   not name (label): it gets the label's text as its aria-label.
# Nothing moves and nothing else changes.
PAGE_ARIA_JS = """
const set = (el, name, value) => { if (el && el.getAttribute(name) !== value) el.setAttribute(name, value) }
const fixGrid = (grid) => {
  const holder = grid.querySelector(':scope > .tabulator-tableholder')
  set(holder, 'role', 'rowgroup')
  set(holder && holder.querySelector(':scope > .tabulator-table'), 'role', 'none')
  const footer = grid.querySelector(':scope > .tabulator-footer')
  set(footer, 'role', 'row')
  set(footer && footer.querySelector(':scope > .tabulator-footer-contents'), 'role', 'gridcell')
  for (const details of grid.querySelectorAll('.tabulator-row > :not(.tabulator-cell)'))
    set(details, 'role', 'gridcell')
}
const fixPicker = (home) => {
  const label = home.querySelector('label')
  for (const field of home.querySelectorAll('input.form-control:not([type=hidden])'))
    if (label) set(field, 'aria-label', label.textContent.trim())
}
const fixes = {
  'bk-panel-models-tabulator-DataTabulator': (home) => home.querySelectorAll('.tabulator[role=grid]').forEach(fixGrid),
  'bk-DateRangePicker': fixPicker,
}
const watch = (home, fix) => {
  new MutationObserver(() => fix(home)).observe(home, {childList: true, subtree: true})
  fix(home)
}
const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) {
      for (const [cls, fix] of Object.entries(fixes)) if (el.classList.contains(cls)) watch(el.shadowRoot, fix)
      walk(el.shadowRoot)
    }
  }
}
walk(document)
"""
_COUNT_CSS = ".stale { background: #eceff1; color: #37474f; padding: 8px 12px; border-radius: 4px; }"


def run_details(record: ExperimentRecord | RunSummary) -> str:
    """A run's free text in full, escaped, for the table's expanded row."""
    items = "".join(
        f"<dt>{field}</dt><dd>{html.escape(getattr(record, field) or '—')}</dd>"
        for field in ("learner", "label", "prediction", "explanation", "notes"))
    return f"<dl aria-label='Full text of run {html.escape(record.id)}'>{items}</dl>"


class FiltersView(pn.viewable.Viewer):
    """Learner, label, mode and date-range filters."""

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.learner = pn.widgets.TextInput.from_param(s.param.learner, name="Learner contains",
                                                       width=180)
        self.label = pn.widgets.TextInput.from_param(s.param.label, name="Label contains", width=180)
        self.mode = pn.widgets.Select.from_param(s.param.mode, name="Mode", width=330)
        # Bokeh's picker (Panel's DatetimeRangePicker drops a range of one day); its typed field
        # is named by PAGE_ARIA_JS.
        self.dates = pn.widgets.DateRangePicker(name="Created between (local dates)", width=230)
        self.dates.param.watch(self._set_dates, "value")
        self.clear = pn.widgets.Button(name="Clear filters", button_type="light", margin=(27, 10, 10, 10))
        self.clear.on_click(self._clear)

    def _set_dates(self, event) -> None:
        start, end = event.new if event.new else (None, None)
        self.state.param.update(start=start, end=end)

    def _clear(self, event) -> None:
        self.dates.value = None
        self.state.param.update(learner="", label="", mode=ALL_MODES, start=None, end=None)

    def __panel__(self):
        return pn.FlexBox(self.learner, self.label, self.mode, self.dates, self.clear)


class RunsTableView(pn.viewable.Viewer):
    """The filtered runs in a paginated, sortable Tabulator; ticking a row selects the run.

    Which columns it shows is the instructor's choice (``shown``, the "Columns shown" boxes); the
    shown ones share the table's width, so it fits the page whatever is chosen.
    """

    state = param.ClassSelector(class_=InstructorState)
    shown = param.ListSelector(default=SHOWN, objects=CHOOSABLE, doc="The columns the table shows.")

    def __init__(self, **params):
        super().__init__(**params)
        self._ids: list[str] = []
        self._replacing = False
        self.table = pn.widgets.Tabulator(
            runs_frame([], self.state), name="Runs of the class", show_index=False,
            selectable="checkbox", disabled=True, hidden_columns=self._hidden(), pagination="remote",
            page_size=PAGE_SIZE, sizing_mode="stretch_width", layout="fit_columns",
            widths=column_widths(self._in_order()),
            formatters={
                # "textarea" is Tabulator's plain text (HTML-escaped) that wraps within the column.
                **{c: {"type": "textarea"} for c in _TEXT_COLUMNS},
                "causal": {"type": "tickCross"}, "mask after softmax": {"type": "tickCross"},
                "open": {"type": "html"},  # open_link's HTML, built from escaped text
                # A whole number, "-" when the run was not in matrix mode (NaN in the frame).
                "d_model": NumberFormatter(format="0", text_align="right"),
            },
            configuration={"columnDefaults": {"headerWordWrap": True}},
            stylesheets=[_TABLE_CSS],
            row_content=self._details, embed_content=False,
        )
        self.count = pn.pane.HTML("", name="runs-count", stylesheets=[_COUNT_CSS])
        self.columns = pn.widgets.CheckBoxGroup.from_param(
            self.param.shown, name="Columns shown", inline=True, sizing_mode="stretch_width",
            stylesheets=[".bk-input-group { flex-wrap: wrap; column-gap: 4px; }"])
        self.chooser = pn.Card(self.columns, title="Columns shown", collapsed=True, sizing_mode="stretch_width",
                               margin=(5, 10))
        self.state.param.watch(self._update, ["filtered", "timezone"])
        self.state.param.watch(self._sync_selection, "selected_ids")
        self.table.param.watch(self._selected, "selection")
        self._update()

    def _in_order(self) -> list[str]:
        """The shown columns in the table's order (the boxes give them in the order ticked)."""
        return [c for c in CHOOSABLE if c in self.shown]

    def _hidden(self) -> list[str]:
        return ["id", *(c for c in CHOOSABLE if c not in self.shown)]

    @param.depends("shown", watch=True)
    def _show_columns(self) -> None:
        self.table.param.update(hidden_columns=self._hidden(), widths=column_widths(self._in_order()))

    def _details(self, row: pd.Series):
        record = next((r for r in self.state.records if r.id == row["id"]), None)
        text = run_details(record) if record else "<p>This run is no longer in the store.</p>"
        return pn.pane.HTML(text, stylesheets=[_DETAILS_CSS], sizing_mode="stretch_width")

    def _update(self, *events) -> None:
        s = self.state
        self._ids = [r.id for r in reversed(s.filtered)]
        self._replacing = True  # Tabulator resets its selection with new rows: not the user's doing
        try:
            self.table.value = runs_frame(s.filtered, s)
        finally:
            self._replacing = False
        self.count.object = (f"<p class='runs-count' data-testid='runs-count'>"
                             f"<b data-testid='runs-shown'>{len(s.filtered)}</b> of "
                             f"<span data-testid='runs-total'>{len(s.records)}</span> runs shown. "
                             f"Times are in {html.escape(s.timezone)}; exports keep UTC.</p>")
        self._sync_selection()

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
        # Runs selected but filtered out of the table stay selected.
        kept = [i for i in self.state.selected_ids if i in ticked or i not in shown]
        for run_id in ticked:
            if run_id not in kept:
                kept.append(run_id)
        self.state.selected_ids = kept[-2:]
        self._sync_selection()

    def __panel__(self):
        return pn.Column(self.count, self.chooser, self.table, sizing_mode="stretch_width")
