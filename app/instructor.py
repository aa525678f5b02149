"""The instructor page (``/instructor``): every learner's runs, the class picture, compare, export.

One :class:`InstructorState` per browser session holds the store's listing, the filters and the
selection; the views only read it and write the parameters their widgets stand for. The listing
is of :class:`~attention_core.summaries.RunSummary` objects (no matrices): the page needs full
records only to compare two runs and to export JSON, and reads just those. New runs appear
without a reload: a periodic callback per session re-lists the store, which costs a directory
scan and a ``stat`` per file, because the server's one :class:`RunStore` caches summaries by stat
for every session. The table sends the browser one page at a time; the chart sends one point per
run with only what its glyphs and hover read. Learner text (learner, label, prediction, explanation, notes)
reaches the page only as Tabulator ``plaintext`` cells, ``html.escape``d HTML, or Bokeh hover
fields (which Bokeh escapes); exports write it exactly as saved (the CSV neutralises formulas).

Left out: editing or deleting runs (the store is append-only), charts beyond the two summaries.
"""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
import panel as pn
import param
from bokeh.models import (
    CategoricalColorMapper,
    ColumnDataSource,
    CustomJSHover,
    FixedTicker,
    HoverTool,
    Range1d,
    TapTool,
)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from app.shared.compare import ComparisonView, mode_title
from app.shared.widgets import like_the_first_paint
from attention_core.records import ExperimentRecord, RecordError
from attention_core.store import RunStore, export_csv, export_json
from attention_core.summaries import RunSummary

ALL_MODES = "All modes"
REFRESH_MS = 2000
SHORT_TEXT = 40  # characters of prediction / explanation shown in a table cell
PAGE_SIZE = 20
CHART_HEIGHT = 390  # px: the class picture's heading and one row of its two figures
# The lesson's contrast first: the correct run, then the broken one, then the rest.
_MODE_ORDER = ("correct, causal", "mask after softmax (broken)", "correct, no causal mask")
_TEXT_COLUMNS = ("created (local)", "created (UTC)", "learner", "label", "mode", "failed checks",
                 "prediction", "explanation", "id")
COLUMNS = ["id", "created (local)", "created (UTC)", "learner", "label", "causal",
           "mask after softmax", "mode", "tokens", "total future-token weight", "smallest row sum",
           "failed checks", "prediction", "explanation"]


def shorten(text: str | None, limit: int = SHORT_TEXT) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis; ``""`` for None."""
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def mode_order(titles) -> list[str]:
    """Mode titles in the lesson's order, the rest alphabetically."""
    titles = set(titles)
    return [t for t in _MODE_ORDER if t in titles] + sorted(titles - set(_MODE_ORDER))


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


