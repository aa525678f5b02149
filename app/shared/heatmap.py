"""A Bokeh heat map of one T×T_k attention matrix, with an accessible table mirror.

One tidy ``ColumnDataSource`` (a row per cell) feeds the rectangle colours, the cell text and
the hover, as in Bokeh's ``heatmap_unemployment.py`` example. Rows are query tokens with token
1 on top, columns are key tokens (``T_k`` of them: as many as the queries, except in
cross-attention). Lines can mark blocks of cells, such as the batch items of a flattened map.
Masked cells are grey, hatched and labelled, so they differ by
more than colour: a causal (or any other rule's) masked cell hatched with diagonals, a padding
key's with horizontal lines, and a cell the rule forbids that received weight anyway ("leaked")
keeps its colour inside a dashed outline. A masked cell's label sits on a plain patch, not on the
hatching. Updates replace ``source.data`` and the factor lists; the figure is built once.
Cell text shrinks with the token count and the figure's size; a label (and its patch) is drawn
only where it fits inside its cell (``label`` column, ``""`` elsewhere), so small maps show the
colours and hatching alone and the hover and the mirror table tell the values.
"""

from __future__ import annotations

import functools
import math
import re
from html import escape

import numpy as np
import panel as pn
import param
from bokeh.models import Button as BokehButton
from bokeh.models import (
    CDSView,
    ColorBar,
    ColumnDataSource,
    CustomJS,
    FactorRange,
    GlyphRenderer,
    Grid,
    GroupFilter,
    HoverTool,
    LinearColorMapper,
    Rect,
    SaveTool,
    Segment,
    TapTool,
)
from bokeh.models import Column as BokehColumn
from bokeh.palettes import Cividis256, PuOr11, Viridis256
from bokeh.plotting import figure
from bokeh.transform import transform
from panel.models import HTML as PanelHTML

from app.shared.html import each, html, join
from app.shared.numbers import MINUS, format_number
from app.shared.static import read_text
from app.shared.widgets import replace_data

MASKED_COLOR = "#d0d0d0"
LEAKED_COLOR = "#c2185b"  # not the batch boundaries' red: a leaked cell can sit beside one
CELL_KINDS = ("visible", "causal", "padding", "leaked")
"""What a cell is, in the source's ``kind`` column: shown; masked by the causal (or another)
rule; masked because its key is padding; forbidden by the rule but given weight anyway."""
_HATCH = dict(x="column", y="row", width=1, height=1, fill_alpha=0, line_color=None,
              hatch_color="#555555", hatch_alpha=0.6)
_MARKS = {  # each kind of marked cell's glyph: causal diagonals, padding horizontals, leaked outline
    "causal": dict(_HATCH, hatch_pattern="/"),
    "padding": dict(_HATCH, hatch_pattern="-"),
    # A leaked cell keeps its weight's colour: only an outline says the rule forbade it.
    "leaked": dict(x="column", y="row", width=0.88, height=0.88, fill_alpha=0, line_color=LEAKED_COLOR,
                   line_width=3, line_dash="dashed"),
}


def _kind_view(kind: str) -> CDSView:
    return CDSView(filter=GroupFilter(column_name="kind", group=kind))


def _array_key(a: np.ndarray | None) -> tuple | None:
    """An array as a key that is equal only for the same dtype, shape and bytes (``None`` stays)."""
    return None if a is None else (a.dtype.str, a.shape, a.tobytes())
# The mirrored table is for screen readers: in the accessibility tree, visually hidden. Inline,
# so it needs no stylesheet model of its own.
_SR_ONLY = ("position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; "
            "overflow: hidden; clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0;")
_KINDS = {
    # kind: (palette, colour range): weights over [0, 1]; scores over the shown scores' own
    # min..max, so 1 and 2 beside a 9 get colours apart; differences ± a round bound around 0.
    "weights": (Cividis256, "unit"),
    "scores": (Viridis256, "span"),
    "difference": (tuple(reversed(PuOr11)), "symmetric"),
}
# (largest T or T_k, largest font size, masked cells say so in their text): beyond 4 tokens a
# cell is too narrow for a second line, and masked cells are told by their hatching and their hover.
_TEXT_SIZES = ((4, 12, True), (6, 10, False), (8, 9, False), (12, 7, False),
               (math.inf, 0, False))  # a flattened batch of 24 tokens: numbers in the hover
