"""Masked scaled dot-product attention for one sequence: the pipeline the workbench shows.

One pipeline, steered by a :class:`~attention_core.modes.FailureMode`, computes the
four steps of Self-attention, "The attention calculation" (score, mask, normalise, mix values)
and keeps every intermediate so the UI and the checks can show where a broken mode goes wrong.
Reference: Vaswani et al. 2017, "Attention Is All You Need", eq. 1; Self-Attention in Matrix Form
for the matrix form; Self-attention, "Common failure modes", for the failure modes.

Queries and keys may differ in length (cross-attention, ``T_q != T_k``); then a causal mask
needs a named alignment (:data:`~attention_core.masks.ALIGNMENTS`). Projections from X and the
output projection ``Y = H W_O`` (matrix mode) are in :mod:`attention_core.projection`, a batch in
:mod:`attention_core.layer`; both call this pipeline.

Left out: multiple heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from attention_core.checks import Check, run_checks
from attention_core.masks import ALIGNMENTS, combine_masks, future_cells
from attention_core.modes import CORRECT, MASK_AFTER_SOFTMAX, FailureMode, get_mode
from attention_core.softmax import softmax_steps
from attention_core.validation import MAX_TOKENS, AttentionInputError, key_padding, token_array


@dataclass(frozen=True)
class Projection:
    """The matrix-mode inputs of a run and what they project to; all float64.

    Defined here, beside the :class:`AttentionResult` that holds it, so that
    :mod:`attention_core.projection` (which builds it) imports this module and not the reverse.

    Attributes
    ----------
    x : numpy.ndarray, shape (T, d_model)
        One row per token.
    w_q, w_k : numpy.ndarray, shape (d_model, d_k)
    w_v : numpy.ndarray, shape (d_model, d_v), or None
    queries, keys : numpy.ndarray, shape (T, d_k)
        ``x @ w_q`` and ``x @ w_k``.
    values : numpy.ndarray, shape (T_k, d_v), or None
        ``x_kv @ w_v`` (``x @ w_v`` in self-attention).
    w_o : numpy.ndarray, shape (d_v, d_model), or None
        The output projection, ``Y = H W_O`` (Review, "The Complete Layer").
    x_kv : numpy.ndarray, shape (T_k, d_model), or None
        Cross-attention only: the sequence keys and values are projected from.
    """

    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray | None
    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray | None
    w_o: np.ndarray | None = None
    x_kv: np.ndarray | None = None

    @property
    def T(self) -> int:
        """Number of tokens (rows of X)."""
        return self.x.shape[0]

    @property
    def d_model(self) -> int:
        """Width of X (columns), the rows of every W."""
        return self.x.shape[1]


@dataclass(frozen=True)
class AttentionResult:
    """Everything one attention computation produced, intermediates included.

    All arrays are float64 unless said otherwise; ``T`` is the number of queries (tokens) and
    ``T_k`` the number of keys (``T_k == T`` in self-attention), rows are query positions and
    columns key positions; the shapes below write ``(T, T)`` for ``(T, T_k)``. "Slice" means
    what softmax normalised: query row ``i``, or key column ``i`` in the ``wrong_axis`` mode.

    Attributes
    ----------
    queries, keys : numpy.ndarray, shape (T,) or (T, d_k)
        The inputs as given (1-D means scalar mode, ``d_k = 1``).
    values : numpy.ndarray, shape (T,) or (T, d_v), or None
    d_k : int
        Head width.
    causal : bool
        Whether a causal mask was asked for.
    key_is_real : numpy.ndarray of bool, shape (T,), or None
        The key-padding mask, if one was given.
    mode : FailureMode
        How the pipeline computed (``correct`` or a deliberate failure).
    allowed : numpy.ndarray of bool, shape (T, T)
        Cells the requested masks allow (what a correct implementation lets through).
    raw_scores : numpy.ndarray, shape (T, T)
        ``q_i · k_j`` before any scaling.
    scale : float
        What the scores were divided by: ``sqrt(d_k)``, or 1.0 in the ``no_scaling`` mode.
    scores : numpy.ndarray, shape (T, T)
        ``q_i · k_j / scale``, unmasked; computed as ``(q_i / scale) · k_j``, so it equals
        ``raw_scores / scale`` up to rounding and stays finite where only the raw product is not.
    masked_scores : numpy.ndarray, shape (T, T)
        What softmax actually received: ``-inf`` at the cells masked before softmax.
    shift : numpy.ndarray, shape (T,)
        Subtracted before ``exp`` in each slice: its largest visible score (0.0 for the naive
        softmax, or a slice with nothing visible).
    shifted : numpy.ndarray, shape (T, T)
        ``masked_scores`` minus each slice's shift.
    exps : numpy.ndarray, shape (T, T)
        ``exp(shifted)``; may hold ``inf`` in the ``naive_softmax`` mode.
    totals : numpy.ndarray, shape (T,)
        Each slice's sum of ``exps``.
    softmax_weights : numpy.ndarray, shape (T, T)
        Softmax's output, before the ``mask_after_softmax`` mode zeroes forbidden cells.
    weights : numpy.ndarray, shape (T, T)
        Attention weights; may hold ``nan`` only in the ``naive_softmax`` mode.
    row_sums : numpy.ndarray, shape (T,)
        ``weights.sum(axis=-1)``.
    future_weight : numpy.ndarray, shape (T,)
        Each row's weight on future cells ``j > i`` (the future-token weight).
    mixed : numpy.ndarray, shape (T,) or (T, d), or None
        What the weights mixed: the values (the keys in the ``keys_as_values`` mode); ``None``
        without values.
    output : numpy.ndarray, shape (T,) or (T, d), or None
        ``weights @ mixed``; 1-D when ``mixed`` is 1-D.
    contributions : numpy.ndarray, shape (T, T) or (T, T, d), or None
        ``weights[i, j] * mixed_j``, the contribution of source ``j`` to row ``i``.
    checks : tuple of Check
        The checks, in the order of Review, "Audit Order".
    projection : Projection or None
        Matrix mode only (:func:`~attention_core.projection.self_attention`): X, W_Q, W_K, W_V,
        of which ``queries``, ``keys`` and ``values`` are the projections, W_O and X_kv.
    causal_alignment : {"top_left", "bottom_right"} or None
        How the causal mask lines queries up with keys when ``T != T_k``; ``None`` when not asked.
    y : numpy.ndarray, shape (T, d_model), or None
        ``Y = H W_O`` (``H W_O^T`` in the ``output_projection_transposed`` mode); ``None``
        without W_O or where the product cannot be formed (see ``y_error``).
    y_error : str or None
        Why ``y`` could not be formed (a shape mismatch of a broken mode).
    output_error : str or None
        Why ``output`` could not be formed although values were given (``A^T V`` when
        ``T != T_k``).
    """

    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray | None
    d_k: int
    causal: bool
    key_is_real: np.ndarray | None
    mode: FailureMode
    allowed: np.ndarray
    raw_scores: np.ndarray
    scale: float
    scores: np.ndarray
    masked_scores: np.ndarray
    shift: np.ndarray
    shifted: np.ndarray
    exps: np.ndarray
    totals: np.ndarray
    softmax_weights: np.ndarray
    weights: np.ndarray
    row_sums: np.ndarray
    future_weight: np.ndarray
    mixed: np.ndarray | None
    output: np.ndarray | None
    contributions: np.ndarray | None
    checks: tuple[Check, ...] = field(default=())
    projection: Projection | None = None
    causal_alignment: str | None = None
    y: np.ndarray | None = None
    y_error: str | None = None
    output_error: str | None = None

    @property
    def T(self) -> int:
        """Number of queries (tokens)."""
        return len(self.queries)

    @property
    def T_k(self) -> int:
        """Number of keys: ``T`` in self-attention, the length of X_kv in cross-attention."""
        return len(self.keys)

    @property
    def first_incorrect(self) -> Check | None:
        """The first failed check in the order of Review, "Audit Order" (``None`` if none failed):
        the object to inspect first."""
        return next((c for c in self.checks if c.passed is False), None)

    @property
    def d_v(self) -> int | None:
        """Width of the values (1 when one number per token), ``None`` without values."""
        return None if self.values is None else (1 if self.values.ndim == 1 else self.values.shape[1])

    @property
    def input_mode(self) -> Literal["scalar", "vector", "matrix"]:
        """How the inputs were given: ``"matrix"`` (projected from X), ``"vector"`` (any 2-D input,
        ``(T, 1)`` included) or ``"scalar"`` (one number per token everywhere)."""
        if self.projection is not None:
            return "matrix"
        two_d = self.queries.ndim == 2 or (self.values is not None and self.values.ndim == 2)
        return "vector" if two_d else "scalar"

    @property
    def queries_2d(self) -> np.ndarray:
        """Queries as (T, d_k)."""
        return self.queries.reshape(len(self.queries), -1)

    @property
    def keys_2d(self) -> np.ndarray:
        """Keys as (T_k, d_k)."""
        return self.keys.reshape(len(self.keys), -1)

    @property
    def values_2d(self) -> np.ndarray | None:
        """Values as (T_k, d_v), or None."""
        return None if self.values is None else self.values.reshape(len(self.values), -1)

    @property
    def total_future_weight(self) -> float:
        """Sum of all weight on future cells (``nan`` if a weight is not finite)."""
        return float(self.future_weight.sum())

    @property
    def min_row_sum(self) -> float:
        """The smallest row sum."""
        return float(self.row_sums.min())

    @property
    def max_row_sum_error(self) -> float:
        """The largest ``|row sum - 1|``."""
        return float(np.abs(self.row_sums - 1.0).max())

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """Names of the checks that failed, in audit order."""
        return tuple(c.name for c in self.checks if c.passed is False)


def _resolve_mode(failure_mode: str | FailureMode, mask_after_softmax: bool) -> FailureMode:
    mode = failure_mode if isinstance(failure_mode, FailureMode) else get_mode(failure_mode)
    if mask_after_softmax:
        if mode not in (CORRECT, MASK_AFTER_SOFTMAX):
            raise ValueError(
                f"mask_after_softmax=True cannot be combined with failure_mode={mode.name!r}"
            )
        return MASK_AFTER_SOFTMAX
    return mode


def _scores(queries: np.ndarray, keys: np.ndarray, scale: float) -> np.ndarray:
    """``(q_i / scale) · k_j`` for [T, d_k] queries and [T_k, d_k] keys, refused where not finite."""
    # Dividing each query before the dot product keeps every term at the scaled size, so a
    # score whose scaled value is finite cannot overflow on the way there.
    with np.errstate(over="ignore", invalid="ignore"):
        scores = (queries / scale) @ keys.T  # [T, d_k] @ [d_k, T_k] -> [T, T_k]
    if not np.isfinite(scores).all():
        i, j = (int(x) + 1 for x in np.argwhere(~np.isfinite(scores))[0])
        raise AttentionInputError(
            "queries",
            f"The score of query {i} with key {j} overflows float64 (beyond ±1.8e308); "
            "use smaller queries or keys",
            i,
        )
    return scores


def scaled_dot_product_attention(
    queries: object,
    keys: object,
    values: object = None,
    *,
    causal: bool = True,
    mask_after_softmax: bool = False,
    padding_mask: object = None,
    failure_mode: str | FailureMode = "correct",
    causal_alignment: str | None = None,
) -> AttentionResult:
    """Masked scaled dot-product attention for one sequence, with every intermediate kept.

    ``scores = Q K^T / sqrt(d_k)``; ``weights = softmax_last(scores + M)`` with ``M = -inf`` at
    forbidden cells; ``output = weights @ V`` (Vaswani et al. 2017, eq. 1;
    Self-Attention in Matrix Form, "Mask Before Normalizing"; Self-attention, "The attention
    calculation").

    Parameters
    ----------
    queries : array_like of float, shape (T,) or (T, d_k)
        1-D means scalar mode (one number per token, ``d_k = 1``). ``1 <= T <= 16``.
    keys : array_like of float, shape (T_k,) or (T_k, d_k)
        As many dimensions and the same width as the queries; ``T_k != T`` is cross-attention
        (Review, "Distinctions to Keep"). ``1 <= T_k <= 16``.
    values : array_like of float, shape (T_k,) or (T_k, d_v), optional
        One per key; mixed by the weights into ``output``.
    causal : bool, default True
        Forbid future cells ``j > i`` (as ``causal_alignment`` says when ``T_k != T``).
    mask_after_softmax : bool, default False
        The deliberately broken mode of Self-attention, "A worked row": softmax over the whole
        row, then zero the forbidden cells without renormalising. Same as
        ``failure_mode="mask_after_softmax"``.
    padding_mask : array_like of bool, shape (T,), optional
        ``True`` for real tokens; ``False`` keys are forbidden to every row. Applied before
        softmax in every mode except ``mask_after_softmax``, ``no_mask`` included: that mode
        forgets the causal mask, a different rule from padding (Review, "Distinctions to Keep").
    failure_mode : str or FailureMode, default "correct"
        One of :data:`attention_core.modes.FAILURE_MODES`.
    causal_alignment : {"top_left", "bottom_right"}, optional
        Required with ``causal`` when ``T_k != T``: top-left is PyTorch's ``is_causal``,
        bottom-right key-value-cache decoding (:data:`~attention_core.masks.ALIGNMENTS`).

    Returns
    -------
    AttentionResult
        Scores, masked scores, weights, row sums, future-token weight, output, contributions
        and the checks in the order of Review, "Audit Order".

    Raises
    ------
    ValueError
        :class:`~attention_core.validation.AttentionInputError` for a bare number, empty,
        ragged, mismatched, boolean, non-numeric or non-finite input, more than 16 tokens,
        scaled scores that overflow float64, or a causal mask over ``T != T_k`` without an
        alignment (or with an unknown one);
        the message names the field and the token (from 1). Plain ``ValueError`` for an
        unknown or contradictory failure mode.

    Examples
    --------
    Self-attention, "A worked row" (row 2 of a causal head, keys 1, 2, 9, values 10, 20, 100):

    >>> r = scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100])
    >>> np.round(r.weights[1], 3).tolist(), round(float(r.output[1]), 2)
    ([0.269, 0.731, 0.0], 17.31)
    """
    return attend(queries, keys, values, causal=causal, mask_after_softmax=mask_after_softmax,
                  padding_mask=padding_mask, failure_mode=failure_mode, causal_alignment=causal_alignment)


def _alignment(causal: bool, T: int, T_k: int, alignment: str | None) -> str | None:
    """The causal alignment as given, refused when unknown or missing where it matters."""
    if alignment is not None and alignment not in ALIGNMENTS:
        raise AttentionInputError(
            "causal_alignment",
            f"unknown causal alignment {alignment!r}; choose {' or '.join(ALIGNMENTS)}",
        )
    if causal and T != T_k and alignment is None:
        raise AttentionInputError(
            "causal_alignment",
            f"{T} queries and {T_k} keys: say which future a causal mask removes, top_left (query i "
            "reads keys 1 to i, PyTorch's is_causal) or bottom_right (the last query reads every "
            "key, as in key-value-cache decoding)",
        )
    return alignment


def _mix(weights: np.ndarray, mixed: np.ndarray, transposed: bool):
    """``(output, contributions, error)``: ``A @ mixed`` (or ``A^T @ mixed``) and each source's part."""
    a = weights.T if transposed else weights  # the swapped mode reads columns as rows
    if a.shape[1] != mixed.shape[0]:
        return None, None, (f"H = Aᵀ V cannot be formed: Aᵀ is {a.shape[0]}×{a.shape[1]} but V has "
                            f"{mixed.shape[0]} rows")
    # a[i, j] * mixed_j: [T, T_k] * [T_k] -> [T, T_k], or [T, T_k, 1] * [1, T_k, d] -> [T, T_k, d]
    contributions = a * mixed if mixed.ndim == 1 else a[:, :, None] * mixed[None, :, :]
    return a @ mixed, contributions, None  # [T, T_k] @ [T_k(, d)] -> [T(, d)]


