"""Row steps: one query row's computation written out in numbers, as Self-attention, "A worked
row", writes it.

raw scores → divided by √d_k → masked (−∞) → minus the largest visible score → exp → divided by
the row sum → weights → (with values) weighted values → output; in a failure mode, what that mode
did instead. Every number comes from :func:`attention_core.row_steps` (without √d_k scaling,
also of the core's correct run on the same inputs, shown beside); this module only words and
formats them. Left out: choosing the row (``state.row``, set by the page's ``Row`` control
and by clicking a heat-map row).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param

from app.learner.state import LearnerState
from app.shared.html import Markup, each, html, join
from app.shared.numbers import format_number
from app.shared.static import read_text
from attention_core import AttentionResult, row_steps, scaled_dot_product_attention

_CSS = read_text(__package__, "steps.css")



def numbers(a) -> str:
    """A row (or a row of vectors) as "[1.000, 2.000, −∞]"."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        return format_number(a)
    return "[" + ", ".join(numbers(x) for x in a) + "]"


def step_items(r: AttentionResult, row: int) -> tuple[str, list[tuple[str, str | list[str]]]]:
    """What to say about row ``row`` (from 1) of ``r``: an introduction, then (label, numbers)
    per step in the order of Self-attention, "The attention calculation", with each failure
    mode's own step where it goes wrong. With vectors (d_k > 1, or values of width d_v > 1) a
    step's numbers are a list of lines, one per source token j: the raw score term by term, the
    value, and its contribution w_j × v_j."""
    s = row_steps(r, row - 1)
    mode, n, T = r.mode, s.row + 1, r.T
    if s.along == "column":
        intro = (f"Softmax normalised column {n} instead of row {n}: the steps below are column "
                 f"{n} (key {n} as queries 1–{T} score it), not the keys query {n} reads.")
        raw = f"Raw scores q_i·k_{n} of column {n}"
    else:
        intro = f"Row {n}: query {n} against keys 1–{r.T_k}."
        raw = f"Raw scores q_{n}·k_j"
    items: list[tuple[str, str | list[str]]] = []
    # Self-Attention in Matrix Form: each score is a dot product of two d_k-vectors, term by term
    if r.d_k > 1:
        column = s.along == "column"
        q = r.keys_2d[s.row] if column else r.queries_2d[s.row]
        others = r.queries_2d if column else r.keys_2d
        other, mine = ("q", f"k_{n}") if column else ("k", f"q_{n}")
        items.append((f"{mine} = {numbers(q)}; each raw score sums d_k = {r.d_k} products "
                      f"{mine}[c] × {other}_j[c]",
                      [f"{other}_{j + 1} = {numbers(o)}: "
                       + " + ".join(f"{format_number(a)} × {format_number(b)}" for a, b in zip(q, o, strict=True))
                       + f" = {format_number(total)}"
                       for j, (o, total) in enumerate(zip(others, s.raw_scores, strict=True))]))
    items.append((raw, numbers(s.raw_scores)))
    if mode.scale:
        items.append((f"Divided by √d_k = √{r.d_k} = {format_number(s.scale)}", numbers(s.scores)))
    else:
        items.append((f"Not divided by √d_k (√{r.d_k}): the scores stay unscaled",
                      numbers(s.scores)))
    if mode.mask == "after":
        items.append(("Not masked before softmax: softmax sees every score, the future ones too",
                      numbers(s.masked_scores)))
    elif mode.mask == "none":
        items.append((f"No mask: the causal mask was forgotten, so future cells (j > {n}) are "
                      "not masked and keep their scores", numbers(s.masked_scores)))
    else:
        why = [w for w, on in (("future tokens", r.causal),
                               ("padding", r.key_is_real is not None and not r.key_is_real.all()))
               if on]
        items.append((f"Masked: −∞ at {' and '.join(why)}" if why else
                      "Masked: nothing to mask (no causal mask, no padding)",
                      numbers(s.masked_scores)))
    nothing = bool(np.isneginf(s.masked_scores).all())  # softmax got nothing it may read
    if nothing and s.along == "row":
        items.append((f"No visible key: every key of row {n} is masked, so its weights are all "
                      "zero and it sums to 0 (a failed row-sum check)", numbers(s.weights)))
    elif nothing:
        items.append((f"Column {n} is masked for every query (key {n} is padding), so softmax "
                      "gives it all zeros", numbers(s.softmax)))
        items.append((f"Weights of row {n} (row sum {format_number(s.row_sum)})", numbers(s.weights)))
    else:
        if mode.softmax == "naive":
            items.append(("Not shifted: naive softmax takes exp of the scores as they are "
                           "(no largest score subtracted)", numbers(s.shifted)))
        else:
            largest = "visible score" if mode.mask == "before" else "score softmax sees"
            items.append((f"Minus the largest {largest} ({format_number(s.shift)})", numbers(s.shifted)))
        overflow = bool(np.isposinf(s.exps).any())
        items.append(("exp: overflows to ∞ (inf), beyond float64's largest number" if overflow
                      else "exp", numbers(s.exps)))
        total = f"column sum ({format_number(s.total)})" if s.along == "column" else \
            f"row sum ({format_number(s.total)})"
        items.append((f"Divided by the {total}" + (": ∞/∞ is undefined" if overflow else ""),
                      numbers(s.softmax)))
        if s.zeroed is not None:
            padded = r.key_is_real is not None and not r.key_is_real.all()
            cells = "forbidden cells (future, padding)" if padded else "future cells"
            none = f" (row {n} has none)" if r.allowed[s.row].all() else ""
            items.append((f"Then the {cells} are zeroed after softmax{none}, without "
                          "renormalising", numbers(s.zeroed)))
            items.append(("Visible prefix sum (no renormalisation)", format_number(s.row_sum)))
        items.append((f"Weights of row {n} (row sum {format_number(s.row_sum)})", numbers(s.weights)))
    # Self-attention, "Common failure modes": beside the sharper row, the scaled one it should have been
    if not mode.scale:
        correct = row_steps(scaled_dot_product_attention(
            r.queries, r.keys, r.values, causal=r.causal, padding_mask=r.key_is_real,
            causal_alignment=r.causal_alignment, failure_mode="correct"), s.row)
        items.append((f"Correct, for comparison: scores divided by √d_k = √{r.d_k} = "
                      f"{format_number(correct.scale)}", numbers(correct.scores)))
        items.append((f"Correct weights of row {n} (row sum {format_number(correct.row_sum)}); the unscaled "
                      "weights above are sharper", numbers(correct.weights)))
    if s.no_visible_key and not (nothing and s.along == "row"):  # what the mode did instead
        did = ("the forgotten causal mask lets it read its future keys anyway"
               if mode.mask == "none" else "so none of its weight is kept")
        items.append((f"No visible key: row {n} may read no key (each is padding or in the "
                      f"future), {did}", numbers(s.weights)))
    if s.mixed is not None and s.weighted is None:  # e.g. Aᵀ V over T_q ≠ T_k: no output at all
        items.append(("No output: " + (r.output_error or "the weighted values could not be formed"),
                      numbers(s.mixed)))
    elif s.mixed is not None:
        mixed = "keys k_j (mixes keys, not values)" if mode.mix == "keys" else "values v_j"
        v = "k" if mode.mix == "keys" else "v"
        weighted = f"Weighted {'keys w_j × k_j' if mode.mix == 'keys' else 'values w_j × v_j'}"
        # Vectors: one line per source, its contribution A_ij v_j (Self-Attention in Matrix Form,
        # "Keep Four Quantities Separate")
        if s.mixed.ndim == 2:
            items.append((f"Mixed: {mixed}", [f"{v}_{j + 1} = {numbers(x)}" for j, x in enumerate(s.mixed)]))
            items.append((f"{weighted}, the contribution of each source j to row {n}",
                          [f"{format_number(w)} × {numbers(x)} = {numbers(c)}"
                           for w, x, c in zip(s.weights, s.mixed, s.weighted, strict=True)]))
        else:
            items.append((f"Mixed: {mixed}", numbers(s.mixed)))
            items.append((weighted, numbers(s.weighted)))
        items.append((f"Output of row {n}: the sum", numbers(s.output)))
    return intro, items