_MIN_FONT = 7  # px: below it a label is not drawn (the hover, the table and the legend tell it)
# What the figure spends outside its cells, in px, as BokehJS lays it out: the title and the axis
# above with its label (and the bottom border); the y axis with its label on the left, the colour
# bar with its tick labels and the right border (a two-digit token count widens the y ticks;
# weights' colour bar ticks, 0 to 1, are narrower than scores' or differences').
_FRAME_OUTSIDE_Y = 75
_FRAME_OUTSIDE_X = {"unit": 100, "span": 110, "symmetric": 110, None: 60}  # None: no colour bar
_WIDE_TICKS = 8
_LINE_HEIGHT = 1.2  # Bokeh's text_line_height
_PATCH_PADDING = 1  # px around a masked cell's label, on its plain patch


# Advance widths in em of DejaVu Sans, rounded up: what Chromium on Linux draws Bokeh's
# "helvetica" in, and the widest of the sans-serif fonts a browser maps that name to (Helvetica,
# Arial and Liberation Sans are narrower). A guess of a full em for "−" (0.84) left "−1.00" out of
# cells it fits, beside labelled "1.00"s; 0.6 for a digit (0.64) let "0.123" overflow.
_EM_WIDTHS = {**dict.fromkeys("0123456789abcdeghknopqsuvxyz", 0.64), **dict.fromkeys("−+∞", 0.84),
              **dict.fromkeys(".,: ", 0.32), **dict.fromkeys(";|", 0.34), **dict.fromkeys("ilj", 0.28),
              "f": 0.36, "r": 0.42, "t": 0.4, "!": 0.41, "m": 0.98, "w": 0.82, "M": 0.87, "W": 0.99}
_EM_OTHER = 0.8  # any other glyph (capitals up to 0.79 but M, W)


def text_width(text: str, font_px: float) -> float:
    """An estimate of the width in px of one line of ``text`` in Bokeh's sans-serif cell font at
    ``font_px``, from the glyph widths of the widest common such font (``_EM_WIDTHS``): never
    less than a browser draws, and not so much more that a label that fits is left out."""
    return sum(_EM_WIDTHS.get(c, _EM_OTHER) for c in text) * font_px


@functools.lru_cache(maxsize=8192)  # a map's labels mostly stay from one edit to the next
def label_fits(text: str, font_px: float, cell_width: float, cell_height: float, padding: float = 0) -> bool:
    """Whether ``text`` (lines split on ``\n``) drawn at ``font_px`` with ``padding`` px of
    patch around it stays inside a ``cell_width`` × ``cell_height`` px cell, a pixel clear of its
    white border."""
    lines = text.split("\n")
    width = max(text_width(line, font_px) for line in lines) + 2 * padding
    # A patch spans whole lines; bare text only its glyphs (about an em), not the last leading.
    height = (len(lines) * _LINE_HEIGHT - (0 if padding else _LINE_HEIGHT - 1)) * font_px + 2 * padding
    return width <= cell_width - 2 and height <= cell_height - 1


# A <button> under the figure runs its SaveTool in the browser: the toolbar's own Save is a
# titled <div> without a button role (a screen reader announces no button), so the toolbar stays
# hidden. A Bokeh button in the figure's own layout, not a Panel one: Panel's JS links are not
# attached to widgets added after the page loaded, as the comparison's maps are.
_SAVE_JS = read_text(__package__, "heatmap_save.js")
#: On every figure (heat maps, contributions, the class picture): no stray marks at its left edge.
CANVAS_EDGE_CSS = read_text(__package__, "canvas_edge.css")


def cell_text(x: float, style: str) -> str:
    """A cell's printed number: :func:`format_number` in ``style``, except that a narrow cell
    prints fixed decimals where they fit in 6 characters (``0.004``, ``0.0003``, not ``4e−03``);
    the hover keeps the exact value."""
    a = abs(float(x))
    if style == "narrow" and np.isfinite(a) and 1e-4 <= a < 0.01:
        text = f"{x:.3f}" if a >= 1e-3 else f"{x:.4f}"
        if len(text) <= 6 and float(text) != 0:
            return text.replace("-", MINUS)
    return format_number(x, style)


def file_name(*parts: object) -> str:
    """A download's file name from what it shows: ``file_name("weights", "mask_after_softmax",
    "T3")`` is ``"weights-mask-after-softmax-T3"``; only letters, digits and hyphens survive (the
    browser adds ``.png``)."""
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9-]+", "-", text)).strip("-")


