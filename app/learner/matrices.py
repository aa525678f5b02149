"""The ``Scores`` and ``Weights`` heat maps of the current result; a click on a row picks it.

The maps are :class:`app.shared.heatmap.HeatMap` figures, updated by replacing their sources'
data whenever the state's result changes. Left out: the numbers' readouts (:mod:`.checks`).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param

from app.learner.state import LearnerState
from app.shared.heatmap import HeatMap, file_name
from attention_core import AttentionResult

MASKED_SCORE = "masked: softmax got −∞; the score above is the one before masking"


def png_name(what: str, r: AttentionResult) -> str:
    """What a heat map's PNG shows, as its file name: ``weights-mask-after-softmax-causal-T3-dk1``
    (plus ``-padded`` when a key is padding)."""
    padded = r.key_is_real is not None and not r.key_is_real.all()
    return file_name(what, r.mode.name, "causal" if r.causal else "bidirectional", f"T{r.T}",
                     f"dk{r.d_k}", "padded" if padded else None)


class MatricesView(pn.viewable.Viewer):
    """Both heat maps side by side, each with its mirror table."""

    state = param.ClassSelector(class_=LearnerState)
    size = param.Integer(default=300, bounds=(120, None), constant=True,
                         doc="Height of each map in pixels (its figure is 100 px wider).")

    def __init__(self, **params):
        super().__init__(**params)
        pick = self._pick_row
        self.scores = HeatMap("Scores", "scores", kind="scores", size=self.size, on_row_tap=pick)
        self.weights = HeatMap("Weights", "weights", kind="weights", size=self.size, on_row_tap=pick)
        self._layout = pn.Row(self.scores, self.weights, margin=0)
        self._update()

    def _pick_row(self, row: int) -> None:
        self.state.row = row

    @param.depends("state.result", watch=True)
    def _update(self) -> None:
        r = self.state.result
        if r is None:
            return
        # What softmax received: -inf where a mask was applied before it (none in "no mask").
        received_mask = np.isneginf(r.masked_scores)
        self.scores.update(r.masked_scores, received_mask, scores=r.scores, weights=r.weights,
                           masked_note=MASKED_SCORE, filename=png_name("scores", r))
        after = r.mode.mask == "after"
        forbidden = ~r.allowed if r.mode.mask != "none" else received_mask
        self.weights.update(r.weights, forbidden, scores=r.scores, weights=r.weights,
                            masked_label="zeroed" if after else "masked",
                            masked_note="zeroed after softmax" if after else "masked",
                            filename=png_name("weights", r))

    def __panel__(self):
        return self._layout
