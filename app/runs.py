"""Recording runs: the lesson's checkpoints and Save run, this session's saved runs, downloads.

Learner text is only ever shown escaped or in plain-text table cells.
"""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime

import panel as pn
import param
from bokeh.models import (
    Button,
    ColumnDataSource,
    DataTable,
    Div,
    HTMLTemplateFormatter,
    StringEditor,
    TableColumn,
    TextAreaInput,
    TextInput,
)
from bokeh.models import Column as BokehColumn
from bokeh.models import Row as BokehRow

from app.shared.compare import ComparisonView, mode_title
from app.shared.heatmap import format_number
from app.shared.widgets import in_one_patch, like_the_first_paint
from app.state import WorkbenchState
from attention_core.store import export_csv, export_json

_STATUS_CSS = """
.status { padding: 8px 12px; border-radius: 4px; unicode-bidi: isolate; }
.ok { background: #e6f4ea; color: #1b5e20; } .error { background: #fdecea; color: #b00020; }
"""


class SaveView(pn.viewable.Viewer):
    """The lesson's checkpoints (prediction, explanation), optional learner/label, and Save run.

    Plain Bokeh widgets (the models Panel's widgets wrap) in one Bokeh layout, ``model``, which
    the workbench places in its page's one Bokeh layout: a Panel widget or pane costs the server
    some 25 KiB per open page, a Bokeh model a third of that.
    """

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.prediction = self._text(
            TextAreaInput, "prediction", "Prediction", height=80, width=620, max_length=None,
            placeholder="Can token 2 attend to token 3, and what will post-softmax masking "
                        "change?")
        # No max_length on these fields (Bokeh's text area has 500 by default): the browser would
        # cut pasted text silently. Too long is refused on Save run with a message naming the
        # field and its limit (TEXT_LIMITS).
        self.learner = self._text(TextInput, "learner", "Learner", width=300,
                                  placeholder="optional, up to 100 characters")
        self.label = self._text(TextInput, "label", "Label", width=300,
                                placeholder="optional, up to 100 characters")
        self.explanation = self._text(
            TextAreaInput, "explanation", "Explanation", height=80, width=620, max_length=None,
            placeholder="What invariant did your evidence reveal, and how did the broken mode "
                        "violate it?")
        self.button = Button(label="Save run", button_type="primary", margin=(5, 10, 5, 10))
        self.button.on_click(in_one_patch(lambda: s.save_run()))
        # Built with the page, hidden: added on the first save, it made Bokeh walk every model
        # of the page again (Document.models.recompute, ~25 ms), in the save's own callback.
        self.message = Div(text="", stylesheets=[_STATUS_CSS], margin=(5, 10, 5, 10),
                           visible=False)
        self._form = BokehColumn(children=[
            Div(text="<h3>Record your run</h3>", margin=(5, 10, 5, 10)),
            self.prediction, BokehRow(children=[self.learner, self.label]), self.button,
            self.message, self.explanation,
        ])
        self.model = self._form
        s.param.watch(self._update, ["save_message", "save_ok", "input_ok", "tokens_error"])
        self._update()

    def _text(self, kind, field: str, title: str, **params):
        """A text field writing the state's ``field`` (its value arrives when the field is left)."""
        w = kind(title=title, value=getattr(self.state, field), margin=(5, 10, 5, 10), **params)
        w.on_change("value", in_one_patch(lambda _attr, _old, new: setattr(self.state, field, new)))
        return w

    def _update(self, *events):
        s = self.state
        # Bare Bokeh models changed from a Panel callback need Panel's unlocked() to reach the
        # browser, as in app.shared.heatmap.
        with pn.io.unlocked():
            self.button.disabled = not s.input_ok or bool(s.tokens_error)
            if not s.save_message and not self.message.visible:
                return
            # Escaped text only: the message can quote the learner's label.
            kind = "ok" if s.save_ok else "error"
            self.message.text = (f'<div class="status {kind}" role="status">'
                                 f"{html.escape(s.save_message)}</div>")
            self.message.visible = bool(s.save_message)

    def __panel__(self):
        return pn.pane.Bokeh(self.model, margin=0)


def runs_columns(records) -> dict[str, list[str]]:
    """This session's saved runs as table columns: one list of display text per column of
    ``RUN_COLUMNS``, one entry per experiment record (run 1 first). Numbers are shown as the
    readouts show them; a missing future-token weight or row sum shows as "—"."""

    def number(x):
        return "—" if x is None else format_number(x)

    return {
        "run": [str(n) for n in range(1, len(records) + 1)],
        "id": [r.id for r in records],
        "saved (UTC)": [r.created_at[11:19] for r in records],
        "label": [r.label or "" for r in records],
        "learner": [r.learner or "" for r in records],
        "mode": [mode_title(r) for r in records],
        "future-token weight": [number(r.total_future_weight) for r in records],
        "smallest row sum": [number(r.min_row_sum) for r in records],
        "failed checks": [", ".join(r.failed_checks) or "none" for r in records],
    }


# The columns shown, in order, with their relative widths (the table fits the page width). The
# run id is in the data (for tests and the page's own code) but not shown.
RUN_COLUMNS = {"run": 35, "saved (UTC)": 85, "label": 140, "learner": 100, "mode": 215,
               "future-token weight": 145, "smallest row sum": 130, "failed checks": 120}
