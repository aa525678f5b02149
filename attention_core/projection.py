"""Matrix mode: project one sequence X into queries, keys and values, then attend.

Self-Attention in Matrix Form, and Review, "The Complete Layer":
``Q = X W_Q``, ``K = X W_K``, ``V = X W_V`` with ``X: T×d_model``, ``W_Q, W_K: d_model×d_k`` and
``W_V: d_model×d_v``; the output projection ``Y = H W_O`` with ``W_O: d_v×d_model`` returns the
feature axis to ``d_model``. In cross-attention (Review, "Distinctions to Keep") the keys and
values come from a second sequence ``X_kv: T_k×d_model``. :func:`project` checks the matrices and
multiplies; :func:`self_attention` feeds the projections through the one pipeline and keeps them on
the result (``result.projection``), so row steps and records can show where Q, K and V came from.

Left out: batches (:mod:`attention_core.layer` projects each item with the same W's), several
heads and projection biases.
"""

from __future__ import annotations

import numpy as np

from attention_core.attention import AttentionResult, Projection, attend
from attention_core.modes import FailureMode
from attention_core.validation import MAX_TOKENS, AttentionInputError

_ROW_LIKE = (list, tuple, np.ndarray)
_OUTPUT = {"W_Q": "Q", "W_K": "K", "W_V": "V"}
_SEQUENCES = ("X", "X_kv")  # fields whose rows are tokens


def _matrix(field: str, data: object) -> np.ndarray:
    """``data`` as a finite float64 matrix, or an error naming ``field``'s row and column (from 1)."""
    tokens = field in _SEQUENCES  # X's rows are tokens; a W's rows are d_model features

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