def nice_bound(x: float) -> float:
    """The smallest of 1, 2 or 5 × 10^k that is at least ``x`` (1.0 for ``x`` ≤ 0 or not finite).

    The scores colour range is ±this bound of the largest shown ``|score|``, so the colour bar
    reads in round numbers and stays put while an edit moves a score within it: the same score
    keeps its colour from one edit to the next, and the browser redraws no colour bar. Each
    candidate is parsed from its decimal text (``5e-06``), so it is the float64 nearest the
    round number and an ``x`` typed as one is its own bound. Where float64 holds no round number
    at or above ``x`` (beyond 1e308, or among the subnormals below 1e-307), ``x`` itself.
    """
    if not (math.isfinite(x) and x > 0):
        return 1.0
    exponent = math.floor(math.log10(x))
    for e in (exponent - 1, exponent, exponent + 1):  # log10 can be one off near 10^k
        for step in (1, 2, 5):
            bound = float(f"{step}e{e}")
            if bound >= x and 0 < bound < math.inf:
                return bound
    return x


@functools.lru_cache(maxsize=1024)  # a few palettes of 256 colours and the masked grey
def contrasting_text(background: str) -> str:
    """``"black"`` or ``"white"``, whichever contrasts more with ``background`` (``#rrggbb``).

    By WCAG 2.1's relative luminance and contrast ratio (white wins below a luminance of about
    0.18). The cell text is chosen from the colour the cell is actually drawn in, not from where
    its value sits in the range: a palette's dark end need not start where a threshold on the
    range puts it.
    """
    def linear(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(background[i:i + 2], 16)) for i in (1, 3, 5))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "white" if 1.05 / (luminance + 0.05) > (luminance + 0.05) / 0.05 else "black"


