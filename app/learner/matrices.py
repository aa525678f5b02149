"""The ``Scores`` and ``Weights`` heat maps of the current run; a click on a row picks it.
The weights hide while the learner has still to predict them (``state.revealed``).

One sequence (or the mixed batch's one flattened map, its items' blocks marked): the two maps
side by side. A batch: each item's maps side by side, small multiples under one colour scale.
Cross-attention with the causal mask and ``T_q != T_k``: both alignments' masks side by side,
the chosen one outlined. The maps are :class:`app.shared.heatmap.HeatMap` figures, updated by
replacing their sources' data whenever the state's run changes. Left out: the numbers'
readouts (:mod:`.checks`).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import BoxAnnotation

from app.learner.state import LearnerState
from app.shared.heatmap import HeatMap, file_name
from app.shared.html import html
from attention_core import ALIGNMENTS, MAX_BATCH, AttentionResult, LayerResult, causal_mask

MASKED_SCORE = "masked: softmax got −∞; the score above is the one before masking"
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


def show_result(scores: HeatMap, weights: HeatMap, r: AttentionResult, *, item: int | None = None,
                score_span: tuple[float, float] | None = None, blocks: int | None = None) -> None:
    """Draw ``r``'s scores and weights into the two maps."""
    # What softmax received: -inf where a mask was applied before it (none in "no mask").
    received_mask = np.isneginf(r.masked_scores)
    scores.update(r.masked_scores, received_mask, scores=r.scores, weights=r.weights,
                  masked_note=MASKED_SCORE, filename=png_name("scores", r, item),
                  value_range=score_span, blocks=blocks)
    after = r.mode.mask == "after"
    forbidden = ~r.allowed if r.mode.mask != "none" else received_mask
    weights.update(r.weights, forbidden, scores=r.scores, weights=r.weights,
                   masked_label="zeroed" if after else "masked",
                   masked_note="zeroed after softmax" if after else "masked",
                   filename=png_name("weights", r, item), blocks=blocks)


def hidden_note_html(text: str) -> str:
    """The note where the weights would be while they wait for a prediction: ``text``, escaped."""
    return html("<p role='note' data-testid='predict-first-note'>{}</p>", text)


def hide_weights_in_hover(scores: HeatMap) -> None:
    """Say in the Scores map's hover that its cells' weights wait for the prediction, as the
    Weights map does (``state.revealed``): the hover would tell them."""
    n = len(scores.source.data["weight_text"])
    with pn.io.unlocked():
        scores.source.patch({"weight_text": [(slice(0, n), [HIDDEN_WEIGHT] * n)]})


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
        self.batch_note = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width")
        self.mask_note = pn.pane.HTML(margin=(0, 10), sizing_mode="stretch_width")
        # The items' small multiples and the alignments' masks are made the first time a run
        # needs them: eight figures the default page never shows would triple its Bokeh models.
        self.item_scores: list[HeatMap] = []
        self.item_weights: list[HeatMap] = []
        self.masks: dict[str, HeatMap] = {}
        # Rows hidden with their maps: a hidden map's pane still has its margins.
        self.items_row = pn.Column(margin=0, visible=False)
        self.masks_row = pn.Row(margin=0, visible=False)
        # Where the weights would be while they wait for a prediction, saying why.
        self.hidden_note = pn.pane.HTML(
            hidden_note_html(HIDDEN_NOTE),
            visible=self.state.param.revealed.rx.not_(), width=self.size + 100, margin=(40, 10))
        self._layout = pn.Column(
            pn.Row(self.scores, self.weights, self.hidden_note, margin=0), self.batch_note, self.items_row,
            self.mask_note, self.masks_row, margin=0)
        self._update()

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
        self._update_masks(layer)

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
        self.mask_note.visible = self.masks_row.visible = masks is not None
        if masks is not None:
            differ = int((masks["top_left"] != masks["bottom_right"]).sum())
            self.mask_note.object = html(
                "<p data-testid='alignment-masks'>With T_q = {} queries and T_k = {} keys the causal "
                "mask needs an alignment; the two differ in {} cells (1 = may read, hatched = masked). "
                "The chosen one is outlined.</p>", layer.T, layer.T_k, differ)

    def __panel__(self):
        return self._layout
