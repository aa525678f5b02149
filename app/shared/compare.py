"""Two saved runs side by side: both weight heat maps, their difference, row sums.

Shared by the learner's page and the instructor's page; it reads experiment records only.
"""

from __future__ import annotations

import numpy as np
import panel as pn

from app.shared.heatmap import HeatMap, file_name
from app.shared.html import Markup, html, join
from app.shared.numbers import format_result
from app.shared.static import read_text
from attention_core.checks import CHECK_TITLES
from attention_core.modes import FAILURE_MODES

TABLE_CSS = read_text(__package__, "compare_table.css")


def failed_checks_text(record) -> str:
    """The checks a run failed by their checklist titles ("Row sums equal 1; …"), "none" if it
    failed none; a name the core no longer knows stays as it is."""
    return "; ".join(CHECK_TITLES.get(n, n) for n in record.failed_checks) or "none"


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


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def run_size(record) -> str:
    """A run's size in words: "3 tokens", "2 queries over 4 keys" (cross-attention, T_k keys)
    or "a batch of 2, each 3 tokens": how Saved runs' ticks and the comparison tell runs of
    different sizes apart."""
    one = (f"{_count(record.T, 'query', 'queries')} over {_count(record.T_k, 'key', 'keys')}"
           if record.T_k != record.T or record.cross_attention else _count(record.T, "token", "tokens"))
    return one if record.B == 1 else f"a batch of {record.B}, each {one}"


def _first_map(record) -> str:
    """The shape of a run's first map of weights and what it holds: "2×4 (2 queries over 4 keys)"."""
    rows, columns = _weights_shape(record)
    if record.B == 1:
        held = run_size(record)
    elif rows == record.B * record.T:  # batch_items_mixed: one map over every item's tokens
        held = f"{run_size(record)}, the items mixed into one map"
    else:
        held = f"item 1 of {run_size(record)}"
    return f"{rows}×{columns} ({held})"


def size_difference(a, b) -> str:
    """Why runs ``a`` and ``b`` cannot be diffed cell by cell ("" if they can): a different
    token count T, key count T_k (cross-attention) or a mixed batch gives weight matrices of
    different shapes; a different head width d_k means the two runs scored different inputs."""
    if a.T != b.T:
        return (f"The runs have different token counts: run A has {a.T} tokens and run B {b.T}, so "
                f"their weights (queries × keys of the first map) are {_first_map(a)} and {_first_map(b)} "
                "and cannot be diffed cell by cell (no difference map). Each run's own weights and "
                "row sums are shown.")
    if _weights_shape(a) != _weights_shape(b):  # cross-attention (T_k keys), or a batch's items mixed
        return (f"The runs' weights have different shapes (queries × keys of the first map): run A's are "
                f"{_first_map(a)} and run B's {_first_map(b)}, so they cannot be diffed cell by cell "
                "(no difference map). Each run's own weights and row sums are shown.")
    if a.d_k != b.d_k:
        return (f"The runs have different head widths: run A's queries and keys have d_k = "
                f"{a.d_k}, run B's d_k = {b.d_k}, so their scores come from different inputs "
                "and a cell-by-cell difference would not show what one change did (no "
                "difference map). Each run's own weights and row sums are shown.")
    return ""


def _weights_shape(record) -> tuple[int, int]:
    """Rows and columns of the first map's weights (``T × T_k``; ``B·T × B·T_k`` when the batch
    items were mixed into one map), as the record holds them in every schema version."""
    weights = record.results["weights"]
    return len(weights), len(weights[0])


def _png_name(what: str, record) -> str:
    return file_name(what, record.failure_mode, "causal" if record.causal else "bidirectional",
                     f"T{record.T}", f"dk{record.d_k}", record.id)


def _matrix(rows) -> np.ndarray:
    return np.array([[np.nan if x is None else x for x in row] for row in rows], dtype=float)


