"""Matrix mode: project one sequence X into queries, keys and values, then attend.

Self-Attention in Matrix Form, and Review, "The Complete Layer":
``Q = X W_Q``, ``K = X W_K``, ``V = X W_V`` with ``X: T×d_model``, ``W_Q, W_K: d_model×d_k`` and
``W_V: d_model×d_v``. :func:`project` checks the four matrices and multiplies;
:func:`self_attention` feeds the projections through
:func:`~attention_core.attention.scaled_dot_product_attention` and keeps them on the result
(``result.projection``), so row steps and records can show where Q, K and V came from.

Left out: batches, several heads, projection biases and the output projection ``W_O`` (Review,
"The Complete Layer": ``Y = H W_O``): the workbench stops at ``H = A V``.
"""

from __future__ import annotations

import numpy as np

from attention_core.attention import AttentionResult, Projection, attend
from attention_core.modes import FailureMode
from attention_core.validation import MAX_TOKENS, AttentionInputError

_ROW_LIKE = (list, tuple, np.ndarray)
_OUTPUT = {"W_Q": "Q", "W_K": "K", "W_V": "V"}


def _matrix(field: str, data: object) -> np.ndarray:
    """``data`` as a finite float64 matrix, or an error naming ``field``'s row and column (from 1)."""
    tokens = field == "X"  # X's rows are tokens; a W's rows are d_model features

    def fail(message: str, row: int | None = None, column: int | None = None) -> AttentionInputError:
        return AttentionInputError(field, message, row if tokens else None, row=row, column=column)

    def cell(row: int, column: int | None = None) -> str:
        where = f"{field} row {row}" + (f" (token {row})" if tokens else "")
        return where + ("" if column is None else f", column {column}")

    if isinstance(data, np.ndarray) and data.dtype.kind in "iuf":
        arr = np.array(data, dtype=np.float64)
    else:
        try:
            arr = np.array(data, dtype=object)
        except ValueError:
            raise fail(f"{field} is ragged: every row needs the same number of columns") from None
        if arr.ndim == 1 and any(isinstance(item, _ROW_LIKE) for item in arr):
            widths = [len(item) if isinstance(item, _ROW_LIKE) else None for item in arr]
            row = next((i + 1 for i, w in enumerate(widths) if w != widths[0]), 1)
            raise fail(f"{cell(row)} has a different number of columns from row 1", row)
        for (i, j), item in np.ndenumerate(arr) if arr.ndim == 2 else ():
            if isinstance(item, _ROW_LIKE):
                raise fail(f"{cell(i + 1, j + 1)} holds a list where a number belongs", i + 1, j + 1)
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, float, np.integer, np.floating)):
                shown = item.item() if isinstance(item, np.generic) else item
                raise fail(f"{cell(i + 1, j + 1)} is not a number: {shown!r}", i + 1, j + 1)
            if isinstance(item, int) and abs(item) > np.finfo(np.float64).max:
                raise fail(f"{cell(i + 1, j + 1)} is too large for float64 (beyond ±1.8e308)", i + 1, j + 1)
        if arr.ndim == 2:
            arr = arr.astype(np.float64)
    if arr.ndim != 2 or arr.size == 0:
        raise fail(f"{field} must be a matrix: a non-empty list of rows of numbers, each row the same width")
    if not np.isfinite(arr).all():
        i, j = (int(n) for n in np.argwhere(~np.isfinite(arr))[0])
        raise fail(f"{cell(i + 1, j + 1)} is not a finite number: {arr[i, j]}", i + 1, j + 1)
    return arr


def _weight(field: str, data: object, d_model: int) -> np.ndarray:
    """A ``d_model × width`` weight matrix, or an error naming the first missing or extra row."""
    w = _matrix(field, data)
    if w.shape[0] != d_model:
        row = min(w.shape[0], d_model) + 1
        raise AttentionInputError(
            field,
            f"{field} has {w.shape[0]} rows but X has {d_model} columns (d_model = {d_model}): "
            f"row {row} is {'extra' if w.shape[0] > d_model else 'missing'}; {field} needs one row "
            "per column of X",
            row=row,
        )
    return w


