"""Two saved runs side by side: both weight heat maps, their difference, row sums.

Shared by the learner's page and the instructor's page; it reads experiment records only.
"""

from __future__ import annotations

import html

import numpy as np
import panel as pn

from app.shared.heatmap import HeatMap, format_number
from attention_core.modes import FAILURE_MODES

TABLE_CSS = """
table { border-collapse: collapse; } th, td { padding: 2px 8px; text-align: right; }
caption { font-weight: bold; text-align: left; } thead th { border-bottom: 1px solid #999; }
.check-fail { color: #b00020; } .check-pass { color: #1b5e20; } .check-na { color: #555; }
"""


def num(x: float) -> str:
    """A number as cell text, HTML-escaped."""
    return html.escape(format_number(x))


def mode_title(record) -> str:
    """The run's one name (``record.title``, see :func:`attention_core.modes.run_title`)."""
    return record.title


def masked_cells(record) -> np.ndarray:
    """Cells the run's own computation masked, bool (T, T).

    The record's ``mask`` is what a correct implementation forbids; a mode that applies no
    mask (``no_mask``) masked nothing, so its future cells are drawn as ordinary weights.
    """
    forbidden = ~np.array(record.results["mask"], dtype=bool)
    mode = FAILURE_MODES.get(record.failure_mode)
    return forbidden if mode is None or mode.mask != "none" else np.zeros_like(forbidden)


def _matrix(rows) -> np.ndarray:
    return np.array([[np.nan if x is None else x for x in row] for row in rows], dtype=float)


class ComparisonView(pn.viewable.Viewer):
    """Two saved runs side by side: both weight heat maps, their difference, row sums."""

    def __init__(self, **params):
        super().__init__(**params)
        # The three heat maps are built the first time two runs are compared: most pages never
        # compare, and each map is some 40 Bokeh models the server keeps for every open page.
        self.first: HeatMap | None = None
        self.second: HeatMap | None = None
        self.difference: HeatMap | None = None
        self._maps = pn.FlexBox()
        self.summary = pn.pane.HTML("", name="comparison-summary", stylesheets=[TABLE_CSS])
        self._pane = pn.Column(
            pn.pane.HTML("<h3>Comparison</h3>"), self.summary, self._maps, visible=False)

    def show(self, records) -> None:
        """Compare the first two of ``records`` (hide the view if fewer than two)."""
        if len(records) < 2:
            self._pane.visible = False
            return
        if self.first is None:
            self.first = HeatMap("Weights of run A", "compare-a", kind="weights", size=260)
            self.second = HeatMap("Weights of run B", "compare-b", kind="weights", size=260)
            self.difference = HeatMap("Difference A − B", "compare-diff", kind="difference",
                                      size=260)
            self._maps.objects = [self.first, self.second, self.difference]
        a, b = records[:2]
        wa, wb = _matrix(a.results["weights"]), _matrix(b.results["weights"])
        ma, mb = masked_cells(a), masked_cells(b)
        for heat_map, record, w, masked in ((self.first, a, wa, ma), (self.second, b, wb, mb)):
            after = record.mask_after_softmax
            heat_map.update(w, masked, weights=w, masked_label="zeroed" if after else "masked",
                            masked_note="zeroed after softmax" if after else "masked")
        same_shape = wa.shape == wb.shape
        if same_shape:
            self.difference.update(wa - wb, np.zeros_like(ma), weights=wa - wb)
        self.difference.visible = same_shape
        self.summary.object = self._summary(a, b, same_shape)
        self._pane.visible = True

    @staticmethod
    def _summary(a, b, same_shape: bool) -> str:
        def cells(values):
            return "".join(f"<td>{'—' if v is None else num(v)}</td>" for v in values)

        rows = []
        for tag, r in (("A", a), ("B", b)):
            name = html.escape(r.label or r.id)
            rows.append(
                f"<tr><th scope='row'>{tag}: {name} ({html.escape(mode_title(r))})</th>"
                f"<td>{num(r.total_future_weight) if r.total_future_weight is not None else '—'}"
                f"</td><td>{num(r.min_row_sum) if r.min_row_sum is not None else '—'}</td>"
                f"{cells(r.results['row_sums'])}</tr>")
        width = max(a.T, b.T)
        head = "".join(f"<th scope='col'>row {i + 1} sum</th>" for i in range(width))
        note = "" if same_shape else "<p>The runs have different token counts: no difference map.</p>"
        return (
            "<table aria-label='Comparison of row sums and future-token weight'><thead><tr>"
            "<th scope='col'>run</th><th scope='col'>total future-token weight</th>"
            f"<th scope='col'>smallest row sum</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{note}")

    def __panel__(self):
        return self._pane