def _product(x: np.ndarray, w: np.ndarray, field: str, source: str = "X") -> np.ndarray:
    """``x @ w``, refused (naming the token) where it overflows float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = x @ w  # [T, d_model] @ [d_model, d] -> [T, d]
    if not np.isfinite(out).all():
        token = int(np.argwhere(~np.isfinite(out))[0][0]) + 1
        raise AttentionInputError(
            source,
            f"{_OUTPUT[field]} = {source} {field} overflows float64 at token {token} (beyond ±1.8e308); "
            f"use smaller numbers in {source} row {token} or {field}",
            token,
        )
    return out


def _sequence(field: str, data: object) -> np.ndarray:
    """A token matrix (X or X_kv) of at most :data:`MAX_TOKENS` rows."""
    arr = _matrix(field, data)
    if arr.shape[0] > MAX_TOKENS:
        raise AttentionInputError(
            field, f"{field} has {arr.shape[0]} rows (tokens); the attention core takes at most {MAX_TOKENS}"
        )
    return arr


def _output_weight(w_o: object, d_v: int | None, d_model: int) -> np.ndarray:
    """``W_O : d_v × d_model``, or an error naming what does not fit (Review, "The Complete Layer")."""
    if d_v is None:
        raise AttentionInputError("W_O", "W_O projects the weighted values H, so it needs W_V (the values) too")
    w = _matrix("W_O", w_o)
    if w.shape[0] != d_v:
        row = min(w.shape[0], d_v) + 1
        raise AttentionInputError(
            "W_O",
            f"W_O has {w.shape[0]} rows but W_V has {d_v} columns (d_v = {d_v}): row {row} is "
            f"{'extra' if w.shape[0] > d_v else 'missing'}; W_O needs one row per value feature",
            row=row,
        )
    if w.shape[1] != d_model:
        raise AttentionInputError(
            "W_O",
            f"W_O has {w.shape[1]} columns but X has {d_model} (d_model = {d_model}); the output "
            "projection returns each token to model width",
            column=min(w.shape[1], d_model) + 1,
        )
    return w


def project(x: object, w_q: object, w_k: object, w_v: object = None, w_o: object = None, *,
            x_kv: object = None) -> Projection:
    """Project into queries, keys and values: ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``.

    Self-Attention in Matrix Form; Review, "The Complete Layer" (no biases). With ``x_kv``
    (cross-attention, Review, "Distinctions to Keep"): ``K = X_kv W_K`` and ``V = X_kv W_V``.

    Parameters
    ----------
    x : array_like of float, shape (T, d_model)
        One row per token, ``1 <= T <= 16``; the queries' sequence.
    w_q, w_k : array_like of float, shape (d_model, d_k)
        Same width ``d_k``: queries and keys meet in a dot product.
    w_v : array_like of float, shape (d_model, d_v), optional
        Without it there are no values (and no output).
    w_o : array_like of float, shape (d_v, d_model), optional
        The output projection ``Y = H W_O``; needs ``w_v``.
    x_kv : array_like of float, shape (T_k, d_model), optional
        Cross-attention: the sequence keys and values are projected from (``1 <= T_k <= 16``);
        ``None`` for self-attention (keys and values from ``x``).

    Returns
    -------
    Projection
        The checked float64 matrices and ``queries``, ``keys``, ``values``.

    Raises
    ------
    ValueError
        :class:`~attention_core.validation.AttentionInputError` whose ``field`` is ``"X"``,
        ``"X_kv"``, ``"W_Q"``, ``"W_K"``, ``"W_V"`` or ``"W_O"`` and whose message names the row
        (for X and X_kv, the token) and column from 1: not a matrix, empty, ragged, text,
        booleans, ``nan``/``±inf``, a W whose rows do not match X's columns, ``W_K`` wider or
        narrower than ``W_Q``, ``X_kv`` of another width than X, ``W_O`` not ``d_v × d_model``
        (or given without ``W_V``), more than 16 tokens, or a product that overflows float64.

    Examples
    --------
    Self-Attention in Matrix Form, "Extend the Four-Token Trace":

    >>> p = project([[1, 0], [0, 1], [1, 1], [-1, 1]], np.eye(2), np.eye(2), [[1, 1], [1, -1]])
    >>> p.values.tolist()
    [[1.0, 1.0], [1.0, -1.0], [2.0, 0.0], [0.0, -2.0]]
    """
    x = _sequence("X", x)
    d_model = x.shape[1]
    source = x
    if x_kv is not None:
        source = _sequence("X_kv", x_kv)
        if source.shape[1] != d_model:
            raise AttentionInputError(
                "X_kv",
                f"X_kv has {source.shape[1]} columns but X has {d_model} (d_model = {d_model}); both "
                "sequences meet the same W_K and W_V",
                column=min(source.shape[1], d_model) + 1,
            )
    w_q, w_k = _weight("W_Q", w_q, d_model), _weight("W_K", w_k, d_model)
    if w_k.shape[1] != w_q.shape[1]:
        raise AttentionInputError(
            "W_K",
            f"W_K has {w_k.shape[1]} columns but W_Q has {w_q.shape[1]}; queries and keys need "
            "the same width d_k",
        )
    w_v = None if w_v is None else _weight("W_V", w_v, d_model)
    w_o = None if w_o is None else _output_weight(w_o, None if w_v is None else w_v.shape[1], d_model)
    kv = "X" if x_kv is None else "X_kv"
    return Projection(
        x=x, w_q=w_q, w_k=w_k, w_v=w_v,
        queries=_product(x, w_q, "W_Q"), keys=_product(source, w_k, "W_K", kv),
        values=None if w_v is None else _product(source, w_v, "W_V", kv),
        w_o=w_o, x_kv=None if x_kv is None else source,
    )


def self_attention(
    x: object,
    w_q: object,
    w_k: object,
    w_v: object = None,
    w_o: object = None,
    *,
    x_kv: object = None,
    causal: bool = True,
    causal_alignment: str | None = None,
    padding_mask: object = None,
    failure_mode: str | FailureMode = "correct",
) -> AttentionResult:
    """Single-head attention of one sequence: project X, then masked scaled dot-product attention.

    ``H = softmax_last(X W_Q (X W_K)^T / sqrt(d_k) + M) X W_V`` and, with ``w_o``, ``Y = H W_O``
    (Self-Attention in Matrix Form; Review, "The Complete Layer"). With ``x_kv`` it is
    cross-attention: keys and values are projected from ``x_kv``. A batch is
    :func:`~attention_core.layer.attention_layer`.

    Parameters
    ----------
    x, w_q, w_k, w_v, w_o, x_kv
        As for :func:`project`.
    causal, causal_alignment, padding_mask, failure_mode
        As for :func:`~attention_core.attention.scaled_dot_product_attention`; ``padding_mask``
        has one entry per key (per row of ``x_kv`` in cross-attention).

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
    p = project(x, w_q, w_k, w_v, w_o, x_kv=x_kv)
    return attend(p.queries, p.keys, p.values, causal=causal, causal_alignment=causal_alignment,
                  padding_mask=padding_mask, failure_mode=failure_mode, projection=p)