def _product(x: np.ndarray, w: np.ndarray, field: str) -> np.ndarray:
    """``x @ w``, refused (naming the token) where it overflows float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = x @ w  # [T, d_model] @ [d_model, d] -> [T, d]
    if not np.isfinite(out).all():
        token = int(np.argwhere(~np.isfinite(out))[0][0]) + 1
        raise AttentionInputError(
            "X",
            f"{_OUTPUT[field]} = X {field} overflows float64 at token {token} (beyond ±1.8e308); "
            f"use smaller numbers in X row {token} or {field}",
            token,
        )
    return out


def project(x: object, w_q: object, w_k: object, w_v: object = None) -> Projection:
    """Project one sequence into queries, keys and values: ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``.

    Self-Attention in Matrix Form; Review, "The Complete Layer" (no biases).

    Parameters
    ----------
    x : array_like of float, shape (T, d_model)
        One row per token, ``1 <= T <= 16``.
    w_q, w_k : array_like of float, shape (d_model, d_k)
        Same width ``d_k``: queries and keys meet in a dot product.
    w_v : array_like of float, shape (d_model, d_v), optional
        Without it there are no values (and no output).

    Returns
    -------
    Projection
        The checked float64 matrices and ``queries``, ``keys``, ``values``.

    Raises
    ------
    ValueError
        :class:`~attention_core.validation.AttentionInputError` whose ``field`` is ``"X"``,
        ``"W_Q"``, ``"W_K"`` or ``"W_V"`` and whose message names the row (for X, the token)
        and column from 1: not a matrix, empty, ragged, text, booleans, ``nan``/``±inf``, a W
        whose rows do not match X's columns, ``W_K`` wider or narrower than ``W_Q``, more than
        16 tokens, or a product that overflows float64.

    Examples
    --------
    Self-Attention in Matrix Form, "Extend the Four-Token Trace":

    >>> p = project([[1, 0], [0, 1], [1, 1], [-1, 1]], np.eye(2), np.eye(2), [[1, 1], [1, -1]])
    >>> p.values.tolist()
    [[1.0, 1.0], [1.0, -1.0], [2.0, 0.0], [0.0, -2.0]]
    """
    x = _matrix("X", x)
    if x.shape[0] > MAX_TOKENS:
        raise AttentionInputError(
            "X", f"X has {x.shape[0]} rows (tokens); the attention core takes at most {MAX_TOKENS}"
        )
    d_model = x.shape[1]
    w_q, w_k = _weight("W_Q", w_q, d_model), _weight("W_K", w_k, d_model)
    if w_k.shape[1] != w_q.shape[1]:
        raise AttentionInputError(
            "W_K",
            f"W_K has {w_k.shape[1]} columns but W_Q has {w_q.shape[1]}; queries and keys need "
            "the same width d_k",
        )
    w_v = None if w_v is None else _weight("W_V", w_v, d_model)
    return Projection(
        x=x, w_q=w_q, w_k=w_k, w_v=w_v,
        queries=_product(x, w_q, "W_Q"), keys=_product(x, w_k, "W_K"),
        values=None if w_v is None else _product(x, w_v, "W_V"),
    )


def self_attention(
    x: object,
    w_q: object,
    w_k: object,
    w_v: object = None,
    *,
    causal: bool = True,
    padding_mask: object = None,
    failure_mode: str | FailureMode = "correct",
) -> AttentionResult:
    """Single-head self-attention of one sequence: project X, then masked scaled dot-product attention.

    ``H = softmax_last(X W_Q (X W_K)^T / sqrt(d_k) + M) X W_V`` (Self-Attention in Matrix Form;
    Review, "The Complete Layer", up to ``H``).

    Parameters
    ----------
    x, w_q, w_k, w_v
        As for :func:`project`.
    causal, padding_mask, failure_mode
        As for :func:`~attention_core.attention.scaled_dot_product_attention`.

    Returns
    -------
    AttentionResult
        The usual result with ``queries``, ``keys``, ``values`` the projections (2-D) and
        ``projection`` holding X and the W matrices; its ``input_shapes`` check covers them.

    Raises
    ------
    ValueError
        :class:`~attention_core.validation.AttentionInputError` as for :func:`project`, or for
        a bad ``padding_mask`` or scores that overflow; plain ``ValueError`` for an unknown
        failure mode.

    Examples
    --------
    Row 4 of Self-Attention in Matrix Form, "Extend the Four-Token Trace":

    >>> r = self_attention([[1, 0], [0, 1], [1, 1], [-1, 1]], np.eye(2), np.eye(2), [[1, 1], [1, -1]])
    >>> np.round(r.weights[3], 3).tolist(), np.round(r.output[3], 3).tolist()
    ([0.065, 0.266, 0.131, 0.539], [0.592, -1.279])
    """
    p = project(x, w_q, w_k, w_v)
    return attend(p.queries, p.keys, p.values, causal=causal, padding_mask=padding_mask,
                  failure_mode=failure_mode, projection=p)
