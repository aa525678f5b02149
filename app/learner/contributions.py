"""Contributions of the chosen row: each source's score, weight, value and contribution A_ij·v_j.

Self-Attention in Matrix Form, "Keep Four Quantities Separate": a large score need not give a
large weight, and a large weight need not give a large contribution. For row ``state.row`` the view shows the four
side by side per source (key) ``j``: a table with every number, and four small Bokeh bar charts
(score, weight, value, contribution) that share one source axis, so a learner sees where the
three rankings differ. Vector values show one bar per component, grouped by source.

Every number is the core's (``result.scores``, ``weights``, ``mixed``, ``contributions``,
``output``); nothing is recomputed here. Left out: the row's step-by-step arithmetic
(:mod:`.steps`) and choosing the row (the page's ``Row`` control, a heat-map click).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import (
    ColumnDataSource,
    DataRange1d,
    FixedTicker,
    LabelSet,
    Legend,
    LegendItem,
    Range1d,
)
from bokeh.models import Row as BokehRow
from bokeh.plotting import figure

from app.learner.state import LearnerState
from app.shared.compare import TABLE_CSS
from app.shared.heatmap import CANVAS_EDGE_CSS
from app.shared.html import Markup, each, html, join
from app.shared.numbers import format_number
from app.shared.static import read_text
from app.shared.widgets import WRAPPING_ROW_CSS, replace_data
from attention_core import AttentionResult

# One dark colour per quantity (each at least 3:1 against white), grey for a masked score.
SCORE_COLOR, WEIGHT_COLOR, VALUE_COLOR, CONTRIBUTION_COLOR = "#6a3d9a", "#0072B2", "#a6540a", "#00795a"
MASKED_COLOR = "#bdbdbd"
# One per value component: the colour-blind-safe Okabe–Ito hues, darkened where pale on white.
COMPONENT_COLORS = ("#0072B2", "#D55E00", "#00795a", "#882255")
BAR_WIDTH = 0.6  # of a source's slot; vector components share it
WEIGHT_RANGE = (0.0, 1.15)  # weights live in [0, 1]: a fixed scale, with room for labels
_LABELLED_BARS = 12  # beyond this many bars a chart's number labels overlap: the table has them
# Where labels go, in pixels: a chart's plot area (its legend, shown for vector values, takes
# LEGEND_PX of the width), and a 10 px label's height and width per character (digits' widest).
PLOT_PX, LEGEND_PX, LABEL_HEIGHT_PX, LABEL_CHAR_PX = (345, 120), 63, 12, 6.4
_CSS = read_text(__package__, "contributions.css")



def vector_text(x) -> str:
    """A scalar as "17.31", a vector as "[0.592, −1.279]"."""
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if np.ndim(x) == 0:
        return format_number(a[0])
    return "[" + ", ".join(format_number(v) for v in a) + "]"


def _masked_before_softmax(r: AttentionResult, i: int) -> np.ndarray:
    """Sources row ``i`` never showed softmax (−∞ in its input), bool (T,)."""
    return np.isneginf(r.masked_scores[i])


def _zeroed_after_softmax(r: AttentionResult, i: int) -> np.ndarray:
    """Sources whose weight the broken mode zeroed after softmax, bool (T,)."""
    return ~r.allowed[i] if r.mode.mask == "after" else np.zeros(r.T_k, dtype=bool)


def _largest(a: np.ndarray, among: np.ndarray | None = None) -> int | None:
    """Index of the largest finite entry of ``a`` (among ``among``), or None."""
    ok = np.isfinite(a) & (True if among is None else among)
    return int(np.argmax(np.where(ok, a, -np.inf))) if ok.any() else None


def lesson_html(r: AttentionResult, i: int) -> Markup:
    """Which source has the largest score, weight and contribution in row ``i`` (from 0): the
    lesson of "Keep Four Quantities Separate", said with this row's numbers."""
    masked = _masked_before_softmax(r, i)
    score_j = _largest(r.scores[i])
    weight_j = _largest(r.weights[i])
    contribution = r.contributions[i]  # [T] or [T, d]
    size = np.abs(contribution) if contribution.ndim == 1 else np.linalg.norm(contribution, axis=-1)
    contribution_j = _largest(size)

    def key(j: int | None) -> str:
        return "none" if j is None else f"key {j + 1}"

    why = ""
    if score_j is not None and masked[score_j]:
        why = " (masked, so softmax never saw it)"
    elif score_j is not None and _zeroed_after_softmax(r, i)[score_j]:
        why = " (its weight zeroed after softmax)"
    size_word = "size" if contribution.ndim == 1 else "length"
    return html("<p class='contributions-lead' data-testid='contributions-lesson'>Largest score: "
                "<b>{}</b>{} · largest weight: <b>{}</b> · largest contribution ({}): <b>{}</b>.</p>",
                key(score_j), why, key(weight_j), size_word, key(contribution_j))


