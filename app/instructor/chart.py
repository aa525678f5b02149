"""The class picture: total future-token weight and smallest row sum per run, grouped by title
(mode) or by learner."""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import (
    CategoricalColorMapper,
    ColumnDataSource,
    DataRange1d,
    FixedTicker,
    HoverTool,
    Range1d,
    TapTool,
)
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from app.instructor.columns import created_texts, numbers, texts
from app.instructor.state import InstructorState, mode_order
from app.shared.heatmap import CANVAS_EDGE_CSS
from app.shared.html import Markup, html, join
from app.shared.numbers import format_result
from app.shared.static import read_text

CHART_HEIGHT = 460  # px: the class picture's heading, one row of its two figures, a key of three lines
# The picture draws at most this many runs, the newest passing the filters: a class's runs fit
# many times over, and a store of years of classes is not read and sent whole on every change.
CHART_RUNS = 5_000
FIGURE_WIDTH, FIGURE_MIN_WIDTH = 520, 280  # px
ROOM = 0.05  # below 0 and above the top of each axis: a point at 0 or at 1 is drawn whole, not cut by the frame


_KEY_CSS = read_text(__package__, "chart_key.css")


NO_LEARNER = "(no learner name)"
GROUPINGS = {"Mode": "mode", "Learner": "learner"}


def group_order(groups, by: str) -> list[str]:
    """The groups in the key's order: modes in the lesson's order, learners by name, a run
    without a learner name last."""
    if by == "mode":
        return mode_order(groups)
    names = set(groups)
    return sorted(names - {NO_LEARNER}, key=str.casefold) + ([NO_LEARNER] if NO_LEARNER in names else [])


def mode_key(modes: list[str], counts: dict[str, int], colours: list[str]) -> Markup:
    """The key to the x axis's group numbers: number, colour, name and run count of each group.

    Run titles (and a class's names) are too long to stand side by side under a figure, so the
    axis shows numbers.
    """
    items = join(
        html("<li><span style='color: {}' aria-hidden='true'>●</span> <b>{}</b> {} ({:,} run{})</li>",
             colour, n, mode, counts[mode], "" if counts[mode] == 1 else "s")
        for n, (mode, colour) in enumerate(zip(modes, colours, strict=True), start=1))
    return html("<ol aria-label='Groups of the class picture'>{}</ol>", items)


