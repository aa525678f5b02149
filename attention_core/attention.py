"""Masked scaled dot-product attention for one sequence: the pipeline the workbench shows.

One pipeline, steered by a :class:`~attention_core.modes.FailureMode`, computes seed 003's
four steps (score, mask, normalise, mix values) and keeps every intermediate so the UI and the
checks can show where a broken mode goes wrong. Reference: Vaswani et al. 2017, "Attention Is
All You Need", eq. 1; seed 000 for the matrix form; seed 003 for the steps and failure modes.

Left out: batches, multiple heads, projections (pass ``X @ W_Q`` etc. yourself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attention_core._bools import every
from attention_core.checks import Check, audit
from attention_core.masks import combine_masks, future_cells
from attention_core.modes import CORRECT, MASK_AFTER_SOFTMAX, FailureMode, get_mode
from attention_core.softmax import naive_softmax, shifted_softmax
from attention_core.validation import AttentionInputError, key_padding, token_array


@dataclass(frozen=True, slots=True)  # slots: about 3 µs less to build, on every edit
class AttentionResult:
    """Everything one attention computation produced, intermediates included.

    All arrays are float64 unless said otherwise; ``T`` is the number of tokens, rows are
    query positions and columns key positions.

    Attributes
    ----------
    queries, keys : numpy.ndarray, shape (T,) or (T, d_k)
        The inputs as given (1-D means scalar mode, ``d_k = 1``).
    values : numpy.ndarray, shape (T,) or (T, d_v), or None
    d_k : int
        Head width used for scaling.
    causal : bool
        Whether a causal mask was asked for.
    key_is_real : numpy.ndarray of bool, shape (T,), or None
        The key-padding mask, if one was given.
    mode : FailureMode
        How the pipeline computed (``correct`` or a deliberate failure).
    allowed : numpy.ndarray of bool, shape (T, T)
        Cells the requested masks allow (what a correct implementation lets through).
    scores : numpy.ndarray, shape (T, T)
        ``q_i · k_j / sqrt(d_k)``, unmasked (unscaled in the ``no_scaling`` mode).
    masked_scores : numpy.ndarray, shape (T, T)
        What softmax actually received: ``-inf`` at the masked cells in the correct mode.
    weights : numpy.ndarray, shape (T, T)
        Attention weights; may hold ``nan``/``inf`` only in the ``naive_softmax`` mode.
    row_sums : numpy.ndarray, shape (T,)
        ``weights.sum(axis=-1)``.
    future_weight : numpy.ndarray, shape (T,)
        Each row's weight on future cells ``j > i`` (the future-token weight).
    output : numpy.ndarray, shape (T,) or (T, d_v), or None
        ``weights @ values``; 1-D when ``values`` was 1-D.
    contributions : numpy.ndarray, shape (T, T) or (T, T, d_v), or None
        ``weights[i, j] * v_j``, the contribution of source ``j`` to row ``i``.
    checks : tuple of Check
        The audit of seed 004, in order.
    """

    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray | None
    d_k: int
    causal: bool
    key_is_real: np.ndarray | None
    mode: FailureMode
    allowed: np.ndarray
    scores: np.ndarray
    masked_scores: np.ndarray
    weights: np.ndarray
    row_sums: np.ndarray
    future_weight: np.ndarray
    output: np.ndarray | None
    contributions: np.ndarray | None
    checks: tuple[Check, ...] = field(default=())

    @property
    def T(self) -> int:
        """Number of tokens."""
        return len(self.queries)

    @property
    def queries_2d(self) -> np.ndarray:
        """Queries as (T, d_k)."""
        return self.queries.reshape(len(self.queries), -1)

    @property
    def keys_2d(self) -> np.ndarray:
        """Keys as (T, d_k)."""
        return self.keys.reshape(len(self.keys), -1)

    @property
    def values_2d(self) -> np.ndarray | None:
        """Values as (T, d_v), or None."""
        return None if self.values is None else self.values.reshape(len(self.values), -1)

    @property
    def future(self) -> np.ndarray:
        """Future cells ``j > i``, bool (T, T)."""
        return future_cells(self.T)

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


def _scores(queries: np.ndarray, keys: np.ndarray, d_k: int, scale: bool) -> np.ndarray:
    # [T, d_k] @ [d_k, T] -> [T, T]; called with overflow warnings silenced, as it reports them
    raw = queries @ keys.T
    scores = raw / math.sqrt(d_k) if scale and d_k != 1 else raw  # x / sqrt(1) is exactly x
    if not every(np.isfinite(scores)):
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
) -> AttentionResult:
    """Masked scaled dot-product attention for one sequence, with every intermediate kept.

    ``scores = Q K^T / sqrt(d_k)``; ``weights = softmax_last(scores + M)`` with ``M = -inf`` at
    forbidden cells; ``output = weights @ V`` (Vaswani et al. 2017, eq. 1; seed 000; seed 003,
    "The attention calculation").

    Parameters
    ----------
    queries, keys : array_like of float, shape (T,) or (T, d_k)
        1-D means scalar mode (one number per token, ``d_k = 1``). Same shape for both.
        ``1 <= T <= 16``.
    values : array_like of float, shape (T,) or (T, d_v), optional
        Mixed by the weights into ``output``.
    causal : bool, default True
        Forbid future cells ``j > i``.
    mask_after_softmax : bool, default False
        The deliberately broken mode of seed 003: softmax over the whole row, then zero the
        forbidden cells without renormalising. Same as ``failure_mode="mask_after_softmax"``.
    padding_mask : array_like of bool, shape (T,), optional
        ``True`` for real tokens; ``False`` keys are forbidden to every row.
    failure_mode : str or FailureMode, default "correct"
        One of :data:`attention_core.modes.FAILURE_MODES`.

    Returns
    -------
    AttentionResult
        Scores, masked scores, weights, row sums, future-token weight, output, contributions
        and the checks of seed 004's audit order.

    Raises
    ------
    ValueError
        :class:`~attention_core.validation.AttentionInputError` for empty, ragged, mismatched,
        non-numeric or non-finite input, more than 16 tokens, or scores that overflow float64;
        the message names the field and the token (from 1). Plain ``ValueError`` for an
        unknown or contradictory failure mode.

    Examples
    --------
    The worked row of seed 003 (row 2 of a causal head, keys 1, 2, 9, values 10, 20, 100):

    >>> r = scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100])
    >>> np.round(r.weights[1], 3).tolist(), round(float(r.output[1]), 2)
    ([0.269, 0.731, 0.0], 17.31)
    """
    mode = _resolve_mode(failure_mode, mask_after_softmax)
    q = token_array("queries", queries)
    k = token_array("keys", keys)
    if q.shape != k.shape:
        raise AttentionInputError(
            "keys", f"queries have shape {q.shape} but keys have shape {k.shape}; they must match"
        )
    T = q.shape[0]
    v = None
    if values is not None:
        v = token_array("values", values)
        if v.shape[0] != T:
            raise AttentionInputError("values", f"values have {v.shape[0]} tokens, queries have {T}")
    key_is_real = None if padding_mask is None else key_padding(padding_mask, T)
    d_k = 1 if q.ndim == 1 else q.shape[1]
    q2, k2 = q.reshape(T, -1), k.reshape(T, -1)  # [T, d_k]

    allowed = combine_masks(T, causal=causal, key_is_real=key_is_real)  # [T, T] bool
    # Silenced once for the whole pipeline: an overflowing score is refused by _scores, and the
    # nan/inf that only the naive_softmax mode can make are what that mode exists to show.
    with np.errstate(over="ignore", invalid="ignore"):
        scores = _scores(q2, k2, d_k, mode.scale)  # [T, T]
        masked_scores = np.where(allowed, scores, -np.inf) if mode.mask == "before" else scores
        # _scores refused nan and inf, so the stable softmax need not look for them again.
        softmax = shifted_softmax if mode.softmax == "stable" else naive_softmax
        weights = softmax(masked_scores, axis=mode.softmax_axis)  # [T, T]
        if mode.mask == "after":
            weights = np.where(allowed, weights, 0.0)  # no renormalisation: the broken step

        # np.add.reduce is ndarray.sum without its Python-level wrapper (~1.5 µs a call here).
        row_sums = np.add.reduce(weights, axis=-1)  # [T]
        future_weight = np.add.reduce(np.where(future_cells(T), weights, 0.0), axis=-1)  # [T]
        output = contributions = None
        if v is not None:
            mixed = v if mode.mix == "values" else k  # [T] or [T, d_v]
            # weights[i, j] * v_j: [T, T] * [T] -> [T, T], or [T, T, 1] * [1, T, d_v] -> [T, T, d_v]
            contributions = weights * mixed if mixed.ndim == 1 else weights[:, :, None] * mixed[None, :, :]
            output = weights @ mixed  # [T] or [T, d_v]

        result = AttentionResult(
            queries=q, keys=k, values=v, d_k=d_k, causal=causal, key_is_real=key_is_real, mode=mode,
            allowed=allowed, scores=scores, masked_scores=masked_scores, weights=weights,
            row_sums=row_sums, future_weight=future_weight, output=output, contributions=contributions,
        )
        # The checks read the finished result, so they are attached after it is built.
        object.__setattr__(result, "checks", audit(result))
    return result
