"""One row's computation, step by step, and whether an input can show a mode's failure.

:func:`row_steps` lays out the order of Self-attention, "A worked row", for one query row (raw
score, divided by ``sqrt(d_k)``, masked, minus the largest visible score, exp, divided by the sum,
weights, weighted values, output) by slicing the arrays the pipeline kept: nothing is recomputed
(but the raw scores' terms ``q_i[c] * k_j[c]``), so what a view shows is what the result holds. With
vectors the weighted values are each source's contribution vector ``A_ij v_j`` (Self-Attention in
Matrix Form, "Keep Four Quantities Separate"). :func:`exposure` says in one sentence why an input
cannot show the failure of the mode it ran in, so a page can offer an input that does.

Left out: formatting (a view rounds and labels), and steps of more than one row at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from attention_core.attention import AttentionResult
    from attention_core.layer import LayerResult

# exp(x) is inf in float64 above log(largest float64), about 709.78.
EXP_OVERFLOW = float(np.log(np.finfo(np.float64).max))


@dataclass(frozen=True)
class RowSteps:
    """The steps of Self-attention, "A worked row", for one query row, as the pipeline computed them.

    "The slice" is what softmax normalised: query row ``row``, or key column ``row`` in the
    ``wrong_axis`` mode (``along == "column"``). Vectors have shape (T,) unless said otherwise.

    Attributes
    ----------
    row : int
        The query row, counted from 0.
    along : {"row", "column"}
        Which slice softmax normalised: ``"column"`` only in the ``wrong_axis`` mode.
    raw_scores : numpy.ndarray
        ``q · k`` along the slice, before dividing.
    scale : float
        What the scores were divided by: ``sqrt(d_k)``, 1.0 when the mode skips scaling.
    scores : numpy.ndarray
        ``raw_scores / scale`` (computed dividing the query first; equal up to rounding).
    masked_scores : numpy.ndarray
        What softmax received: ``-inf`` at cells masked before softmax.
    shift : float
        Subtracted before ``exp``: the largest visible score; 0.0 for the naive softmax or a
        slice with nothing visible.
    shifted : numpy.ndarray
        ``masked_scores - shift``.
    exps : numpy.ndarray
        ``exp(shifted)``; may hold ``inf`` in the naive mode.
    total : float
        ``exps.sum()``; may be ``inf`` in the naive mode, 0.0 with nothing visible.
    softmax : numpy.ndarray
        ``exps / total`` before any zeroing (all zeros with nothing visible).
    zeroed : numpy.ndarray or None
        ``mask_after_softmax`` only: ``softmax`` with forbidden cells set to 0, not renormalised.
    weights : numpy.ndarray
        The final weights of query row ``row``.
    row_sum : float
        Their sum.
    mixed : numpy.ndarray, shape (T,) or (T, d), or None
        What the weights mixed (values; keys in ``keys_as_values``); ``None`` without values.
    weighted : numpy.ndarray, shape (T,) or (T, d), or None
        ``weights[j] * mixed[j]``, each source's contribution.
    output : float or numpy.ndarray of shape (d,), or None
        The row's output, the sum of ``weighted``.
    no_visible_key : bool
        The row may read no key (every key is padding or in the future): its weights cannot
        sum to 1 and the ``row_sums`` check names it.
    d_k : int
        Head width: the number of terms in each raw score.
    products : numpy.ndarray, shape (T, d_k)
        The raw scores term by term, ``products[j, c] = q_i[c] * k_j[c]`` (``q_j[c] * k_i[c]``
        along a column), so ``products.sum(axis=-1)`` is ``raw_scores`` up to rounding. The one
        step computed here rather than sliced: the pipeline never held the terms apart.
    """

    row: int
    along: Literal["row", "column"]
    raw_scores: np.ndarray
    scale: float
    scores: np.ndarray
    masked_scores: np.ndarray
    shift: float
    shifted: np.ndarray
    exps: np.ndarray
    total: float
    softmax: np.ndarray
    zeroed: np.ndarray | None
    weights: np.ndarray
    row_sum: float
    mixed: np.ndarray | None
    weighted: np.ndarray | None
    output: float | np.ndarray | None
    no_visible_key: bool
    d_k: int
    products: np.ndarray


def row_steps(result: AttentionResult, i: int) -> RowSteps:
    """The steps of query row ``i`` of ``result``, sliced from the arrays it kept.

    Parameters
    ----------
    result : AttentionResult
        A result of :func:`~attention_core.attention.scaled_dot_product_attention`.
    i : int
        Query row, counted from 0, ``0 <= i < T``.

    Returns
    -------
    RowSteps
        The steps of Self-attention, "A worked row", for that row, in the mode the result was
        computed in.

    Raises
    ------
    IndexError
        If ``i`` is not a row of ``result``.

    Examples
    --------
    Self-attention, "A worked row" (row 2 of queries 1, 1, 1, keys 1, 2, 9, values 10, 20, 100):

    >>> from attention_core import scaled_dot_product_attention
    >>> s = row_steps(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100]), 1)
    >>> s.masked_scores.tolist(), s.shift, s.shifted.tolist()
    ([1.0, 2.0, -inf], 2.0, [-1.0, 0.0, -inf])
    >>> np.round(s.weights, 3).tolist(), round(float(s.output), 2)
    ([0.269, 0.731, 0.0], 17.31)
    """
    r = result
    if not 0 <= i < r.T:
        raise IndexError(f"row {i} is not a row of a {r.T}-token result (rows count from 0)")
    along = "column" if r.mode.softmax_axis == 0 else "row"
    s = (slice(None), i) if along == "column" else (i, slice(None))  # the slice softmax normalised
    return RowSteps(
        row=i,
        along=along,
        raw_scores=r.raw_scores[s],
        scale=float(r.scale),
        scores=r.scores[s],
        masked_scores=r.masked_scores[s],
        shift=float(r.shift[i]),
        shifted=r.shifted[s],
        exps=r.exps[s],
        total=float(r.totals[i]),
        softmax=r.softmax_weights[s],
        zeroed=r.weights[i] if r.mode.mask == "after" else None,
        weights=r.weights[i],
        row_sum=float(r.row_sums[i]),
        mixed=r.mixed,
        weighted=None if r.contributions is None else r.contributions[i],
        output=None if r.output is None else (float(r.output[i]) if r.output.ndim == 1 else r.output[i]),
        no_visible_key=not r.allowed[i].any(),
        d_k=int(r.d_k),
        # [d_k] * [T, d_k] -> [T, d_k]: one query against every key (or every query against one key)
        products=r.queries_2d * r.keys_2d[i] if along == "column" else r.queries_2d[i] * r.keys_2d,
    )


def _layer_exposure(layer: LayerResult) -> str | None:
    """:func:`exposure` over a whole layer: judged on the layer's checks (a flattened batch's
    score shape and independence are the layer's, not its map's), else each item's reason."""
    failed = set(layer.failed_checks)
    padding_failure = {"row_sums"} if any(not m.allowed.any(axis=-1).all() for m in layer.maps) else set()
    mode = layer.mode
    if mode.name == "correct" or (mode.breaks <= failed and failed - mode.breaks <= padding_failure):
        return None
    if layer.flattened:  # batch_items_mixed over B > 1, yet a check it breaks passed
        return "Changing one item moves no other item's weights or output here, so the mixing cannot be seen."
    reasons = [exposure(m) for m in layer.maps]
    if len({r for r in reasons if r is not None}) <= 1:
        return next((r for r in reasons if r is not None), None)
    return " ".join(f"Item {b}: {r}" for b, r in enumerate(reasons, 1) if r is not None)