def _numbers_html(text: str | list[str]) -> Markup:
    """A step's numbers: one line, or (vectors) one line per source in a sub-list."""
    if isinstance(text, str):
        return html("<span class='numbers'>{}</span>", text)
    return html("<ul class='per-source'>{}</ul>", each("<li class='numbers'>{}</li>", text))


def score_steps(r: AttentionResult) -> int:
    """How many of :func:`step_items`' first steps are about scores alone (the dot products at
    d_k > 1, raw, scaled, masked): what a learner still to predict the weights may see."""
    return 3 + (r.d_k > 1)


def steps_html(result: AttentionResult | None, row: int, revealed: bool = True) -> Markup:
    """The heading "Row steps" and an ordered list of the steps of ``row`` (from 1), escaped;
    unless ``revealed``, only its score steps (:func:`score_steps`)."""
    if result is None:
        return Markup("<h3>Row steps</h3><p>No valid input yet.</p>")
    row = min(max(row, 1), result.T)
    intro, items = step_items(result, row)
    if not revealed:
        items = items[:score_steps(result)]
        intro += " The steps after the scores show once your prediction is written."
    lis = join(html("<li>{}: {}</li>", label, _numbers_html(text)) for label, text in items)
    return html("<h3>Row steps</h3><p>{}</p><ol class='row-steps' aria-label='Row steps of row {}'>{}</ol>",
                intro, row, lis)


class RowStepsView(pn.viewable.Viewer):
    """The chosen row's computation (``state.row``), step by step, for the mode in use."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.pane = pn.pane.HTML(name="row-steps", stylesheets=[_CSS], margin=(5, 10),
                                 sizing_mode="stretch_width")
        self._show()

    @param.depends("state.result", "state.row", "state.revealed", watch=True)
    def _show(self) -> None:
        # Built once per change; an unchanged text is not sent again (param compares it).
        self.pane.object = steps_html(self.state.result, self.state.row, self.state.revealed)

    def __panel__(self):
        return self.pane
