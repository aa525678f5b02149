"""The ``Scores`` and ``Weights`` heat maps of the current run; a click on a row picks it.
The weights hide while the learner has still to predict them (``state.revealed``).

One sequence (or the mixed batch's one flattened map, its items' blocks marked): the two maps
side by side. A batch: each item's maps side by side, small multiples under one colour scale.
Cross-attention with the causal mask and ``T_q != T_k``: both alignments' masks side by side,
the chosen one outlined. The maps are :class:`app.shared.heatmap.HeatMap` figures, updated by
replacing their sources' data whenever the state's run changes. Under the maps: a legend of the
kinds of cell they show (masked by the causal rule, by padding, leaked), and in two failure modes
a picture of what broke: "Mask after softmax" each row's mass split into what stays visible and
what was zeroed away; "No sqrt(d_k) scaling" the chosen row with and without the scaling, side
by side. Left out: the numbers' readouts (:mod:`.checks`).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import BoxAnnotation, ColumnDataSource, FactorRange, Range1d
from bokeh.plotting import figure

from app.learner.checks import row_sum_html
from app.learner.state import LearnerState
from app.shared.heatmap import LEAKED_COLOR, MASKED_COLOR, HeatMap, file_name
from app.shared.html import Markup, html, join
from app.shared.numbers import format_number
from attention_core import (
    ALIGNMENTS,
    MAX_BATCH,
    AttentionResult,
    LayerResult,
    causal_mask,
    scaled_dot_product_attention,
)

MASKED_SCORE = "masked: softmax got −∞; the score above is the one before masking"  # the hover
# The Scores table's masked cell: no score line above it there, so it names the score itself.
MASKED_SCORE_CELL = "masked: softmax got −∞; the score before masking was {score}"
LEAKED_FUTURE = "a future token the causal mask should hide; the mask was not applied"
LEAKED_ITEM = ("another batch item's token, which this item must not read; the batch was "
               "flattened into one sequence")
CHOSEN_OUTLINE = "#d62728"
HIDDEN_NOTE = "Write your prediction above to see the weights and checks."
HIDDEN_WEIGHT = "shown once you predict"
HIGHLIGHT_OUTLINE = "#e64980"  # cells a Check-yourself answer points at: not the red of boundaries


def png_name(what: str, r: AttentionResult, item: int | None = None) -> str:
    """What a heat map's PNG shows, as its file name: ``weights-mask-after-softmax-causal-T3-dk1``
    (plus ``-padded`` when a key is padding, ``-Tk4`` in cross-attention, ``-item2`` in a batch)."""
    padded = r.key_is_real is not None and not r.key_is_real.all()
    return file_name(what, r.mode.name, "causal" if r.causal else "bidirectional", f"T{r.T}",
                     f"Tk{r.T_k}" if r.T_k != r.T else None, f"dk{r.d_k}",
                     "padded" if padded else None, f"item{item}" if item else None)


def score_range(maps) -> tuple[float, float]:
    """One colour range for several maps' scores: the span of every score softmax received."""
    shown = np.concatenate([m.masked_scores[np.isfinite(m.masked_scores)] for m in maps])
    if not shown.size:
        return 0.0, 1.0
    low, high = float(shown.min()), float(shown.max())
    return (low, high) if high > low else (low - 1.0, high + 1.0)


