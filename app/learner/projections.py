"""Where the queries, keys and values came from, every intermediate's shape, and what the
scores are divided by.

In matrix mode: ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V`` and ``Y = H W_O`` with their shapes
and numbers (Self-Attention in Matrix Form; Review, "The Complete Layer"); every intermediate's
shape in ``B``, ``T``, ``d_model``, ``d_k``, ``d_v`` (the chapter's first "Check yourself": "Can
you derive every intermediate shape"); in every mode: the head width d_k and the division by
√d_k (Self-attention, "Queries, keys, and values"), or that the "No sqrt(d_k) scaling" mode
skipped it. Left out: the heat maps and the row steps.
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
import param

from app.learner.state import LearnerState
from app.shared.html import Markup, each, html, join
from app.shared.numbers import format_number
from app.shared.static import read_text
from attention_core import AttentionResult, LayerResult

_CSS = read_text(__package__, "projections.css")


def matrix_html(name: str, formula: str, a: np.ndarray, symbols: str = "") -> Markup:
    """One projected matrix as a small table: caption "Q = X W_Q (4 × 2)" (then its shape in
    symbols, "T×d_k", if given), a row per token."""
    a = a.reshape(len(a), -1)
    rows = join(html("<tr><th scope='row'>{}</th>{}</tr>", i + 1,
                     each("<td>{}</td>", map(format_number, row)))
                for i, row in enumerate(a))
    caption = (f"{name} = {formula}" if formula else name) + f" ({a.shape[0]} × {a.shape[1]})" \
        + (f": {symbols}" if symbols else "")
    return html("<table class='matrix' aria-label='{caption}'><caption>{caption}</caption>"
                "<tbody>{rows}</tbody></table>", caption=caption, rows=rows)


def scale_html(r: AttentionResult) -> Markup:
    """What the scores were divided by, said with this run's d_k."""
    root = math.sqrt(r.d_k)
    root_text = str(int(root)) if root.is_integer() else format_number(root)
    if not r.mode.scale:
        return html("<p data-testid='score-scale'><b>Scores S = QKᵀ</b>, not divided by √d_k = "
                    "√{} = {}: the <b>No sqrt(d_k) scaling</b> mode, so a wider head "
                    "gives larger scores and sharper weights.</p>", r.d_k, root_text)
    return html("<p data-testid='score-scale'><b>Scores S = QKᵀ / √d_k</b> with head width "
                "d_k = {d_k}: each score is q·k / √{d_k} = q·k / {root}.</p>", d_k=r.d_k, root=root_text)


def shape_list(layer: LayerResult) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every intermediate of the run as (name, shape in symbols, sizes), in the order of Review,
    "The Complete Layer": ``("S", "B×T×T", (2, 3, 3))``; ``T_q`` and ``T_k`` in cross-attention."""
    B, T, T_k, d_k, d_v, d_model = layer.B, layer.T, layer.T_k, layer.d_k, layer.d_v, layer.d_model
    q, k = ("T_q", "T_k") if layer.cross else ("T", "T")
    out: list[tuple[str, str, tuple[int, ...]]] = []
    if d_model is not None:
        out.append(("X", f"B×{q}×d_model", (B, T, d_model)))
        if layer.cross:
            out.append(("X_kv", "B×T_k×d_model", (B, T_k, d_model)))
        out.append(("W_Q, W_K", "d_model×d_k", (d_model, d_k)))
        if layer.w_v is not None:
            out.append(("W_V", "d_model×d_v", (d_model, d_v)))
        if layer.w_o is not None:
            out.append(("W_O", "d_v×d_model", layer.w_o.shape))
    out += [("Q", f"B×{q}×d_k", (B, T, d_k)), ("K", f"B×{k}×d_k", (B, T_k, d_k))]
    if d_v is not None:
        out.append(("V", f"B×{k}×d_v", (B, T_k, d_v)))
    out += [("S", f"B×{q}×{k}", (B, T, T_k)), ("A", f"B×{q}×{k}", (B, T, T_k))]
    if layer.output is not None:
        out.append(("H = A V", f"B×{q}×d_v", (B, T, d_v)))
    if layer.y is not None:
        out.append(("Y = H W_O", f"B×{q}×d_model", layer.y.shape))
    return out


def shapes_line_html(layer: LayerResult) -> Markup:
    """Every intermediate's shape, "S: B×T×T = 2×3×3", one after the other."""
    items = join(html("<li><b>{}</b>: {} = {}</li>", name, symbols, "×".join(str(n) for n in sizes))
                 for name, symbols, sizes in shape_list(layer))
    return html("<p>Shapes (Review, <em>Check yourself</em>: derive every intermediate shape):</p>"
                "<ul class='shape-list' data-testid='shapes' aria-label='Shapes'>{}</ul>", items)


def shapes_html(r: AttentionResult | None, layer: LayerResult | None = None, revealed: bool = True) -> Markup:
    """The projections (matrix mode), W_O and Y (made from the weights: only if ``revealed``),
    every shape, and the score scaling line, for the map ``r`` of ``layer`` (default ``r``
    alone); empty before any result."""
    if r is None:
        return Markup("")
    layer = layer if layer is not None else LayerResult.of(r)
    parts = []
    p = r.projection
    q, k = ("T_q", "T_k") if layer.cross else ("T", "T")
    shown = next((b for b, m in enumerate(layer.maps, 1) if m is r), 1)
    item = f" (item {shown} shown)" if layer.B > 1 and not layer.flattened else ""
    if p is not None:
        d_model, d_k = p.d_model, p.w_q.shape[1]
        shapes = (f"X: {p.T} × {d_model}, W_Q and W_K: {d_model} × {d_k}"
                  + (f", W_V: {d_model} × {p.w_v.shape[1]}" if p.w_v is not None else "")
                  + (f", W_O: {p.w_o.shape[0]} × {p.w_o.shape[1]}" if p.w_o is not None else ""))
        source = "X_kv" if p.x_kv is not None else "X"
        tables = [matrix_html("Q", "X W_Q", p.queries, f"{q}×d_k"),
                  matrix_html("K", f"{source} W_K", p.keys, f"{k}×d_k")]
        if p.values is not None:
            tables.append(matrix_html("V", f"{source} W_V", p.values, f"{k}×d_v"))
        if p.w_o is not None:
            tables.append(matrix_html("W_O", "", p.w_o, "d_v×d_model"))
            if r.y is not None and revealed:
                tables.append(matrix_html("Y", "H W_O", r.y, f"{q}×d_model"))
        parts.append(html("<p>Projections (the formula of Self-Attention in Matrix Form){}: {}.</p>"
                          "<div class='projections'>{}</div>",
                          item, shapes, join(tables)))
        for what, error in (("H", r.output_error), ("Y", r.y_error)):
            if error:
                parts.append(html("<p class='y-error' data-testid='{}-error' role='note'><b>{} not formed:</b> "
                                  "{}</p>", what.lower(), what, error))
    parts.append(shapes_line_html(layer))
    parts.append(scale_html(r))
    return html("<div class='shapes'>{}</div>", join(parts))


class ProjectionsView(pn.viewable.Viewer):
    """Q, K, V projected from X (matrix mode) and the √d_k line, above the heat maps."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.pane = pn.pane.HTML(pn.bind(shapes_html, s.param.result, s.param.layer, s.param.revealed),
                                 stylesheets=[_CSS],
                                 margin=(0, 10), sizing_mode="stretch_width")

    def __panel__(self):
        return self.pane