def exposure(result: AttentionResult | LayerResult) -> str | None:
    """Why this input cannot show the failure of the mode it ran in, or ``None`` if it does.

    Parameters
    ----------
    result : AttentionResult or LayerResult
        A computed result, or a whole layer (:func:`~attention_core.layer.attention_layer`),
        judged on the layer's checks: a batch of two shows ``batch_items_mixed`` although its
        flattened map alone cannot (one item's reason, or each item's, otherwise).

    Returns
    -------
    str or None
        ``None`` for the ``correct`` mode, and when the failed checks are exactly the mode's
        ``breaks`` (a row with no visible key, which fails ``row_sums`` in every mode, does not
        count against that). Otherwise one plain sentence, e.g. "No values are given, so there
        is no output to get wrong."

    Examples
    --------
    Scalar inputs (``d_k = 1``) cannot show a missing ``sqrt(d_k)``; a wider head can:

    >>> from attention_core import scaled_dot_product_attention
    >>> exposure(scaled_dot_product_attention([1, 2], [3, 4], failure_mode="no_scaling"))[:48]
    'd_k = 1, so dividing by sqrt(1) changes nothing;'
    >>> exposure(scaled_dot_product_attention([[1, 1, 1, 1]], [[1, 0, 1, 0]], failure_mode="no_scaling"))
    """
    if hasattr(result, "maps"):  # a LayerResult; duck-typed, so this module imports no layer
        return _layer_exposure(result)
    r = result
    mode = r.mode
    failed = set(r.failed_checks)
    # A row with no visible key fails row_sums in every mode; that is padding's doing.
    padding_failure = {"row_sums"} if not r.allowed.any(axis=-1).all() else set()
    if mode.name == "correct" or (mode.breaks <= failed and failed - mode.breaks <= padding_failure):
        return None
    if not r.allowed.any():
        return "Every key is padding, so no row reads anything and there is nothing to get wrong."
    if mode.name == "keys_as_values":
        if r.values is None:
            return "No values are given, so there is no output to get wrong."
        if np.array_equal(r.values, r.keys):
            return "The values equal the keys here, so mixing the keys gives the same output."
    if mode.name == "no_scaling":
        if r.d_k == 1:
            return ("d_k = 1, so dividing by sqrt(1) changes nothing; a head of width d_k = 2 or "
                    "more (vector or matrix mode) shows the sharper rows.")
        if not r.scores.any():
            return "Every score is 0 here, so dividing by sqrt(d_k) changes nothing."
    if mode.name == "naive_softmax" and not (r.masked_scores > EXP_OVERFLOW).any():
        return (f"No score is large enough to overflow exp (above about {int(EXP_OVERFLOW)}), "
                "so the naive softmax still gives valid weights.")
    if mode.name == "mask_after_softmax":
        if r.T == 1:
            return "There is one token, so no cell is in the future and there is nothing to mask."
        if r.allowed.all():
            return "The causal mask is off and no key is padding, so there is nothing to mask."
        return ("The masked scores are so far below the visible ones that softmax gives them next "
                "to no weight, so zeroing them afterwards loses nothing.")
    if mode.name == "no_mask":
        if r.T == 1:
            return "There is one token, so no cell is in the future and there is no causal mask to forget."
        if not r.causal:
            return "The causal mask is off, so there is no causal mask to forget."
        return ("The future cells are padding or score so far below the visible ones that they get "
                "next to no weight, so forgetting the causal mask lets nothing through.")
    if mode.name == "batch_items_mixed":
        return ("One batch item, so there is no other sequence to mix with: a batch of 2 or 3 "
                "sequences shows items reading each other.")
    if mode.name == "output_projection_transposed":
        if r.projection is None or r.projection.w_o is None:
            return "No W_O is given, so there is no output projection to get wrong."
        return "W_O equals its transpose here, so H W_Oᵀ = H W_O; a W_O that is not symmetric shows it."
    if mode.name == "rows_and_columns_swapped":
        if r.values is None:
            return "No values are given, so there is no output to get wrong."
        return "Aᵀ V happens to equal A V here (as with one token), so no check can tell them apart."
    if mode.name == "wrong_axis":
        return ("Here softmax down each key column happens to leave every row summing to 1 too "
                "(as with one token), so no check can tell the wrong axis apart.")
    names = ", ".join(sorted(mode.breaks))
    return f"This input cannot show what {mode.title} gets wrong: the checks it breaks ({names}) pass."