class ClassChartView(pn.viewable.Viewer):
    """Total future-token weight and smallest row sum per run, grouped by title or learner; tap
    selects.

    One source holds a point per run with just the columns the glyphs, the hover and the tap
    read (numbers as arrays, sent to the browser in binary); the selected runs (at most two) are
    drawn again, larger and outlined, from their own small source, so selecting a run never
    resends every point.
    """

    state = param.ClassSelector(class_=InstructorState)
    group_by = param.Selector(default="mode", objects=GROUPINGS, label="Group points by",
                              doc="Group the runs by their title (mode) or by learner.")

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
        self.key = pn.pane.HTML("", name="class-key", stylesheets=[_KEY_CSS], sizing_mode="stretch_width")
        self.note = pn.pane.HTML("", name="class-note")
        self.source.selected.on_change("indices", self._tapped)
        self._due = False  # an update is scheduled for the next tick
        self.state.param.watch(self._schedule_update, "revision")
        self.param.watch(self._update, "group_by")
        self.state.param.watch(self._relabel, "timezone")
        self.state.param.watch(self._show_selected, "selected_ids")
        self._update()

    def _figure(self, title: str, column: str, name: str) -> figure:
        # As wide as the window allows up to 520 px: side by side at 1280 px, stacked and whole
        # (axis titles inside the canvas) on a narrow screen.
        # Neither a row sum nor a future-token weight is ever negative: both axes show 0 to 1, with
        # ROOM each side (from the data alone, a class of correct runs, all 0 or all 1, read -1 to
        # 1, or "1" alone with every point on it); row sums up to the largest if above 1, weights
        # to the data's top once a run has some (see _update).
        y_range = Range1d(-ROOM, 1 + ROOM) if column == "min_row_sum" else DataRange1d(start=-ROOM, end=1 + ROOM)
        fig = figure(title=title, name=f"{name}-figure", height=300, sizing_mode="stretch_width",
                     min_width=FIGURE_MIN_WIDTH, max_width=FIGURE_WIDTH, tools="", x_range=self.x_range,
                     y_range=y_range,
                     toolbar_location=None, x_axis_label=self._axis_label(),
                     y_axis_label=title.split(" per")[0])
        color = {"field": "group", "transform": self.colors}
        points = fig.scatter("x", column, source=self.source, size=10, fill_color=color,
                             line_color="white", line_width=2, fill_alpha=0.8,
                             nonselection_fill_alpha=0.8, nonselection_line_alpha=1.0)
        fig.scatter("x", column, source=self.chosen, size=16, fill_color=color, line_color="black",
                    line_width=2, fill_alpha=0.8)
        # The hover shows the numbers as the pages print them (app.shared.numbers), not BokehJS's.
        hover = HoverTool(renderers=[points], tooltips=[
            ("learner", "@learner"), ("label", "@label"), ("mode", "@mode"), ("created", "@created"),
            ("total future-token weight", "@future_weight_text"),
            ("smallest row sum", "@min_row_sum_text"),
        ])
        fig.add_tools(TapTool(renderers=[points]), hover)
        fig.xaxis.ticker = self.ticker
        fig.xgrid.grid_line_color = None
        return fig

    def _axis_label(self) -> str:
        return f"{self.group_by} (numbered in the key below)"

    def _group(self, record) -> str:
        return record.title if self.group_by == "mode" else ((record.learner or "").strip() or NO_LEARNER)

    def _data(self, records) -> dict:
        titles = [r.title for r in records]
        groups = [self._group(r) for r in records]
        modes = group_order(groups, self.group_by)
        place = {m: n for n, m in enumerate(modes)}
        seen = dict.fromkeys(modes, 0)
        x = np.empty(len(records))
        for n, mode in enumerate(groups):
            # Spread a group's points evenly (deterministic, unlike a random jitter), the first
            # on its group's number, the next ones alternately around it within ±0.3.
            k = seen[mode]
            seen[mode] += 1
            x[n] = place[mode] + ((k * 0.618034 + 0.5) % 1 - 0.5) * 0.6
        self._modes = modes
        self._x = dict(zip((r.id for r in records), x, strict=True))
        return {
            "id": texts(r.id for r in records), "x": x, "mode": texts(titles), "group": texts(groups),
            "learner": texts(r.learner or "" for r in records),
            "label": texts(r.label or "" for r in records),
            "created": texts(self._created(records)),
            "future_weight": numbers(r.total_future_weight for r in records),
            "min_row_sum": numbers(r.min_row_sum for r in records),
            "future_weight_text": texts(format_result(r.total_future_weight) for r in records),
            "min_row_sum_text": texts(format_result(r.min_row_sum) for r in records),
        }

    def _created(self, records) -> list[str]:
        zone = self.state.timezone if getattr(self, "state", None) else "UTC"
        return created_texts(records, zone, "%Y-%m-%d %H:%M")

    def _chosen(self, records) -> dict:
        return {"x": [self._x[r.id] for r in records], "group": [self._group(r) for r in records],
                "future_weight": numbers(r.total_future_weight for r in records),
                "min_row_sum": numbers(r.min_row_sum for r in records)}

    def _schedule_update(self, *events) -> None:
        """Redraw in the server's next tick (at once without one): the change that moved
        ``revision`` (the table's page and count) reaches the browser first, not after this
        picture's read of up to CHART_RUNS runs and their points; moves in one tick redraw once."""
        if not self._due:
            self._due = True
            pn.state.execute(self._update, schedule=True)

    def _update(self, *events) -> None:
        self._due = False
        runs = self.state.read_or_say(self.state.filtered, newest=CHART_RUNS)  # a point each
        if runs is None:  # the store cannot be read: the picture keeps what it showed
            return
        self._runs = runs
        self._by_id = {r.id: r for r in self._runs}
        data = self._data(self._runs)
        palette = [Category10_10[n % 10] for n in range(len(self._modes))]
        counts = dict.fromkeys(self._modes, 0)
        for group in data["group"]:
            counts[group] += 1
        with pn.io.unlocked():
            self.ticker.ticks = list(range(len(self._modes)))
            for fig in self.figures:
                fig.xaxis.major_label_overrides = {n: str(n + 1) for n in range(len(self._modes))}
                fig.xaxis.axis_label = self._axis_label()
            self.x_range.update(start=-0.6, end=max(len(self._modes), 1) - 0.4)
            self.colors.update(factors=self._modes, palette=palette)
            self.source.data = data
            # The weights' end found from the data (NaN: Bokeh's "not given") once one is above 0.
            self.figures[0].y_range.end = np.nan if np.nanmax(data["future_weight"], initial=0) > 0 else 1 + ROOM
            self.figures[1].y_range.end = np.nanmax(data["min_row_sum"], initial=1.0) + ROOM
            self.key.object = mode_key(self._modes, counts, palette)
            self.note.object = self._note()
        self._show_selected()

    def _note(self) -> Markup | str:
        """What the picture says above its figures: why they are empty, or that they draw only the
        newest :data:`CHART_RUNS` runs; nothing otherwise."""
        matching, total = self.state.matching, self.state.total
        if not self._runs and not total:
            return html("<p data-testid='class-note'><b>No runs yet.</b> Each run a learner saves "
                        "appears here and in the table without a reload.</p>")
        if not self._runs:
            return html("<p data-testid='class-note'><b>No run passes the filters</b> (the store holds "
                        "{:,}): change or clear them to see the class's runs.</p>", total)
        if matching <= len(self._runs):
            return ""
        return html("<p data-testid='class-note'><b>The newest {:,} of the {:,} runs the filters keep are "
                    "drawn.</b> Filter by date, learner or mode to see others; the table and the "
                    "exports hold them all.</p>", len(self._runs), matching)

    def _relabel(self, *events) -> None:
        """Only the hover's local times change with the browser's zone: send just that column."""
        with pn.io.unlocked():
            self.source.data.update(created=texts(self._created(self._runs)))

    def _show_selected(self, *events) -> None:
        chosen = [self._by_id[i] for i in self.state.selected_ids if i in self._by_id]
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
                         "mode or by learner. Click a point to select that run for comparison.</p>"),
            pn.widgets.RadioButtonGroup.from_param(self.param.group_by),
            self.note,
            # The pane sets its figure's stylesheets: CANVAS_EDGE_CSS given to the figure is dropped.
            pn.FlexBox(*(pn.pane.Bokeh(f, sizing_mode="stretch_width", min_width=FIGURE_MIN_WIDTH,
                                       max_width=FIGURE_WIDTH, stylesheets=[CANVAS_EDGE_CSS])
                         for f in self.figures)),
            self.key,
            sizing_mode="stretch_width",
        )