def _output_projection(h: np.ndarray | None, projection: Projection | None, mode: FailureMode):
    """``(Y, error)``: ``Y = H W_O`` (``H W_O^T`` when the mode transposes it), Review, "The Complete Layer"."""
    if projection is None or projection.w_o is None or h is None:
        return None, None
    w = projection.w_o.T if mode.output_projection == "transposed" else projection.w_o
    name = "W_Oᵀ" if mode.output_projection == "transposed" else "W_O"
    if h.shape[1] != w.shape[0]:
        return None, (f"Y = H {name} cannot be formed: H is {h.shape[0]}×{h.shape[1]} but {name} is "
                      f"{w.shape[0]}×{w.shape[1]}")
    with np.errstate(over="ignore", invalid="ignore"):
        y = h @ w  # [T, d_v] @ [d_v, d_model] -> [T, d_model]
    # A nan in H (the naive softmax's invalid weights) carries into Y: the mode's doing, which
    # finite_weights reports, not an overflow of the product.
    if np.isfinite(h).all() and not np.isfinite(y).all():
        token = int(np.argwhere(~np.isfinite(y))[0][0]) + 1
        raise AttentionInputError("W_O", f"Y = H {name} overflows float64 at token {token} (beyond "
                                  "±1.8e308); use smaller numbers in W_O or W_V", token)
    return y, None