_ROW_HEIGHT = 28  # px; the table is as tall as its rows, so every row is drawn (see RunsView)


def _plain_text_with_tooltip() -> HTMLTemplateFormatter:
    """A cell formatter showing the text escaped, and all of it on hover when the cell cuts it
    off. ``<%- %>`` is the template's escaping form (&, <, >, quotes), so learner text is only
    ever text, in the cell and in its ``title``."""
    return HTMLTemplateFormatter(template='<span title="<%- value %>"><%- value %></span>')


class RunsView(pn.viewable.Viewer):
    """This session's saved runs, downloads of them, and a side-by-side comparison of two."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        # Built with the first saved run, as most pages are looked at before anything is saved.
        # A plain Bokeh DataTable rather than Panel's Tabulator: building a Tabulator cost the
        # server ~90 ms of CPU on each page's first save and pandas (~0.7 s to import), which
        # stalled every other page in a classroom's burst of first saves (bench/classroom.py).
        self.table: DataTable | None = None
        self.download_json = pn.widgets.FileDownload(
            callback=lambda: self._download("json"), filename="attention-runs.json",
            label="Download my runs (JSON)", embed=False)
        self.download_csv = pn.widgets.FileDownload(
            callback=lambda: self._download("csv"), filename="attention-runs.csv",
            label="Download my runs (CSV)", embed=False)
        # Built on the first comparison: most pages never compare, and every pane is memory the
        # server keeps for each open page.
        self.compare: ComparisonView | None = None
        # The heading and (from the first save) the table: one Bokeh layout in one Panel pane.
        self.heading = Div(text="", margin=(5, 10))
        self._top = BokehColumn(children=[self.heading], sizing_mode="stretch_width")
        self._layout = pn.Column(pn.pane.Bokeh(self._top, sizing_mode="stretch_width", margin=0),
                                 pn.Row(self.download_json, self.download_csv))
        self.state.param.watch(self._update_table, "saved")
        self._update_table()
        self._show_hint([])

    def _show_hint(self, ticked: list[int]) -> None:
        """Say what is compared: ``ticked`` are the ticked rows' indices, in run order."""
        if len(ticked) < 2:
            hint = "<p>Tick two saved runs to compare them side by side.</p>"
        else:
            a, b = ticked[0] + 1, ticked[1] + 1
            hint = f"<p>Comparing run {a} (A) with run {b} (B).</p>"
            if len(ticked) > 2:
                hint = (f"<p>{len(ticked)} runs are ticked; only two can be compared, so this "
                        f"compares the first two: run {a} (A) with run {b} (B). Untick runs to "
                        "compare another pair.</p>")
        with pn.io.unlocked():  # a bare Bokeh model, changed from a Panel callback
            self.heading.text = f"<h3>Saved runs</h3>{hint}"

    def _update_table(self, *events):
        has_runs = bool(self.state.saved)
        if self.table is None and has_runs:
            source = ColumnDataSource(runs_columns(self.state.saved), name="saved-runs-source")
            # One formatter and one (unused: not editable) editor for every column, instead of
            # a new pair of models per column by default: fewer models to build and send.
            formatter, editor = _plain_text_with_tooltip(), StringEditor()
            self.table = DataTable(
                source=source, name="saved-runs", selectable="checkbox", editable=False,
                index_position=None, sortable=False, reorderable=False, row_height=_ROW_HEIGHT,
                autosize_mode="force_fit", sizing_mode="stretch_width",
                # Not sortable, table or columns: a column's own default drew a sort arrow on a
                # click that sorted nothing.
                columns=[TableColumn(field=c, title=c, width=w, formatter=formatter, editor=editor,
                                     sortable=False)
                         for c, w in RUN_COLUMNS.items()],
                height=self._height(), margin=(5, 10, 5, 10))
            source.selected.on_change("indices", in_one_patch(self._update_compare))
            with pn.io.unlocked():
                self._top.children.append(self.table)
        elif self.table is not None:
            with pn.io.unlocked():
                self.table.source.data = runs_columns(self.state.saved)
                self.table.height = self._height()
        self.download_json.disabled = self.download_csv.disabled = not has_runs

    def _height(self) -> int:
        """The table's height in px: its header and every saved run's row.

        The table grows with the session's runs so the grid draws every row: with a fixed
        height, its virtual rendering left rows below the fold out of the page."""
        return _ROW_HEIGHT * (len(self.state.saved) + 1) + 4

    def _update_compare(self, _attr, _old, indices):
        """Compares the first two ticked runs (by run number) once two are ticked."""
        ticked = sorted(i for i in indices if i < len(self.state.saved))
        chosen = [self.state.saved[i] for i in ticked[:2]]
        if self.compare is None:
            if len(chosen) < 2:
                return
            with like_the_first_paint():
                self.compare = ComparisonView()
            self._layout.append(self.compare)
        self.compare.show(chosen)
        self._show_hint(ticked)

    def _download(self, fmt: str) -> io.StringIO:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        records = list(self.state.saved)
        if fmt == "json":
            self.download_json.filename = f"attention-runs-{stamp}.json"
            return io.StringIO(export_json(records, []))
        self.download_csv.filename = f"attention-runs-{stamp}.csv"
        return io.StringIO(export_csv(records))

    def __panel__(self):
        return self._layout