class ComparisonView(pn.viewable.Viewer):
    """Two saved runs side by side: both weight heat maps, their difference, row sums."""

    def __init__(self, **params):
        super().__init__(**params)
        # The comparison (its heading, row sums and three heat maps) is built the first time two
        # runs are compared: most pages never compare, and every open page would hold its models.
        self.first: HeatMap | None = None
        self.second: HeatMap | None = None
        self.difference: HeatMap | None = None
        self.summary: pn.pane.HTML | None = None
        self._pane = pn.Column(visible=False)

    def show(self, records, names=None) -> None:
        """Compare the first two of ``records`` (hide the view if fewer than two).

        ``names`` are what the summary calls the two runs (the learner page's "Run 1 “label”");
        by default a run's label, or its id if it has none.
        """
        if len(records) < 2:
            self._pane.visible = False
            return
        # One patch for the whole comparison (as an edit's), drawn once.
        with pn.io.hold():
            self._show_pair(records[:2], names)

    def _show_pair(self, records, names) -> None:
        a, b = records
        built = self.first is None
        if built:
            self.first = HeatMap("Weights of run A", "compare-a", kind="weights", size=260)
            self.second = HeatMap("Weights of run B", "compare-b", kind="weights", size=260)
            self.difference = HeatMap("Difference A − B", "compare-diff", kind="difference",
                                      size=260)
        wa, wb = _matrix(a.results["weights"]), _matrix(b.results["weights"])
        ma, mb = masked_cells(a), masked_cells(b)
        for tag, heat_map, record, w, masked in (("A", self.first, a, wa, ma),
                                                 ("B", self.second, b, wb, mb)):
            after = record.mask_after_softmax
            heat_map.update(w, masked, weights=w, masked_label="zeroed" if after else "masked",
                            masked_note="zeroed after softmax" if after else "masked",
                            filename=_png_name(f"weights-run-{tag}", record))
        why_not = size_difference(a, b)
        if not why_not:
            self.difference.update(
                wa - wb, np.zeros_like(ma), weights=wa - wb,
                filename=file_name("weights-A-minus-B", a.failure_mode, "vs", b.failure_mode,
                                   f"T{a.T}", f"dk{a.d_k}", a.id, b.id))
        self.difference.visible = not why_not
        names = list(names or [])[:2] or [r.label or r.id for r in (a, b)]
        summary = self._summary(a, b, why_not, names)
        if built:
            # Added only now, data and visibility set: the message that defines the new maps
            # carries them, and nothing patches a map the browser has not received yet.
            # Bokeh layouts, not a FlexBox: a FlexBox is a ReactiveHTML, and a figure added to it
            # while the comparison is hidden keeps a 0×0 frame once shown (a blank map and PNG).
            # Two maps fit side by side at 1280 px, so the difference goes under them.
            self.summary = pn.pane.HTML(summary, name="comparison-summary", stylesheets=[TABLE_CSS])
            self._pane.objects = [pn.pane.HTML("<h3>Comparison</h3>"), self.summary, pn.Column(
                pn.Row(self.first, self.second, margin=0), self.difference, margin=0)]
        else:
            self.summary.object = summary
        self._pane.visible = True

    @staticmethod
    def _summary(a, b, why_not: str, names: list[str]) -> Markup:
        width = max(a.T, b.T)

        def cells(values):
            shown = [html("<td>{}</td>", format_result(v)) for v in values]
            return join(shown + [Markup("<td>no row</td>")] * (width - len(shown)))

        rows = join(
            html("<tr><th scope='row'>{}: {} ({})</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
                 tag, name, mode_title(r), run_size(r), r.d_k, format_result(r.total_future_weight),
                 format_result(r.min_row_sum), cells(r.results["row_sums"]))
            for tag, r, name in (("A", a, names[0]), ("B", b, names[1])))
        head = join(html("<th scope='col'>row {} sum</th>", i + 1) for i in range(width))
        note = html("<p data-testid='comparison-sizes'>{}</p>", why_not) if why_not else ""
        return html(
            "{}<table aria-label='Comparison of row sums and future-token weight'><thead><tr>"
            "<th scope='col'>run</th><th scope='col'>size</th><th scope='col'>d_k</th>"
            "<th scope='col'>total future-token weight</th>"
            "<th scope='col'>smallest row sum</th>{}</tr></thead><tbody>{}</tbody></table>",
            note, head, rows)

    def __panel__(self):
        return self._pane