def attend(queries: object, keys: object, values: object = None, *, causal: bool = True,
           mask_after_softmax: bool = False, padding_mask: object = None,
           failure_mode: str | FailureMode = "correct", projection: Projection | None = None,
           causal_alignment: str | None = None, masks: tuple | None = None,
           audit: bool = True) -> AttentionResult:
    """:func:`scaled_dot_product_attention` for the package: ``projection`` (matrix mode's X and
    W's, of which the inputs are the projections) is kept on the result before it is audited,
    so the ``input_shapes`` check covers it. ``masks`` is :mod:`attention_core.layer`'s for a
    flattened batch: ``(allowed, applied, future)``, the cells the rule allows, the cells the
    broken pipeline lets through before softmax, and the future cells. ``audit=False`` leaves
    ``checks`` empty, for a run only compared and then dropped (the layer's independence check
    compares its weights and outputs). Same parameters, returns and raises otherwise."""
    mode = _resolve_mode(failure_mode, mask_after_softmax)
    # A flattened batch is one sequence of up to B·T tokens, each item already checked.
    limit = MAX_TOKENS if masks is None else max(MAX_TOKENS, *masks[0].shape)
    q = token_array("queries", queries, limit)
    k = token_array("keys", keys, limit)
    if q.ndim != k.ndim or q.shape[1:] != k.shape[1:]:
        raise AttentionInputError(
            "keys", f"queries have shape {q.shape} but keys have shape {k.shape}; queries and keys "
            "need the same width d_k"
        )
    T, T_k = q.shape[0], k.shape[0]
    v = None
    if values is not None:
        v = token_array("values", values, limit)
        if v.shape[0] != T_k:
            raise AttentionInputError("values", f"values have {v.shape[0]} tokens, keys have {T_k}")
    key_is_real = None if padding_mask is None else key_padding(padding_mask, T_k)
    alignment = _alignment(causal, T, T_k, causal_alignment)
    d_k = 1 if q.ndim == 1 else q.shape[1]
    q2, k2 = q.reshape(T, -1), k.reshape(T_k, -1)  # [T, d_k], [T_k, d_k]

    if masks is None:
        allowed = combine_masks(T, causal=causal, key_is_real=key_is_real, T_k=T_k, alignment=alignment)
        applied = allowed if mode.mask == "before" else combine_masks(
            T, causal=False, key_is_real=key_is_real, T_k=T_k)  # "none": only the causal rule is lost
        future = future_cells(T, T_k, alignment)
    else:
        allowed, applied, future = masks
    with np.errstate(over="ignore"):  # inf only where the scaled score may still fit; shown, not used
        raw_scores = q2 @ k2.T  # [T, d_k] @ [d_k, T_k] -> [T, T_k]
    scale = math.sqrt(d_k) if mode.scale else 1.0
    scores = _scores(q2, k2, scale)  # [T, T_k]

    # "before" and "none" mask softmax's input ("none" with the causal rule forgotten; padding is
    # a different rule, kept); "after" lets softmax see every score.
    masked_scores = scores if mode.mask == "after" else np.where(applied, scores, -np.inf)
    softmax = softmax_steps(masked_scores, axis=mode.softmax_axis, stable=mode.softmax == "stable")
    weights = softmax.weights  # [T, T_k]
    if mode.mask == "after":
        weights = np.where(allowed, weights, 0.0)  # no renormalisation: the broken step

    row_sums = weights.sum(axis=-1)  # [T]
    future_weight = np.where(future, weights, 0.0).sum(axis=-1)  # [T]
    mixed = output = contributions = output_error = None
    if v is not None:
        mixed = k if mode.mix == "keys" else v  # [T_k] or [T_k, d]
        output, contributions, output_error = _mix(weights, mixed, mode.mix == "values_transposed")
    y, y_error = _output_projection(None if output is None else output.reshape(T, -1), projection, mode)

    result = AttentionResult(
        queries=q, keys=k, values=v, d_k=d_k, causal=causal, key_is_real=key_is_real, mode=mode,
        allowed=allowed, raw_scores=raw_scores, scale=scale, scores=scores,
        masked_scores=masked_scores, shift=softmax.shift.reshape(-1), shifted=softmax.shifted,
        exps=softmax.exps, totals=softmax.totals.reshape(-1), softmax_weights=softmax.weights,
        weights=weights, row_sums=row_sums, future_weight=future_weight, mixed=mixed,
        output=output, contributions=contributions, projection=projection,
        causal_alignment=alignment, y=y, y_error=y_error, output_error=output_error,
    )
    # The checks audit the finished result, so they go into a copy of it.
    return replace(result, checks=run_checks(result)) if audit else result