def cell_kinds(r: AttentionResult, blocks: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which cells of ``r``'s maps are masked, which of those for a padding key, and which leaked.

    Returns
    -------
    masked : numpy.ndarray of bool, shape (T, T_k)
        Cells softmax got as −∞, or (mask after softmax) zeroed after it.
    padding : numpy.ndarray of bool, shape (T, T_k)
        Masked cells whose key is padding.
    leaked : numpy.ndarray of str, shape (T, T_k)
        Why a cell the rule forbids got through anyway ("No mask": a future token; a flattened
        batch of ``blocks`` items: another item's token), else ``""``.
    """
    received = ~np.isneginf(r.masked_scores)  # what softmax got: -inf where a mask came before it
    forbidden = ~r.allowed
    masked = forbidden if r.mode.mask == "after" else ~received
    padding = masked & (False if r.key_is_real is None else ~r.key_is_real[np.newaxis, :])
    leaked = np.full(r.allowed.shape, "", dtype=object)
    through = forbidden & received & (r.mode.mask != "after")
    if through.any():
        T, T_k = r.allowed.shape
        items = blocks or 1
        row_item = np.arange(T)[:, np.newaxis] * items // T
        column_item = np.arange(T_k)[np.newaxis, :] * items // T_k
        leaked[through] = LEAKED_FUTURE
        leaked[through & (row_item != column_item)] = LEAKED_ITEM
    return masked, padding, leaked


def show_result(scores: HeatMap, weights: HeatMap, r: AttentionResult, *, item: int | None = None,
                score_span: tuple[float, float] | None = None, blocks: int | None = None) -> None:
    """Draw ``r``'s scores and weights into the two maps."""
    masked, padding, leaked = cell_kinds(r, blocks)
    before = np.isneginf(r.masked_scores)  # the scores map: what softmax got as -inf
    scores.update(r.masked_scores, before, scores=r.scores, weights=r.weights,
                  masked_note=MASKED_SCORE, table_note=MASKED_SCORE_CELL, filename=png_name("scores", r, item),
                  value_range=score_span, blocks=blocks, padding=padding & before, leaked=leaked)
    after = r.mode.mask == "after"
    weights.update(r.weights, masked, scores=r.scores, weights=r.weights,
                   masked_label="zeroed" if after else "masked",
                   masked_note="zeroed after softmax" if after else "masked",
                   filename=png_name("weights", r, item), blocks=blocks, padding=padding, leaked=leaked)


# CSS swatches drawn as the maps draw each kind of cell (hatch angle, dashed outline).
_SWATCH = "display: inline-block; width: 1.2em; height: 1.2em; vertical-align: middle; margin-right: 4px; "
_LINES = "background: repeating-linear-gradient({}, #555 0 1px, " + MASKED_COLOR + " 1px 5px); "
_LEGEND = {
    "causal": (_SWATCH + _LINES.format("135deg"),
               "masked: the causal mask hides a later token"),
    "padding": (_SWATCH + _LINES.format("0deg"), "masked: its key is padding"),
    "leaked": (_SWATCH + f"border: 3px dashed {LEAKED_COLOR}; box-sizing: border-box; ",
               "leaked: the rule forbids it, but it got weight (a mask was not applied)"),
}


def legend_html(kinds, after: bool = False) -> Markup:
    """A legend of the kinds of cell among ``kinds`` (a heat-map source's ``kind`` column): how
    each is drawn and what it means (``after``: masked cells were zeroed after softmax); empty
    when every cell is visible."""
    shown = [k for k in _LEGEND if k in set(kinds)]
    if not shown:
        return Markup("")
    items = join(html("<li data-kind='{}'><span aria-hidden='true' style='{}'></span>{}</li>", k, swatch,
                      text.replace("masked", "zeroed after softmax", 1) if after else text)
                 for k in shown for swatch, text in [_LEGEND[k]])
    return html("<ul class='cell-legend' data-testid='cell-legend' aria-label='Kinds of cell in the maps' "
                "style='list-style: none; padding: 0; margin: 0; display: flex; flex-wrap: wrap; gap: 4px 16px;'>"
                "{}</ul>", items)


def lost_mass_html(r: AttentionResult) -> Markup:
    """Each row's probability mass as a bar split into what stays visible (its row sum, printed as
    the readouts print it) and what was zeroed away (1 − row sum): the picture of "Mask after
    softmax"'s rows that no longer sum to 1. Its numbers are its text alternative."""
    rows = []
    for i, total in enumerate(r.row_sums):
        kept = min(max(float(total), 0.0), 1.0) if np.isfinite(total) else 0.0
        rows.append(html(
            "<tr data-row='{n}'><th scope='row' style='{cell}'>Row {n}</th><td style='width: 50%; {cell}'>"
            "<div aria-hidden='true' style='display: flex; height: 1.1em; border: 1px solid #555;'>"
            "<div style='width: {kept}%; background: #2c4f8a;'></div>"
            "<div style='width: {lost}%; background: repeating-linear-gradient(135deg, #555 0 1px, {grey} 1px 5px);'>"
            "</div></div></td><td style='{cell}'>visible <b class='kept'>{sum}</b></td>"
            "<td style='{cell}'>zeroed away <b class='lost'>{gone}</b></td></tr>",
            n=i + 1, cell="white-space: nowrap; padding: 2px 8px; text-align: left;",
            kept=f"{100 * kept:.2f}", lost=f"{100 * (1 - kept):.2f}", grey=MASKED_COLOR,
            sum=row_sum_html(total), gone=format_number(1 - float(total))))
    return html(
        "<div data-testid='lost-mass'><p><b>Where each row's weight went.</b> Softmax gave every row a "
        "total of 1; zeroing the future cells afterwards took their share away (hatched), and nothing "
        "renormalised what is left, so the visible weights no longer sum to 1.</p>"
        "<table class='lost-mass' aria-label='Visible and zeroed-away weight of each row' "
        "style='border-collapse: collapse; width: 100%; max-width: 640px;'><tbody>{}</tbody></table></div>",
        join(rows))


def scaling_pair(r: AttentionResult, row: int) -> tuple[np.ndarray, np.ndarray]:
    """Row ``row`` (from 0) of the weights with and without the division by √d_k: the core's
    correct run on ``r``'s inputs, and ``r``'s own (unscaled) weights."""
    correct = scaled_dot_product_attention(
        r.queries, r.keys, r.values, causal=r.causal, padding_mask=r.key_is_real,
        causal_alignment=r.causal_alignment, failure_mode="correct")
    return correct.weights[row], r.weights[row]


class ScalingPair:
    """Two small bar charts on one y range: the chosen row's weights with ÷√d_k (correct) and
    without (the "No sqrt(d_k) scaling" mode), made once and updated through their sources."""

    def __init__(self, size: int = 300) -> None:
        self.x_range = FactorRange(factors=["1"])
        self.y_range = Range1d(0, 1.05)
        self.sources, self.figures = [], []
        for which in ("scaled", "unscaled"):
            source = ColumnDataSource({"key": [], "weight": [], "label": []}, name=f"scaling-{which}-source")
            fig = figure(name=f"scaling-{which}-figure", x_range=self.x_range, y_range=self.y_range,
                         width=max(200, size * 2 // 3), height=max(160, size // 2), toolbar_location=None,
                         tools="", x_axis_label="key (column)", y_axis_label="weight")
            fig.vbar(x="key", top="weight", width=0.8, source=source,
                     color="#2c4f8a" if which == "scaled" else "#c2185b")
            fig.text(x="key", y="weight", text="label", source=source, text_align="center",
                     text_baseline="bottom", text_font_size="10px")
            fig.xgrid.grid_line_color = None
            self.sources.append(source)
            self.figures.append(fig)
        self.text = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width")
        self.layout = pn.Column(pn.Row(*(pn.pane.Bokeh(f, margin=(0, 10)) for f in self.figures), margin=0),
                                self.text, margin=0)

    def update(self, r: AttentionResult, row: int) -> None:
        """Show row ``row`` (from 0) of ``r``, a run in the ``no_scaling`` mode."""
        scaled, unscaled = scaling_pair(r, row)
        keys = [str(j) for j in range(1, r.T_k + 1)]
        n, d_k = row + 1, r.d_k
        titles = (f"Row {n} with ÷√d_k", f"Row {n} without")
        with pn.io.unlocked():
            self.x_range.factors = keys
            for source, fig, weights, title in zip(self.sources, self.figures, (scaled, unscaled), titles,
                                                   strict=True):
                fig.title.text = title
                source.data = {"key": keys, "weight": [float(w) for w in weights],
                               "label": [format_number(w, "narrow") for w in weights]}
        self.text.object = html(
            "<p data-testid='scaling-pair'>Row {n}'s weights with the scores divided by √d_k = √{d_k} = {root}: "
            "<b class='scaled'>{a}</b>; without: <b class='unscaled'>{b}</b>. Without the division the "
            "scores are √{d_k} times as far apart, so softmax puts more of the row on its largest.</p>",
            n=n, d_k=d_k, root=format_number(np.sqrt(d_k), trim=True), a=", ".join(format_number(w) for w in scaled),
            b=", ".join(format_number(w) for w in unscaled))


def hidden_note_html(text: str) -> str:
    """The note where the weights would be while they wait for a prediction: ``text``, escaped."""
    return html("<p role='note' data-testid='predict-first-note'>{}</p>", text)


def hide_weights_in_hover(scores: HeatMap) -> None:
    """Say in the Scores map's hover that its cells' weights wait for the prediction, as the
    Weights map does (``state.revealed``): the hover would tell them."""
    scores.patch_column("weight_text", [HIDDEN_WEIGHT] * len(scores.source.data["weight_text"]))


def alignment_masks(layer: LayerResult) -> dict[str, np.ndarray] | None:
    """Each alignment's allowed cells (T_q × T_k) when they differ: a causal cross-attention
    with ``T_q != T_k``; else ``None``."""
    if not (layer.cross and layer.causal and layer.T != layer.T_k):
        return None
    return {a: causal_mask(layer.T, layer.T_k, a) for a in ALIGNMENTS}


class MatricesView(pn.viewable.Viewer):
    """Both heat maps side by side, each with its mirror table; a batch's items as small
    multiples; the two causal alignments' masks when they differ."""

    state = param.ClassSelector(class_=LearnerState)
    size = param.Integer(default=300, bounds=(120, None), constant=True,
                         doc="Height of each map in pixels (its figure is 100 px wider).")

    def __init__(self, **params):
        super().__init__(**params)
        pick = self._pick_row
        self.scores = HeatMap("Scores", "scores", kind="scores", size=self.size, on_row_tap=pick)
        self.weights = HeatMap("Weights", "weights", kind="weights", size=self.size, on_row_tap=pick)
        # An annotation, not a glyph: the hover and the row tap see only the cells.
        self.highlight = BoxAnnotation(name="weights-highlight", visible=False, fill_alpha=0,
                                       line_color=HIGHLIGHT_OUTLINE, line_alpha=1, line_width=4,
                                       left=0, right=0, bottom=0, top=0)
        self.weights.figure.add_layout(self.highlight)
        # The items' small multiples and the alignments' masks, each with its note, are made the
        # first time a run needs them: eight figures the default page never shows would triple
        # its Bokeh models (and their notes and rows are four panes more per session).
        self.item_scores: list[HeatMap] = []
        self.item_weights: list[HeatMap] = []
        self.masks: dict[str, HeatMap] = {}
        self.batch_note: pn.pane.HTML | None = None
        self.items_row: pn.Column | None = None
        self.mask_note: pn.pane.HTML | None = None
        self.masks_row: pn.Row | None = None
        # Where the weights would be while they wait for a prediction, saying why.
        self.hidden_note = pn.pane.HTML(
            hidden_note_html(HIDDEN_NOTE),
            visible=self.state.param.revealed.rx.not_(), width=self.size + 100, margin=(40, 10))
        self.legend = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width", visible=False)
        # The failure modes' pictures, made the first time their mode shows (as the items above).
        self.lost_mass: pn.pane.HTML | None = None
        self.scaling: ScalingPair | None = None
        self.pictures = pn.Column(margin=0, visible=False)
        self._layout = pn.Column(
            pn.Row(self.scores, self.weights, self.hidden_note, margin=0), self.legend, self.pictures, margin=0)
        self._update()

    def _make_batch_part(self) -> None:
        """The batch's note and the row its items' small multiples go in, before the masks' part."""
        self.batch_note = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width")
        # Hidden with its maps: a hidden map's pane still has its margins.
        self.items_row = pn.Column(margin=0, visible=False)
        objects = list(self._layout.objects)
        at = objects.index(self.mask_note) if self.mask_note is not None else len(objects)
        self._layout.objects = [*objects[:at], self.batch_note, self.items_row, *objects[at:]]

    def _make_items(self) -> None:
        # Three items side by side in the main area at 1280 px (each figure is 120 px wider
        # than high, with its margins).
        small = max(120, self.size // 2)
        for kind, maps in (("scores", self.item_scores), ("weights", self.item_weights)):
            maps.extend(HeatMap(f"{kind.capitalize()}, item {b}", f"{kind}-item-{b}", kind=kind, size=small,
                                on_row_tap=lambda row, b=b: self._pick_row(row, b), label_masked=False)
                        for b in range(1, MAX_BATCH + 1))
        self.items_row[:] = [pn.Row(*self.item_scores, margin=0), pn.Row(*self.item_weights, margin=0)]

    def _make_masks(self) -> None:
        self.mask_note = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width")
        self.masks_row = pn.Row(margin=0, visible=False)
        self._layout.extend([self.mask_note, self.masks_row])
        # Two side by side, wide enough for "masked" under four keys and the "(chosen)" title.
        self.masks.update({a: HeatMap(f"Causal mask, {a.replace('_', '-')}", f"mask-{a.replace('_', '-')}",
                                      kind="weights", size=max(120, self.size * 2 // 3)) for a in ALIGNMENTS})
        for heatmap in self.masks.values():  # 1 or masked: nothing for a colour bar to say
            heatmap.color_bar.visible = False
        self.masks_row[:] = list(self.masks.values())

    def _pick_row(self, row: int, item: int | None = None) -> None:
        if item is not None:
            self.state.item = item
        self.state.row = row

    @param.depends("state.result", "state.revealed", watch=True)
    def _update(self) -> None:
        layer, r = self.state.layer, self.state.result
        if r is None or layer is None:
            return
        apart = layer.B > 1 and not layer.flattened  # small multiples, one per item
        if (apart or layer.flattened) and self.batch_note is None:
            self._make_batch_part()
        if apart and not self.item_scores:
            self._make_items()
        self.scores.visible = not apart
        self.weights.visible = not apart and self.state.revealed
        if not apart:
            show_result(self.scores, self.weights, r, blocks=layer.B if layer.flattened else None)
            if not self.state.revealed:
                hide_weights_in_hover(self.scores)
        span = score_range(layer.maps) if apart else None
        for b, (scores, weights) in enumerate(zip(self.item_scores, self.item_weights, strict=True)):
            shown = apart and b < layer.B
            scores.visible, weights.visible = shown, shown and self.state.revealed
            if shown:
                show_result(scores, weights, layer.maps[b], item=b + 1, score_span=span)
                if not self.state.revealed:
                    hide_weights_in_hover(scores)
                # One colour scale for every item: one colour bar, beside the last item.
                with pn.io.unlocked():
                    scores.color_bar.visible = weights.color_bar.visible = b == layer.B - 1
        if self.batch_note is not None:
            self._show_batch_note(layer, apart)
        shown = [m for m in (*self.item_weights[:layer.B], *self.item_scores[:layer.B]) if apart] or \
            [self.weights, self.scores]
        kinds = {k for m in shown for k in m.source.data["kind"]}
        self.legend.object = legend_html(kinds, after=r.mode.mask == "after")
        # The legend and the pictures tell what the weights did: they wait for the prediction too.
        self.legend.visible = bool(kinds - {"visible"}) and self.state.revealed
        self._update_masks(layer)
        self._update_pictures()

    def _show_batch_note(self, layer: LayerResult, apart: bool) -> None:
        self.batch_note.object = (
            html("<p data-testid='batch-note'>Each of the {} batch items attends only within "
                 "itself: its own maps, one colour scale for all (click a row for its steps).</p>", layer.B)
            if apart else
            html("<p data-testid='batch-note'><b>Batch items mixed:</b> one map over the {}·{} = {} "
                 "tokens of the flattened batch; the red lines are the items' boundaries, and every "
                 "cell across them is one sequence reading another.</p>", layer.B, layer.T, layer.B * layer.T)
            if layer.flattened else "")
        self.batch_note.visible = apart or layer.flattened
        self.items_row.visible = apart

    @param.depends("state.row", watch=True)
    def _update_pictures(self) -> None:
        r = self.state.result
        if r is None:
            return
        lost = r.mode.mask == "after"
        if lost and self.lost_mass is None:
            self.lost_mass = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width")
        if self.lost_mass is not None:
            self.lost_mass.visible = lost
            if lost:
                self.lost_mass.object = lost_mass_html(r)
        # At d_k = 1 the two are one distribution: the banner says why, and no picture is needed.
        sharper = not r.mode.scale and r.d_k > 1 and 1 <= self.state.row <= r.T
        if sharper and self.scaling is None:
            self.scaling = ScalingPair(self.size)
        if self.scaling is not None:
            self.scaling.layout.visible = sharper
            if sharper:
                self.scaling.update(r, self.state.row - 1)
        made = [p for p in (self.lost_mass, self.scaling and self.scaling.layout) if p is not None]
        if len(made) != len(self.pictures):
            self.pictures[:] = made
        self.pictures.visible = (lost or sharper) and self.state.revealed

    @param.depends("state.highlight", watch=True)
    def _show_highlight(self) -> None:
        """Outline :attr:`LearnerState.highlight`'s cells in the one Weights map (in the synthetic
        coordinates of its factor ranges: column j spans j-1..j, row i of T spans T-i..T-i+1)."""
        r, cells = self.state.result, self.state.highlight
        shown = r is not None and cells is not None and self.weights.visible
        with pn.io.unlocked():
            if shown:
                row, first, last = cells
                self.highlight.update(left=first - 1, right=last, bottom=r.T - row, top=r.T - row + 1)
            self.highlight.visible = shown

    def _update_masks(self, layer: LayerResult) -> None:
        masks = alignment_masks(layer)
        if masks is not None and not self.masks:
            self._make_masks()
        for alignment, heatmap in self.masks.items():
            heatmap.visible = masks is not None
            if masks is None:
                continue
            allowed = masks[alignment]
            chosen = alignment == layer.causal_alignment
            heatmap.update(allowed.astype(float), ~allowed, masked_note="future: masked",
                           title=f"Causal mask, {alignment.replace('_', '-')}" + (" (chosen)" if chosen else ""),
                           filename=file_name("mask", alignment, f"T{layer.T}", f"Tk{layer.T_k}"))
            with pn.io.unlocked():
                heatmap.figure.outline_line_color = CHOSEN_OUTLINE if chosen else "#e5e5e5"
                heatmap.figure.outline_line_width = 4 if chosen else 1
        if self.mask_note is None:
            return
        self.mask_note.visible = self.masks_row.visible = masks is not None
        if masks is not None:
            differ = int((masks["top_left"] != masks["bottom_right"]).sum())
            self.mask_note.object = html(
                "<p data-testid='alignment-masks'>With T_q = {} queries and T_k = {} keys the causal "
                "mask needs an alignment; the two differ in {} cells (1 = may read, hatched = masked). "
                "The chosen one is outlined.</p>", layer.T, layer.T_k, differ)

    def take_pictures(self) -> pn.Column:
        """The failure modes' pictures (lost mass, the scaling pair), out of this view's layout,
        for a page that shows them elsewhere (the embed: with its readouts)."""
        self._layout.remove(self.pictures)
        return self.pictures

    def __panel__(self):
        return self._layout
