"""Where the queries, keys and values came from, and what the scores are divided by.

In matrix mode: ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V`` with their shapes and numbers
(Self-Attention in Matrix Form; Review, "The Complete Layer"); in every mode: the head width d_k
and the division by √d_k (Self-attention, "Queries, keys, and values"), or that the
"No sqrt(d_k) scaling" mode skipped it. Left out: the heat maps and the row steps.
"""

from __future__ import annotations

import math

import numpy as np
import panel as pn
import param

from app.learner.state import LearnerState
from app.shared.html import Markup, html, join
from app.shared.numbers import format_number
from app.shared.static import read_text
from attention_core import AttentionResult

_CSS = read_text(__package__, "projections.css")


def matrix_html(name: str, formula: str, a: np.ndarray) -> Markup:
    """One projected matrix as a small table: caption "Q = X W_Q (4 × 2)", a row per token."""
    a = a.reshape(len(a), -1)
    rows = join(html("<tr><th scope='row'>{}</th>{}</tr>", i + 1,
                     join(html("<td>{}</td>", format_number(x)) for x in row))
                for i, row in enumerate(a))
    caption = f"{name} = {formula} ({a.shape[0]} × {a.shape[1]})"
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


def shapes_html(r: AttentionResult | None) -> Markup:
    """The projections (matrix mode) and the score scaling line; empty before any result."""
    if r is None:
        return Markup("")
    parts = []
    p = r.projection
    if p is not None:
        d_model, d_k = p.d_model, p.w_q.shape[1]
        shapes = (f"X: {p.T} × {d_model}, W_Q and W_K: {d_model} × {d_k}"
                  + (f", W_V: {d_model} × {p.w_v.shape[1]}" if p.w_v is not None else ""))
        tables = [matrix_html("Q", "X W_Q", p.queries), matrix_html("K", "X W_K", p.keys)]
        if p.values is not None:
            tables.append(matrix_html("V", "X W_V", p.values))
        parts.append(html("<p>Projections (the formula of Self-Attention in Matrix Form): {}.</p>"
                          "<div class='projections'>{}</div>",
                          shapes, join(tables)))
    parts.append(scale_html(r))
    return html("<div class='shapes'>{}</div>", join(parts))


class ProjectionsView(pn.viewable.Viewer):
    """Q, K, V projected from X (matrix mode) and the √d_k line, above the heat maps."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.pane = pn.pane.HTML(pn.bind(shapes_html, self.state.param.result), stylesheets=[_CSS],
                                 margin=(0, 10), sizing_mode="stretch_width")

    def __panel__(self):
        return self.pane