def contributions_html(r: AttentionResult | None, row: int) -> Markup:
    """The heading, what the view shows, and the table of row ``row`` (from 1), escaped."""
    if r is None:
        return Markup("<h3>Contributions</h3><p>No valid input yet.</p>")
    i = min(max(row, 1), r.T) - 1
    head = html("<h3>Contributions to row {n}</h3>"
                "<p class='contributions-lead'>Output h<sub>{n}</sub> = Σ<sub>j</sub> "
                "A<sub>{n}j</sub> v<sub>j</sub>: each source (key) j adds its value v<sub>j</sub> "
                "times its weight A<sub>{n}j</sub>. A large score need not give a large weight, and "
                "a large weight need not give a large contribution (Self-Attention in Matrix Form, "
                "<em>Keep Four Quantities Separate</em>).</p>", n=i + 1)
    if r.contributions is None:
        return head + Markup("<p class='notice' data-testid='contributions-need-values'>Contributions "
                             "need values: tick “Use values (adds output and contributions)”. The "
                             "scores and weights of this row are below.</p>") + _table(r, i)
    note = Markup("")
    if r.mode.mix == "keys":
        note = html("<p class='notice' data-testid='contributions-mixed-keys'>Keys mixed instead of "
                    "values: the weights mixed the keys k<sub>j</sub>, not the values, so each "
                    "“contribution” below is A<sub>{}j</sub> k<sub>j</sub> and the output carries "
                    "the keys' information. The values were never used.</p>", i + 1)
    return head + note + lesson_html(r, i) + _table(r, i)


def _table(r: AttentionResult, i: int) -> Markup:
    n = i + 1
    masked, zeroed = _masked_before_softmax(r, i), _zeroed_after_softmax(r, i)
    keys_mixed = r.mode.mix == "keys"
    cols = [html("score S<sub>{}j</sub>", n), html("weight A<sub>{}j</sub>", n)]
    if r.contributions is not None:
        cols += [Markup("key k<sub>j</sub> (mixed instead of the value)" if keys_mixed else "value v<sub>j</sub>"),
                 html("contribution A<sub>{}j</sub> {}<sub>j</sub>", n, "k" if keys_mixed else "v")]
    head = Markup("<th scope='col'>source (key) j</th>") + join(html("<th scope='col'>{}</th>", c) for c in cols)
    rows = []
    for j in range(r.T_k):
        score = format_number(r.scores[i, j])
        if masked[j]:
            score += " masked (−∞ before softmax)"
        weight = format_number(r.weights[i, j]) + (" zeroed after softmax" if zeroed[j] else "")
        cells = [score, weight]
        if r.contributions is not None:
            cells += [vector_text(r.mixed[j]), vector_text(r.contributions[i, j])]
        rows.append(html("<tr><th scope='row'>key {}</th>{}</tr>", j + 1,
                         each("<td>{}</td>", cells)))
    foot = Markup("")
    if r.output is not None:
        foot = html("<tfoot><tr><th scope='row' colspan='{}'>output h<sub>{}</sub>: the sum of the "
                    "contributions</th><td></td><td data-testid='contributions-output'>{}</td></tr></tfoot>",
                    len(cols) - 1, n, vector_text(r.output[i]))
    return html("<table class='contributions' aria-label='Contributions to row {}'>"
                "<thead><tr>{}</tr></thead><tbody>{}</tbody>{}</table>", n, head, join(rows), foot)


def bar_label(x: float, crowded: bool = False) -> str:
    """A bar's number as a narrow heat-map cell writes it, without trailing zeros ("14.6",
    "0.27", "1", "1e−05"); empty where the bars are too many to label."""
    return "" if crowded else format_number(x, "narrow", trim=True)


def _baseline(x: float) -> str:
    """A bar's label sits above a bar going up, below one going down."""
    return "top" if x < 0 else "bottom"


def _offset(x: float) -> int:
    """Pixels between a bar's end and its label (a label set's y offset points up)."""
    return -3 if x < 0 else 3