class InstructorState(param.Parameterized):
    """One instructor session: the store's runs, the filters, the filtered runs, the selection."""

    store = param.ClassSelector(class_=RunStore, doc="The server's run store (shared, cached).")
    records = param.List(default=[], doc="Every readable run's summary, oldest first.")
    problems = param.List(default=[], doc="(file name, reason) for every file skipped.")
    learner = param.String(default="", doc="Keep runs whose learner contains this (any case).")
    label = param.String(default="", doc="Keep runs whose label contains this (any case).")
    mode = param.Selector(default=ALL_MODES, objects=[ALL_MODES], doc="Keep runs of this mode.")
    start = param.CalendarDate(default=None, allow_None=True, doc="First day kept (local date).")
    end = param.CalendarDate(default=None, allow_None=True, doc="Last day kept (local date).")
    timezone = param.String(default="UTC", doc="IANA zone of the instructor's browser.")
    filtered = param.List(default=[], doc="The runs passing every filter, oldest first.")
    selected_ids = param.List(default=[], item_type=str,
                              doc="Selected run ids, at most two, oldest selection first.")

    def __init__(self, **params):
        super().__init__(**params)
        self.refresh()

    def refresh(self) -> None:
        """Re-list the store; change ``records``/``problems`` only if the listing changed."""
        listing = self.store.list_summaries()
        same = len(listing.records) == len(self.records) and all(
            a is b for a, b in zip(listing.records, self.records, strict=True))
        if not same:
            modes = mode_order({mode_title(r) for r in listing.records})
            self.param.mode.objects = [ALL_MODES, *modes]
            if self.mode not in self.param.mode.objects:
                self.mode = ALL_MODES
            self.records = listing.records
        if listing.problems != self.problems:
            self.problems = listing.problems

    def local_time(self, record: RunSummary | ExperimentRecord) -> datetime:
        return record.created_datetime.astimezone(_zone(self.timezone))

    @param.depends("records", "learner", "label", "mode", "start", "end", "timezone",
                   watch=True, on_init=True)
    def _filter(self) -> None:
        learner, label = self.learner.strip().casefold(), self.label.strip().casefold()
        # Parameters read once, not per run: each read goes through param's descriptors.
        mode, start, end, zone = self.mode, self.start, self.end, _zone(self.timezone)
        kept = []
        for r in self.records:
            if learner and learner not in (r.learner or "").casefold():
                continue
            if label and label not in (r.label or "").casefold():
                continue
            if mode != ALL_MODES and mode_title(r) != mode:
                continue
            if start is not None or end is not None:
                day = r.created_datetime.astimezone(zone).date()
                if (start and day < start) or (end and day > end):
                    continue
            kept.append(r)
        # Unchanged runs (a refresh with nothing new, a zone change without date filters): keep
        # the list, so the table and the chart are not rebuilt.
        same = len(kept) == len(self.filtered) and all(
            a is b for a, b in zip(kept, self.filtered, strict=True))
        if not same:
            self.filtered = kept

    def select(self, run_id: str) -> None:
        """Add a run to the selection; a third selection drops the oldest."""
        if run_id in self.selected_ids:
            return
        self.selected_ids = [*self.selected_ids, run_id][-2:]

    @property
    def compared(self) -> list[ExperimentRecord]:
        """The selected runs still in the store, in full, in selection order."""
        listed = {r.id for r in self.records}
        compared = []
        for run_id in self.selected_ids:
            if run_id in listed:
                try:
                    compared.append(self.store.get(run_id))  # cached by stat in the store
                except (KeyError, RecordError):
                    pass  # gone or damaged since the listing: the next refresh reports it
        return compared

    def export(self, fmt: str) -> str:
        """The filtered runs as a JSON bundle (with the store's problems) or as CSV."""
        if fmt == "json":
            full = self.store.read_records(r.id for r in self.filtered)
            return export_json(full.records, [*self.problems, *full.problems])
        return export_csv(self.filtered)


def created_texts(records, timezone: str, fmt: str = "%Y-%m-%d %H:%M:%S") -> list[str]:
    """Each run's ``created_at`` in ``timezone`` formatted with ``fmt``, all at once.

    Vectorised with pandas (a per-run ``astimezone`` and ``strftime`` took ~60 ms of a 10,000-run
    page); times already in UTC shown in UTC are cut from the ISO text itself.
    """
    if not records:
        return []
    stamps = [r.created_at for r in records]
    if _zone(timezone).key in ("UTC", "Etc/UTC") and fmt in _ISO_CUTS and all(
            s.endswith("+00:00") for s in stamps):
        return [f"{s[:10]} {s[11:_ISO_CUTS[fmt]]}" for s in stamps]
    utc = pd.to_datetime(stamps, format="ISO8601", utc=True)
    return list(utc.tz_convert(_zone(timezone)).strftime(fmt))


_ISO_CUTS = {"%Y-%m-%d %H:%M:%S": 19, "%Y-%m-%d %H:%M": 16}  # fmt: end of its ISO 8601 slice