class HeatMap(pn.viewable.Viewer):
    """A titled heat map of a (T, T) matrix.

    Parameters
    ----------
    title : str
        Shown above the figure and used as the table caption (``"Scores"``, ``"Weights"``).
    name : str
        Prefix of the Bokeh model names (``"<name>-source"``, ``"<name>-figure"``), which
        browser tests look up with ``Bokeh.documents[0].get_model_by_name``.
    kind : {"weights", "scores", "difference"}
        Weights use a fixed [0, 1] colour range; scores the range of the shown (unmasked,
        finite) scores; differences a symmetric diverging one, ± :func:`nice_bound` of the
        largest shown magnitude.
    on_row_tap : callable, optional
        Called with the row (query, from 1) of a cell the learner clicks.
    label_masked : bool
        Whether a masked cell says so under its number (up to 4 tokens); false for maps too
        small for a second line, whose masked cells are told by their hatching and hover.

    Under the figure, a button "Save <title> as PNG" (``save_button``) downloads the figure as
    drawn, made in the browser by its :class:`bokeh.models.SaveTool` (``save_tool``) under the
    file name :meth:`update` last gave.
    """

    visible = param.Boolean(default=True, doc="Whether the map and its save button show.")

    def __init__(self, title: str, name: str, kind: str = "weights", size: int = 330,
                 on_row_tap=None, label_masked: bool = True) -> None:
        super().__init__()
        palette, self._range_kind = _KINDS[kind]
        self._palette = palette
        self.title = title
        self.kind = kind
        self._label_masked = label_masked
        self.source = ColumnDataSource(self._empty(), name=f"{name}-source")
        self.mapper = LinearColorMapper(palette=palette, low=0.0, high=1.0, nan_color=MASKED_COLOR)
        self.x_range = FactorRange(factors=["1"])
        self.y_range = FactorRange(factors=["1"])
        fig = figure(
            title=title, name=f"{name}-figure", x_range=self.x_range, y_range=self.y_range,
            width=size + 100, height=size, toolbar_location=None, tools="",
            x_axis_label="key (column)", y_axis_label="query (row)", x_axis_location="above",
            stylesheets=[CANVAS_EDGE_CSS],
        )
        fig.rect(
            x="column", y="row", width=1, height=1, source=self.source,
            fill_color=transform("value", self.mapper), line_color="white",
        )
        # The hatching is a second glyph over the masked cells only, with one fixed pattern:
        # a hatch pattern given per cell costs the browser a new canvas per cell on every
        # redraw, which was most of an edit's time in the page.
        # The causal hatching now; the padding hatching and the leaked outline the first time a
        # map shows such a cell (:meth:`_mark`): most pages never need them.
        self._marks = {"causal": fig.rect(**_MARKS["causal"], source=self.source, view=_kind_view("causal"))}
        # One text glyph per text colour, each colour a constant: BokehJS can redraw a text glyph
        # between a shrinking source's new length and its old labels, and a per-cell colour is then
        # read past its end (page error "Offset is outside the bounds of the DataView", e.g. from
        # 4 tokens to 3); constant colours are read at any index.
        # A masked cell's label ("masked" group), where it fits, is drawn on a plain patch over its hatching.
        self._texts = [
            fig.text(
                x="column", y="row", text="label", source=self.source, text_align="center",
                text_baseline="middle", text_color="black" if group == "masked" else group,
                text_font_size="12px",
                # A cell with no label is left out (its ``text_group`` is ""): an empty text
                # still draws its patch's padding. One filter per glyph, on a column made for it:
                # an intersection of two filters is three more models in every map of every page.
                view=CDSView(filter=GroupFilter(column_name="text_group", group=group)),
                **({"background_fill_color": MASKED_COLOR, "padding": 1} if group == "masked" else {}),
            ).glyph
            for group in ("black", "white", "masked")
        ]
        # The figure holds only what it draws: nothing is ever selected or muted (BokehJS derives
        # those glyphs itself when asked for "auto"), and the invisible grid lines are not built.
        for renderer in fig.renderers:
            renderer.nonselection_glyph = renderer.muted_glyph = "auto"
        self._tappable = on_row_tap is not None
        if on_row_tap is not None:
            # A click picks a row; the tapped cell is not drawn as selected (nothing to dim).
            for renderer in fig.renderers:
                renderer.selection_glyph = renderer.nonselection_glyph = renderer.glyph
            fig.add_tools(TapTool(renderers=[fig.renderers[0]]))
            self.source.selected.on_change("indices", self._tapped)
            self._on_row_tap = on_row_tap
        fig.center = [r for r in fig.center if not isinstance(r, Grid)]
        self.save_tool = SaveTool(filename=file_name(name), name=f"{name}-save")
        fig.add_tools(self.save_tool)
        # Hover the coloured cells only: the marks drawn over them would each open a copy.
        fig.add_tools(HoverTool(renderers=[fig.renderers[0]], tooltips=[
            ("row (query)", "@row"), ("column (key)", "@column"), ("score", "@score_text"),
            ("weight", "@weight_text"), ("cell", "@state"),
        ]))
        # Block boundaries (e.g. batch items), in the ranges' synthetic coordinates: factor k
        # spans k-1..k, so a boundary between blocks is a whole number.
        self.boundaries = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []}, name=f"{name}-boundaries")
        fig.add_glyph(self.boundaries, Segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color="#d62728",
                                                line_width=3))
        # Room on the right for the colour bar's tick labels ("-1000", "0.25") to show whole.
        self.color_bar = ColorBar(color_mapper=self.mapper, width=12, padding=8)
        fig.add_layout(self.color_bar, "right")
        fig.min_border_right = 16
        fig.axis.major_tick_line_color = None
        fig.axis.axis_line_color = None
        self.figure = fig
        # The figure and its table in one Bokeh layout (``model``); a pane is built only if asked
        # for (__panel__).
        # Shows nothing: its table is for screen readers. Panel's HTML model, not Bokeh's Div:
        # a Div re-renders on each new text and so lays the whole page out again (both maps
        # measured) on every edit; Panel's replaces only its inner HTML. Its text is sent
        # escaped, as pn.pane.HTML sends it.
        self.table = PanelHTML(text="", margin=0, run_scripts=False, disable_math=True)
        self.save_button = BokehButton(label=f"Save {title} as PNG", name=f"{name}-save-button",
                                       margin=(0, 0, 10, 0), width=size)
        self.save_button.js_on_event("button_click", CustomJS(args={"tool": self.save_tool},
                                                              code=_SAVE_JS))
        self.model = BokehColumn(children=[fig, self.save_button, self.table], margin=(0, 10), width=size + 120,
                                 visible=self.visible)
        self._pane: pn.pane.Bokeh | None = None
        self._shown_key: tuple | None = None  # what update() last drew the map from

    def _mark(self, kind: str) -> None:
        """Add the glyph marking ``kind`` cells ("padding", "leaked") if not there yet, drawn
        under the cell text (the document must be unlocked)."""
        if kind in self._marks:
            return
        fig = self.figure
        # Made whole before it joins the figure, in one change: in a served page each change to
        # a model of the document (fig.rect adding it, then each glyph set on it) makes Bokeh
        # walk every model of the page again, six walks a mark (seconds at a batch of three).
        glyph = Rect(**_MARKS[kind])
        chosen = glyph if self._tappable else "auto"
        renderer = GlyphRenderer(data_source=self.source, glyph=glyph, view=_kind_view(kind),
                                 selection_glyph=chosen, nonselection_glyph=chosen, muted_glyph="auto")
        first_text = next(n for n, r in enumerate(fig.renderers) if any(r.glyph is t for t in self._texts))
        fig.renderers = [*fig.renderers[:first_text], renderer, *fig.renderers[first_text:]]
        self._marks[kind] = renderer

    @staticmethod
    def _empty() -> dict:
        keys = ("row", "column", "value", "text", "label", "text_color", "text_group", "hatch", "kind",
                "score_text", "weight_text", "state")
        return {k: [] for k in keys}

    def _tapped(self, _attr, _old, indices) -> None:
        if indices:
            row = int(self.source.data["row"][indices[0]])
            self.source.selected.indices = []
            self._on_row_tap(row)

    def update(
        self,
        values: np.ndarray,
        masked: np.ndarray,
        *,
        scores: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        masked_label: str = "masked",
        masked_note: str | None = None,
        table_note: str | None = None,
        filename: str | None = None,
        value_range: tuple[float, float] | None = None,
        blocks: int | None = None,
        title: str | None = None,
        padding: np.ndarray | None = None,
        leaked: np.ndarray | None = None,
    ) -> None:
        """Show a new matrix.

        Parameters
        ----------
        values : numpy.ndarray of float, shape (T, T)
            Cell values; ``-inf``/``nan`` are drawn as not-a-number cells.
        masked : numpy.ndarray of bool, shape (T, T)
            Cells to draw hatched and labelled ``masked_label``.
        scores, weights : numpy.ndarray, shape (T, T), optional
            Shown in the hover (defaults to ``values``).
        masked_label : str
            The word under a masked cell's number (up to 4 tokens, where the cell is high
            enough; elsewhere the hatching and the hover say it).
        masked_note : str, optional
            What the hover and table say about a masked cell (default ``masked_label``).
        table_note : str, optional
            What the table says about a masked cell instead, where the hover's note leans on the
            hover's other lines; ``{score}`` in it is the cell's score (as the hover prints it).
        filename : str, optional
            The PNG's file name without ``.png`` (see :func:`file_name`); kept if not given.
        value_range : (float, float), optional
            The colour range, e.g. one shared by several maps (default: this ``kind``'s own).
        blocks : int, optional
            Draw lines between ``blocks`` equal blocks of rows and of columns (batch items).
        title : str, optional
            A new title for the figure; kept if not given.
        padding : numpy.ndarray of bool, shape (T, T), optional
            Masked cells whose key is padding: hatched apart, their hover says so.
        leaked : numpy.ndarray of str, shape (T, T), optional
            Per unmasked cell, why the rule forbids it although it got through (its hover, after
            "leaked: "), or ``""`` for a cell that may be read: outlined, kind ``"leaked"``.
        """
        T, T_k = values.shape
        # What the map would be drawn from: an update with the same arguments at the same cell
        # size (another batch item's map, say) changes nothing, so it is not worked out again.
        cell = self.cell_size(T, T_k)
        shown_key = (cell, _array_key(values), _array_key(masked), _array_key(scores),
                     _array_key(weights), masked_label, masked_note, table_note, filename, value_range, blocks, title,
                     _array_key(padding), None if leaked is None else leaked.tolist())
        if shown_key == self._shown_key:
            return
        factors = [str(i) for i in range(1, T + 1)]
        columns = [str(j) for j in range(1, T_k + 1)]
        largest_font, label_masked = next((size, label) for top, size, label in _TEXT_SIZES
                                          if max(T, T_k) <= top)
        label_masked = label_masked and self._label_masked
        style = "cell" if max(T, T_k) <= 4 else "narrow"
        finite = np.isfinite(values)
        low, high = value_range if value_range is not None else self._range(values[finite & ~masked])
        # One row per cell, row by row; each column as a list of Python values.
        flat = np.asarray(values, dtype=float).ravel().tolist()
        is_masked = np.asarray(masked, dtype=bool).ravel().tolist()
        drawn_ok = (finite.ravel() & ~np.asarray(masked, dtype=bool).ravel()).tolist()
        why = [""] * len(flat) if leaked is None else [
            "" if m else str(w) for w, m in zip(leaked.ravel().tolist(), is_masked, strict=True)]
        is_padding = [False] * len(flat) if padding is None else np.asarray(padding, dtype=bool).ravel().tolist()
        kinds = [("padding" if p else "causal") if m else "leaked" if w else "visible"
                 for m, w, p in zip(is_masked, why, is_padding, strict=True)]
        texts = [cell_text(v, style) for v in flat]
        note = masked_note or masked_label
        data = {
            "row": [f for f in factors for _ in range(T_k)],
            "column": columns * T,
            "value": [v if ok else np.nan for v, ok in zip(flat, drawn_ok, strict=True)],
            "text": [f"{t}\n{masked_label}" if m and label_masked else t
                     for t, m in zip(texts, is_masked, strict=True)],
            "label": [],
            "text_color": ["masked" if m else contrasting_text(self._colour(v, low, high) if ok else MASKED_COLOR)
                           for v, m, ok in zip(flat, is_masked, drawn_ok, strict=True)],
            "hatch": ["/" if m else " " for m in is_masked],
            "kind": kinds,
            "score_text": self._hovers(scores, flat),
            "weight_text": self._hovers(weights, flat),
            "state": [f"{note} (padding key)" if k == "padding" else note if m
                      else f"leaked: {w}" if w else "visible"
                      for k, m, w in zip(kinds, is_masked, why, strict=True)],
        }
        if table_note is not None:  # the table's own words, for the table only
            data["table_state"] = [table_note.format(score=s) + state[len(note):] if m else state
                                   for m, s, state in zip(is_masked, data["score_text"], data["state"], strict=True)]
        font = self._fit_labels(data, largest_font, *cell)
        data["text_group"] = [c if label else "" for c, label in zip(data["text_color"], data["label"], strict=True)]
        font_size = f"{font}px"
        # Raw Bokeh models changed from a Panel callback need Panel's unlocked() to reach the
        # browser (the session does not hold the document lock here).
        with pn.io.unlocked():
            self.mapper.update(low=low, high=high)
            if filename is not None:
                self.save_tool.filename = filename
            for kind in {"padding", "leaked"} & set(data["kind"]):
                self._mark(kind)
            for text in self._texts:
                text.text_font_size = font_size
            if title is not None:
                self.figure.title.text = title
            self.x_range.factors = columns
            self.y_range.factors = list(reversed(factors))
            self.table.text = escape(self._table_html(data, T, T_k))
            data.pop("table_state", None)
            # Bokeh sends a source's data each time it is set, equal or not, and the browser
            # redraws the map: an unchanged map (another batch item's, say) is left alone.
            replace_data(self.source, data)
            replace_data(self.boundaries, self._boundaries(T, T_k, blocks))
        self._shown_key = shown_key

    def patch_column(self, column: str, texts: list[str]) -> None:
        """Replace the text of one column of the map's source (e.g. the hover's
        ``weight_text``), cell by cell; the next :meth:`update` draws the map again in full."""
        with pn.io.unlocked():
            self.source.patch({column: [(slice(0, len(texts)), list(texts))]})
        self._shown_key = None

    def cell_size(self, T: int, T_k: int) -> tuple[float, float]:
        """The estimated width and height in px of one cell of a ``T`` × ``T_k`` map at the
        figure's size (its frame is what the title, the axes and the colour bar leave)."""
        fig = self.figure
        bar = self._range_kind if self.color_bar.visible else None
        outside_x = _FRAME_OUTSIDE_X[bar] + (_WIDE_TICKS if T >= 10 else 0)
        return max(fig.width - outside_x, 0) / T_k, max(fig.height - _FRAME_OUTSIDE_Y, 0) / T

    @staticmethod
    def _fit_labels(data: dict, largest_font: int, cell_width: float, cell_height: float) -> int:
        """Fill ``data["label"]``, the text drawn in each cell, and return its font size in px.

        The font is the largest from ``largest_font`` down to ``_MIN_FONT`` at which every shown
        cell's number fits its cell. Where none is, no shown cell's number is drawn: a map with
        some numbers left out (a "−1.00" too wide beside a "1.00") reads as if those cells had
        none; its colours, the hover and the mirror table tell them all. A masked cell's label
        that does not fit (with its patch; without the second line first) is ``""``: its
        hatching, its hover and the table still tell it.
        """
        shown = [t for t, c in zip(data["text"], data["text_color"], strict=True) if c != "masked"]
        font = next((f for f in range(largest_font, _MIN_FONT - 1, -1)
                     if all(label_fits(t, f, cell_width, cell_height) for t in shown)), None)
        for text, colour in zip(data["text"], data["text_color"], strict=True):
            masked = colour == "masked"
            fits = [t for t in (text, text.split("\n")[0]) if (font is not None or masked)
                    and label_fits(t, font or _MIN_FONT, cell_width, cell_height, _PATCH_PADDING if masked else 0)]
            data["label"].append(fits[0] if fits and largest_font >= _MIN_FONT else "")
        return font if font is not None else min(largest_font, _MIN_FONT)

    def _colour(self, v: float, low: float, high: float) -> str:
        """The palette entry BokehJS's ``LinearColorMapper`` draws ``v`` in over [low, high]."""
        n = len(self._palette)
        at = int((v - low) / (high - low) * n) if high > low else 0
        return self._palette[min(max(at, 0), n - 1)]

    def _range(self, shown: np.ndarray) -> tuple[float, float]:
        if self._range_kind == "unit":
            return 0.0, 1.0
        if self._range_kind == "span":
            if not shown.size:
                return 0.0, 1.0
            low, high = float(shown.min()), float(shown.max())
            return (low, high) if high > low else (low - 1.0, high + 1.0)
        bound = nice_bound(float(np.abs(shown).max()) if shown.size else 1.0)
        return -bound, bound

    @staticmethod
    def _hovers(matrix: np.ndarray | None, fallback: list[float]) -> list[str]:
        """Each cell's number in the hover: ``matrix``'s, row by row, else the drawn value's."""
        numbers = fallback if matrix is None else np.asarray(matrix, dtype=float).ravel().tolist()
        return [format_number(v) for v in numbers]

    @staticmethod
    def _table_cell(data: dict, n: int) -> str:
        number, state = data["text"][n].split("\n")[0], data.get("table_state", data["state"])[n]
        return number if state == "visible" else f"{number} {state}"

    @staticmethod
    def _boundaries(T: int, T_k: int, blocks: int | None) -> dict:
        """Segments between ``blocks`` equal blocks of rows and of columns (none for one block)."""
        lines: dict[str, list[float]] = {"x0": [], "y0": [], "x1": [], "y1": []}
        for b in range(1, blocks or 1):
            x, y = b * T_k // blocks, T - b * T // blocks  # rows run top-down, reversed
            for x0, y0, x1, y1 in ((x, 0, x, T), (0, y, T_k, y)):
                for key, v in zip(("x0", "y0", "x1", "y1"), (x0, y0, x1, y1), strict=True):
                    lines[key].append(float(v))
        return lines

    def _table_html(self, data: dict, T: int, T_k: int) -> str:
        head = each('<th scope="col">key {}</th>', range(1, T_k + 1))
        cells = [self._table_cell(data, n) for n in range(T * T_k)]
        rows = join(html('<tr><th scope="row">query {}</th>{}</tr>', i + 1,
                         each("<td>{}</td>", cells[i * T_k:(i + 1) * T_k]))
                    for i in range(T))
        # The clipping box is a div: a table ignores width 1px, and clipped but wide it still
        # widened the page (a horizontal scroll bar at 1280 px).
        return str(html(
            '<div class="sr-only" style="{style}">'
            '<table class="matrix-table" aria-label="{title} table">'
            "<caption>{title}: rows are queries, columns are keys</caption>"
            '<thead><tr><th scope="col">row</th>{head}</tr></thead>'
            "<tbody>{rows}</tbody></table></div>",
            style=_SR_ONLY, title=self.title, head=head, rows=rows))

    @param.depends("visible", watch=True)
    def _show(self) -> None:
        # On the Bokeh model itself, by the path its data takes (unlocked, in order): a Bokeh
        # pane given visible or margin sets them on the raw model outside Panel's write queue,
        # and that patch could reach the browser before the one that defined a new map.
        with pn.io.unlocked():
            self.model.visible = self.visible

    def __panel__(self):
        if self._pane is None:
            self._pane = pn.pane.Bokeh(self.model)
        return self._pane