def bar_range(tops, padding: float = 0.4) -> tuple[float, float]:
    """The y range (start, end) that Bokeh's ``DataRange1d(range_padding=padding)`` gives bars
    from 0 to each of ``tops`` (non-finite tops ignored): the span from 0 and the tops widened
    by ``padding`` of itself around its centre, or 0 ± 1 when every top is 0 or there are none.

    Set from here for the value and contribution charts: over an empty source (values off, the
    charts hidden) a ``DataRange1d`` has no start or end, and BokehJS warns "could not set
    initial ranges" on every layout of the page.
    """
    shown = [float(t) for t in tops if np.isfinite(t)]
    low, high = min([0.0, *shown]), max([0.0, *shown])
    if high == low:
        return low - 1.0, high + 1.0
    centre, half = (low + high) / 2, (high - low) * (1 + padding) / 2
    return centre - half, centre + half


def readable_labels(xs, widths, tops, labels, y_range: tuple[float, float], T: int,
                    legend: bool = False) -> list[str]:
    """``labels`` with those blanked that would overlap a bar or a label kept before them.

    Bar k stands at ``xs[k]`` (sources at 1…T), ``widths[k]`` wide, from 0 to ``tops[k]``, in
    a chart whose y axis spans ``y_range``; its label sits just past its top. Labels are kept
    largest bar first, so beside a tall bar the small ones near the axis (which all sit at
    one height, side by side) give way: their numbers stay in the table. Sizes in pixels are
    estimated (:data:`PLOT_PX`, :data:`LABEL_CHAR_PX`), wide rather than narrow.
    """
    x_px = (PLOT_PX[0] - (LEGEND_PX if legend else 0)) / T
    span = y_range[1] - y_range[0]
    y_px = PLOT_PX[1] / span if np.isfinite(span) and span > 0 else 0.0
    tops = [float(t) if np.isfinite(t) else 0.0 for t in tops]
    bars = [(x_px * (x - w / 2), x_px * (x + w / 2), y_px * min(0.0, t), y_px * max(0.0, t))
            for x, w, t in zip(xs, widths, tops, strict=True)]

    def overlaps(a, b) -> bool:
        return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]

    kept, out = [], list(labels)
    for k in sorted(range(len(labels)), key=lambda k: (-abs(tops[k]), k)):
        if not labels[k]:
            continue
        half = len(labels[k]) * LABEL_CHAR_PX / 2
        end = y_px * tops[k] + (-3 if tops[k] < 0 else 3)
        low, high = (end - LABEL_HEIGHT_PX, end) if tops[k] < 0 else (end, end + LABEL_HEIGHT_PX)
        box = (x_px * xs[k] - half, x_px * xs[k] + half, low, high)
        if any(overlaps(box, other) for other in kept) or any(
                overlaps(box, bar) for n, bar in enumerate(bars) if n != k):
            out[k] = ""
        else:
            kept.append(box)
    return out