def _numbers(values) -> np.ndarray:
    """Floats with NaN for a summary that was not finite (``None`` in the record)."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _texts(values) -> np.ndarray:
    """Strings as a numpy unicode array: Bokeh serialises it with one ``tolist`` and its model
    walks skip it, where a list of 10,000 strings is visited item by item on every walk."""
    return np.array(list(values), dtype=str)


def runs_frame(records: list[RunSummary], state: InstructorState) -> pd.DataFrame:
    """The table's rows, newest first; free text shortened (full text in the row's details)."""
    rows = records[::-1]
    columns = {
        "id": [r.id for r in rows],
        "created (local)": created_texts(rows, state.timezone),
        "created (UTC)": created_texts(rows, "UTC"),
        "learner": [r.learner or "" for r in rows], "label": [r.label or "" for r in rows],
        "causal": [r.causal for r in rows],
        "mask after softmax": [r.mask_after_softmax for r in rows],
        "mode": [mode_title(r) for r in rows], "tokens": [r.T for r in rows],
        "total future-token weight": _numbers(r.total_future_weight for r in rows),
        "smallest row sum": _numbers(r.min_row_sum for r in rows),
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


def run_details(record: ExperimentRecord) -> str:
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
        self.mode = pn.widgets.Select.from_param(s.param.mode, name="Mode", width=230)
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
    """The filtered runs in a paginated, sortable Tabulator; ticking a row selects the run."""

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        self._ids: list[str] = []
        self._replacing = False
        self.table = pn.widgets.Tabulator(
            runs_frame([], self.state), name="Runs of the class", show_index=False,
            selectable="checkbox", disabled=True, hidden_columns=["id"], pagination="remote",
            page_size=PAGE_SIZE, sizing_mode="stretch_width", layout="fit_data_table",
            formatters={
                **{c: {"type": "plaintext"} for c in _TEXT_COLUMNS},
                "causal": {"type": "tickCross"}, "mask after softmax": {"type": "tickCross"},
            },
            row_content=self._details, embed_content=False,
        )
        self.count = pn.pane.HTML("", name="runs-count")
        self.state.param.watch(self._update, ["filtered", "timezone"])
        self.state.param.watch(self._sync_selection, "selected_ids")
        self.table.param.watch(self._selected, "selection")
        self._update()

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
        self.count.object = (f"<p><b data-testid='runs-shown'>{len(s.filtered)}</b> of "
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
        return pn.Column(self.count, self.table, sizing_mode="stretch_width")


# Hover text of a summary number: "not finite" where the run had none (NaN in the source).
_NUMBER_HOVER = "return isNaN(value) ? 'not finite' : String(Number(value.toPrecision(4)));"


class ClassChartView(pn.viewable.Viewer):
    """Total future-token weight and smallest row sum per run, grouped by mode; tap selects.

    One source holds a point per run with just the columns the glyphs, the hover and the tap
    read (numbers as arrays, sent to the browser in binary); the selected runs (at most two) are
    drawn again, larger and outlined, from their own small source, so selecting a run never
    resends every point.
    """

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        self.source = ColumnDataSource(self._data([]), name="class-source")
        self.chosen = ColumnDataSource(self._chosen([]), name="class-selected-source")
        self.colors = CategoricalColorMapper(factors=[], palette=[])
        self.ticker = FixedTicker(ticks=[])
        # One fixed x range for both figures (a DataRange1d would ignore start/end set later).
        self.x_range = Range1d(-0.6, 0.6)
        self.figures = [
            self._figure("Total future-token weight per run", "future_weight", "class-future"),
            self._figure("Smallest row sum per run", "min_row_sum", "class-row-sum"),
        ]
        self.source.selected.on_change("indices", self._tapped)
        self.state.param.watch(self._update, "filtered")
        self.state.param.watch(self._relabel, "timezone")
        self.state.param.watch(self._show_selected, "selected_ids")
        self._update()

    def _figure(self, title: str, column: str, name: str) -> figure:
        fig = figure(title=title, name=f"{name}-figure", height=300, width=520, tools="", x_range=self.x_range,
                     toolbar_location=None, x_axis_label="mode", y_axis_label=title.split(" per")[0])
        color = {"field": "mode", "transform": self.colors}
        points = fig.scatter("x", column, source=self.source, size=10, fill_color=color,
                             line_color="white", line_width=2, fill_alpha=0.8,
                             nonselection_fill_alpha=0.8, nonselection_line_alpha=1.0)
        fig.scatter("x", column, source=self.chosen, size=16, fill_color=color, line_color="black",
                    line_width=2, fill_alpha=0.8)
        number = CustomJSHover(code=_NUMBER_HOVER)
        hover = HoverTool(renderers=[points], tooltips=[
            ("learner", "@learner"), ("label", "@label"), ("mode", "@mode"), ("created", "@created"),
            ("total future-token weight", "@future_weight{custom}"),
            ("smallest row sum", "@min_row_sum{custom}"),
        ], formatters={"@future_weight": number, "@min_row_sum": number})
        fig.add_tools(TapTool(renderers=[points]), hover)
        fig.xaxis.ticker = self.ticker
        fig.xaxis.major_label_orientation = 0.35
        fig.xgrid.grid_line_color = None
        return fig

    def _data(self, records) -> dict:
        titles = [mode_title(r) for r in records]
        modes = mode_order(titles)
        place = {m: n for n, m in enumerate(modes)}
        seen = dict.fromkeys(modes, 0)
        x = np.empty(len(records))
        for n, mode in enumerate(titles):
            # Spread a group's points evenly (deterministic, unlike a random jitter).
            k = seen[mode]
            seen[mode] += 1
            x[n] = place[mode] + ((k * 0.618034) % 1 - 0.5) * 0.6
        self._modes = modes
        self._x = dict(zip((r.id for r in records), x, strict=True))
        return {
            "id": _texts(r.id for r in records), "x": x, "mode": _texts(titles),
            "learner": _texts(r.learner or "" for r in records),
            "label": _texts(r.label or "" for r in records),
            "created": _texts(self._created(records)),
            "future_weight": _numbers(r.total_future_weight for r in records),
            "min_row_sum": _numbers(r.min_row_sum for r in records),
        }

    def _created(self, records) -> list[str]:
        zone = self.state.timezone if getattr(self, "state", None) else "UTC"
        return created_texts(records, zone, "%Y-%m-%d %H:%M")

    def _chosen(self, records) -> dict:
        return {"x": [self._x[r.id] for r in records], "mode": [mode_title(r) for r in records],
                "future_weight": _numbers(r.total_future_weight for r in records),
                "min_row_sum": _numbers(r.min_row_sum for r in records)}

    def _update(self, *events) -> None:
        data = self._data(self.state.filtered)
        with pn.io.unlocked():
            self.ticker.ticks = list(range(len(self._modes)))
            for fig in self.figures:
                fig.xaxis.major_label_overrides = {n: m for n, m in enumerate(self._modes)}
            self.x_range.update(start=-0.6, end=max(len(self._modes), 1) - 0.4)
            self.colors.update(factors=self._modes,
                               palette=[Category10_10[n % 10] for n in range(len(self._modes))])
            self.source.data = data
        self._show_selected()

    def _relabel(self, *events) -> None:
        """Only the hover's local times change with the browser's zone: send just that column."""
        with pn.io.unlocked():
            self.source.data.update(created=_texts(self._created(self.state.filtered)))

    def _show_selected(self, *events) -> None:
        shown = {r.id: r for r in self.state.filtered}
        chosen = [shown[i] for i in self.state.selected_ids if i in shown]
        with pn.io.unlocked():
            self.chosen.data = self._chosen(chosen)

    def _tapped(self, attr, old, new) -> None:
        if not new:
            return
        ids = self.source.data["id"]
        for n in new:
            if n < len(ids):
                self.state.select(ids[n])
        # Clear Bokeh's own selection so tapping the same point again is a new event; the chosen
        # runs are drawn larger with a black outline instead.
        self.source.selected.indices = []

    def __panel__(self):
        return pn.Column(
            pn.pane.HTML("<h3>Class picture</h3><p>One point per run shown in the table, grouped by "
                         "mode. Click a point to select that run for comparison.</p>"),
            pn.FlexBox(*(pn.pane.Bokeh(f) for f in self.figures)),
        )


class ExportView(pn.viewable.Viewer):
    """Download the filtered runs as a JSON bundle or CSV; fresh content on every click."""

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        self.json = pn.widgets.FileDownload(
            callback=lambda: self._download("json"), filename="class-runs.json",
            label="Export JSON", embed=False, button_type="primary")
        self.csv = pn.widgets.FileDownload(
            callback=lambda: self._download("csv"), filename="class-runs.csv",
            label="Export CSV", embed=False, button_type="primary")

    def _download(self, fmt: str) -> io.StringIO:
        self.state.refresh()  # runs saved since the last tick are in the file too
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        widget = self.json if fmt == "json" else self.csv
        widget.filename = f"class-runs-{stamp}.{fmt}"
        return io.StringIO(self.state.export(fmt))

    def __panel__(self):
        return pn.Row(self.json, self.csv, pn.pane.HTML(
            "<p>Exports hold the runs the filters keep, text exactly as saved.</p>"))


class ProblemsView(pn.viewable.Viewer):
    """Files in the store that were skipped, and why (never fatal)."""

    state = param.ClassSelector(class_=InstructorState)

    def __init__(self, **params):
        super().__init__(**params)
        self.pane = pn.pane.Alert("", alert_type="warning", visible=False, name="store-problems",
                                  sizing_mode="stretch_width")
        self.state.param.watch(self._update, "problems")
        self._update()

    def _update(self, *events) -> None:
        problems = self.state.problems
        shown = problems[:50]
        items = "".join(f"<li><code>{html.escape(name)}</code>: {html.escape(reason)}</li>"
                        for name, reason in shown)
        more = f"<li>… and {len(problems) - len(shown)} more</li>" if len(problems) > len(shown) else ""
        # An Alert renders Markdown; raw HTML blocks pass through, and every piece is escaped.
        self.pane.object = (f"<div><b>{len(problems)} file(s) in the runs directory were skipped</b>"
                            f"<ul>{items}{more}</ul></div>")
        self.pane.visible = bool(problems)

    def __panel__(self):
        return self.pane


INTRO = (
    "<p>Every run your learners saved, newest first. New runs appear within a few seconds. Tick "
    "two runs (or click two points in the class picture) to compare them; ticking a third "
    "replaces the oldest.</p>")


def create_instructor(store: RunStore) -> pn.template.BootstrapTemplate:
    """Build one session's instructor page over the server's ``store``.

    The first paint carries the filters, the run count and the table; the class picture (two
    figures, some 60 Bokeh models and a point per run), the exports and the comparison are built
    once the browser has drawn it (``pn.state.onload``; at once without a browser session).
    """
    state = InstructorState(store=store)
    template = pn.template.BootstrapTemplate(
        title="Self-attention workbench · Instructor", header_background="#37474f",
        busy_indicator=None,  # process-wide flag: see app.workbench.create_workbench
    )
    # The class picture's space (heading and one row of figures) is kept, so the table does not
    # jump down when it arrives; what follows the table needs none.
    chart = pn.Column(sizing_mode="stretch_width", min_height=CHART_HEIGHT)
    below = pn.Column(sizing_mode="stretch_width")
    template.main.append(pn.Column(
        pn.pane.HTML(INTRO),
        ProblemsView(state=state),
        FiltersView(state=state),
        chart,
        pn.pane.HTML("<h3>Runs</h3>"),
        RunsTableView(state=state),
        below,
        sizing_mode="stretch_width",
    ))

    def _rest():
        with like_the_first_paint():
            chart.append(ClassChartView(state=state))
            below.objects = [ExportView(state=state), *_comparison(state)]
    pn.state.onload(_rest)
    _follow_browser_timezone(state)
    callback = pn.state.add_periodic_callback(state.refresh, period=REFRESH_MS)
    if pn.state.curdoc is not None:
        pn.state.curdoc.on_session_destroyed(lambda context: callback.stop())
    template.state = state  # for tests without a browser
    return template


def _comparison(state: InstructorState) -> tuple[pn.pane.HTML, ComparisonView]:
    """The comparison of the selected runs, and a hint while fewer than two are selected."""
    compare = ComparisonView()
    state.param.watch(lambda e: compare.show(state.compared), ["selected_ids", "records"])
    hint = pn.pane.HTML("", name="compare-hint")

    def _hint(*events):
        n = len(state.compared)
        hint.object = ("" if n == 2 else
                       f"<h3>Comparison</h3><p>Select {2 - n} more run{'s' if 2 - n > 1 else ''} to compare "
                       "(tick it in the table or click its point).</p>")
    state.param.watch(_hint, ["selected_ids", "records"])
    _hint()
    compare.show(state.compared)  # runs may have been selected before the page was complete
    return hint, compare


def _follow_browser_timezone(state: InstructorState) -> None:
    info = pn.state.browser_info
    if info is None:
        return

    def _set(*events):
        if info.timezone:
            state.timezone = info.timezone
    info.param.watch(_set, "timezone")
    _set()


__all__ = ["ALL_MODES", "InstructorState", "create_instructor", "created_texts", "mode_order", "run_details",
           "runs_frame", "shorten"]