def chart_data(r: AttentionResult, row: int) -> tuple[dict, dict]:
    """The two chart sources' data for row ``row`` (from 1): one entry per source for scores and
    weights, one per (source, component) for values and contributions (empty without values).

    Bars sit at x = j (sources from 1); a source's components side by side around it.
    """
    i = min(max(row, 1), r.T) - 1
    masked, zeroed = _masked_before_softmax(r, i), _zeroed_after_softmax(r, i)
    crowded = r.T_k > _LABELLED_BARS
    per_source = {
        "x": [float(j + 1) for j in range(r.T_k)],
        "source": [f"key {j + 1}" for j in range(r.T_k)],
        "score": [float(s) for s in r.scores[i]],
        "weight": [0.0 if np.isnan(w) else float(w) for w in r.weights[i]],
        "score_label": [("masked" if masked[j] else bar_label(r.scores[i, j], crowded))
                        for j in range(r.T_k)],
        "weight_label": [bar_label(r.weights[i, j], crowded) + (" zeroed" if zeroed[j] else "")
                         for j in range(r.T_k)],
        "score_color": [MASKED_COLOR if masked[j] else SCORE_COLOR for j in range(r.T_k)],
        "score_hatch": ["/" if masked[j] else " " for j in range(r.T_k)],
    }
    xs, widths = per_source["x"], [BAR_WIDTH] * r.T_k
    per_source["score_label"] = readable_labels(xs, widths, per_source["score"], per_source["score_label"],
                                                bar_range(per_source["score"]), r.T_k)
    per_source["weight_label"] = readable_labels(xs, widths, per_source["weight"], per_source["weight_label"],
                                                 WEIGHT_RANGE, r.T_k)
    per_source["score_baseline"] = [_baseline(s) for s in per_source["score"]]
    per_source["score_offset"] = [_offset(s) for s in per_source["score"]]
    per_source["weight_baseline"] = ["bottom"] * r.T_k
    per_source["weight_offset"] = [3] * r.T_k
    per_component = {k: [] for k in (
        "x", "width", "source", "component", "value", "contribution", "value_label",
        "contribution_label", "value_color", "contribution_color", "value_baseline",
        "contribution_baseline", "value_offset", "contribution_offset")}
    if r.contributions is not None:
        mixed = r.mixed.reshape(r.T_k, -1)  # [T, d]
        contributions = r.contributions[i].reshape(r.T_k, -1)  # [T, d]
        d = mixed.shape[1]
        width = BAR_WIDTH / d
        crowded = r.T_k * d > _LABELLED_BARS
        for j in range(r.T_k):
            for c in range(d):
                per_component["x"].append(j + 1 - BAR_WIDTH / 2 + width * (c + 0.5))
                per_component["width"].append(width)
                per_component["source"].append(f"key {j + 1}")
                per_component["component"].append(str(c + 1) if d > 1 else "")
                value, part = float(mixed[j, c]), float(contributions[j, c])
                per_component["value"].append(value)
                per_component["contribution"].append(0.0 if np.isnan(part) else part)
                per_component["value_label"].append(bar_label(value, crowded))
                per_component["contribution_label"].append(bar_label(part, crowded))
                per_component["value_color"].append(COMPONENT_COLORS[c] if d > 1 else VALUE_COLOR)
                per_component["contribution_color"].append(
                    COMPONENT_COLORS[c] if d > 1 else CONTRIBUTION_COLOR)
                for column, x in (("value", value), ("contribution", part)):
                    per_component[f"{column}_baseline"].append(_baseline(x))
                    per_component[f"{column}_offset"].append(_offset(x))
        for column in ("value", "contribution"):
            per_component[f"{column}_label"] = readable_labels(
                per_component["x"], per_component["width"], per_component[column],
                per_component[f"{column}_label"], bar_range(per_component[column]), r.T_k, legend=d > 1)
    return per_source, per_component


class ContributionsView(pn.viewable.Viewer):
    """Row ``state.row``'s score, weight, value and contribution per source: a table and four
    bar charts over two ``ColumnDataSource``s, built once and updated by replacing their data."""

    state = param.ClassSelector(class_=LearnerState)
    chart_width = param.Integer(default=400, bounds=(200, None), doc="Width of each bar chart in pixels.")

    def __init__(self, **params):
        super().__init__(**params)
        self.source = ColumnDataSource(name="contributions-source")
        self.component_source = ColumnDataSource(name="contributions-components-source")
        self.x_range = Range1d(0.5, 3.5)
        self.ticker = FixedTicker(ticks=[1, 2, 3])
        self.score_figure = self._figure("Score", "contributions-score-figure")
        self.weight_figure = self._figure("Weight", "contributions-weight-figure")
        self._bars(self.score_figure, self.source, "score", "score_label", width=BAR_WIDTH,
                   fill_color="score_color", hatch_pattern="score_hatch", hatch_color="#555555",
                   hatch_alpha=0.6)
        self._bars(self.weight_figure, self.source, "weight", "weight_label", width=BAR_WIDTH,
                   fill_color=WEIGHT_COLOR)
        self.weight_figure.y_range = Range1d(*WEIGHT_RANGE)
        # The value and contribution charts are made the first time a run has values: the page
        # opens without them, and two figures are a good part of a page's memory.
        self.value_figure = self.contribution_figure = None
        self.legends = []
        self.text = pn.pane.HTML("", name="contributions", stylesheets=[TABLE_CSS, _CSS],
                                 margin=(0, 10), sizing_mode="stretch_width")
        # Values and contributions in a pane of their own, hidden without values.
        self.value_pane = pn.Column(margin=0, visible=False)
        self._layout = pn.Column(
            self.text,
            pn.pane.Bokeh(BokehRow(children=[self.score_figure, self.weight_figure], margin=(0, 10),
                                   stylesheets=[WRAPPING_ROW_CSS]), margin=0),
            # Weights, values weighted by them: hidden while they wait for a prediction.
            self.value_pane, margin=0, sizing_mode="stretch_width", visible=self.state.param.revealed)
        self._update()

    def _make_value_figures(self) -> None:
        self.value_figure = self._figure("Value", "contributions-value-figure")
        self.contribution_figure = self._figure("Contribution", "contributions-contribution-figure")
        for fig, column in ((self.value_figure, "value"), (self.contribution_figure, "contribution")):
            # White edges part a source's components.
            bars = self._bars(fig, self.component_source, column, f"{column}_label", width="width",
                              fill_color=f"{column}_color", line_color="white")
            # Which colour is which component, shown only for vector values.
            legend = Legend(items=[LegendItem(label={"field": "component"}, renderers=[bars])],
                            location="top", visible=False, title="component",
                            title_text_font_size="11px", title_text_font_style="normal",
                            label_text_font_size="11px", margin=0, padding=2)
            fig.add_layout(legend, "right")
            self.legends.append(legend)
            fig.y_range = Range1d(*bar_range([]))  # set from the data: see bar_range
        self.value_pane[:] = [pn.pane.Bokeh(
            BokehRow(children=[self.value_figure, self.contribution_figure], margin=(0, 10),
                     stylesheets=[WRAPPING_ROW_CSS]),
            margin=0)]

    def _figure(self, title: str, name: str):
        fig = figure(title=title, name=name, width=self.chart_width, height=190, x_range=self.x_range,
                     y_range=DataRange1d(range_padding=0.4), toolbar_location=None, tools="",
                     x_axis_label="source (key) j", stylesheets=[CANVAS_EDGE_CSS])
        fig.xaxis.ticker = self.ticker
        fig.xgrid.grid_line_color = None
        fig.yaxis.minor_tick_line_color = None
        fig.min_border_left = 50
        return fig

    @staticmethod
    def _bars(fig, source, top: str, label: str, width, **style):
        width_spec = {"field": "width"} if width == "width" else width
        style.setdefault("line_color", None)
        bars = fig.vbar(x="x", top=top, bottom=0, width=width_spec, source=source, **style)
        bars.nonselection_glyph = bars.muted_glyph = "auto"
        # A LabelSet, not a text glyph: a text glyph whose source shrinks is redrawn between its
        # new data and its old labels (BokehJS page error "Offset is outside the bounds of the
        # DataView", after the four-token trace then Reset).
        fig.add_layout(LabelSet(x="x", y=top, text=label, source=source, text_align="center",
                                text_baseline=f"{top}_baseline", y_offset=f"{top}_offset",
                                text_font_size="10px", text_color="#212529"))
        fig.y_range.renderers = [bars]
        return bars

    @param.depends("state.result", "state.row", watch=True)
    def _update(self) -> None:
        r = self.state.result
        self.text.object = contributions_html(r, self.state.row)
        if r is None:
            return
        row = min(max(self.state.row, 1), r.T)
        per_source, per_component = chart_data(r, row)
        d = 0 if r.mixed is None else r.mixed.reshape(r.T_k, -1).shape[1]
        keys_mixed = r.mode.mix == "keys"
        if d > 0 and self.value_figure is None:
            self._make_value_figures()
        with pn.io.unlocked():
            self.x_range.update(start=0.5, end=r.T_k + 0.5)
            self.ticker.ticks = list(range(1, r.T_k + 1))
            self.score_figure.title.text = f"Score S_{row}j"
            self.weight_figure.title.text = f"Weight A_{row}j (softmax of the row)"
            if self.value_figure is not None:
                self.value_figure.title.text = ("Key k_j (mixed instead of the value)" if keys_mixed
                                                else "Value v_j") + (" by component" if d > 1 else "")
                self.contribution_figure.title.text = (
                    f"Contribution A_{row}j · {'k_j' if keys_mixed else 'v_j'}"
                    + (" by component" if d > 1 else ""))
                for legend in self.legends:
                    legend.visible = d > 1
                for fig, column in ((self.value_figure, "value"),
                                    (self.contribution_figure, "contribution")):
                    start, end = bar_range(per_component[column])
                    fig.y_range.update(start=start, end=end)
            # Row 2's bars, say, stay as they were when an edit changed only row 3.
            replace_data(self.source, per_source)
            replace_data(self.component_source, per_component)
        self.value_pane.visible = d > 0

    @param.depends("chart_width", watch=True)
    def _resize(self) -> None:
        with pn.io.unlocked():
            for fig in (self.score_figure, self.weight_figure, self.value_figure, self.contribution_figure):
                if fig is not None:
                    fig.width = self.chart_width

    def __panel__(self):
        return self._layout
