"""Turning what a caller passed into checked float64 arrays, or a clear refusal.

Every refusal is an :class:`AttentionInputError` (a ``ValueError``) that names the field
(``queries``, ``keys``, ``values``, ``padding_mask``) and, where one token is at fault, its
position counted from 1, so a UI can put the message next to the right input.

Left out: parsing text (a page turns what a learner typed into numbers first) and any limit
tighter than the core's own :data:`MAX_TOKENS`; a page with fewer tokens says so itself.
"""

from __future__ import annotations

import numpy as np

MAX_TOKENS = 16  # the core's own limit; a page may allow fewer and says so in its own message

_SINGULAR = {"queries": "query", "keys": "key", "values": "value", "padding_mask": "padding mask"}


class AttentionInputError(ValueError):
    """Input the attention maths cannot take.

    Attributes
    ----------
    field : str
        ``"queries"``, ``"keys"``, ``"values"``, ``"padding_mask"`` or ``"causal_alignment"``;
        in matrix mode (see :mod:`attention_core.projection`) also ``"X"``, ``"X_kv"`` (the
        sequence cross-attention reads keys and values from), ``"W_Q"``, ``"W_K"``, ``"W_V"`` or
        ``"W_O"``.
    token : int or None
        Position of the offending token, counted from 1, or ``None`` when the whole field is
        at fault (shape, emptiness) or the field is a weight matrix (its rows are not tokens).
    row, column : int or None
        The offending cell of a matrix field, counted from 1, where one is at fault: for a
        token field or ``X`` the row is the token; for ``W_Q``/``W_K``/``W_V`` it is the
        ``d_model`` feature. ``row`` defaults to ``token``.
    item : int or None
        The batch item at fault, counted from 1 (:func:`~attention_core.layer.attention_layer`
        with a batch); ``None`` for one sequence or a field shared by every item (the W's).
    """

    def __init__(self, field: str, message: str, token: int | None = None, *,
                 row: int | None = None, column: int | None = None, item: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.token = token
        self.row = token if row is None else row
        self.column = column
        self.item = item


def _ragged_token(tokens: np.ndarray) -> int:
    """Position (from 1) of the first token whose width differs from token 1's."""
    widths = [len(t) if isinstance(t, (list, tuple, np.ndarray)) else None for t in tokens]
    return next((i + 1 for i, w in enumerate(widths) if w != widths[0]), 1)


def _plain(item: object) -> object:
    """A numpy scalar as the Python number it holds, so a message shows 2.0, not np.float64(2.0)."""
    return item.item() if isinstance(item, np.generic) else item


def token_array(field: str, data: object, max_tokens: int = MAX_TOKENS) -> np.ndarray:
    """Check one input field and return it as float64.

    Parameters
    ----------
    field : str
        ``"queries"``, ``"keys"`` or ``"values"``; used in messages.
    data : array_like of int or float
        Shape (T,) (scalar mode, one number per token) or (T, d). Booleans are refused in
        every form, a Python ``True`` in a list as much as a numpy bool array: a query, key or
        value is a number, and reading ``True`` as 1 would hide a caller's mistake.
    max_tokens : int, default MAX_TOKENS
        The most tokens taken; only a batch flattened into one sequence (the
        ``batch_items_mixed`` mode of :mod:`attention_core.layer`) passes more.

    Returns
    -------
    numpy.ndarray of float64, shape (T,) or (T, d)
        A new array, so a caller who later edits theirs cannot change a stored result.

    Raises
    ------
    AttentionInputError
        A bare number (a 0-d array included), empty, ragged, more than 2-D, more than
        ``max_tokens`` tokens, text, booleans, ``nan`` or ``±inf``; the message names the
        field and the token position (from 1) and, for a (T, d) field, the component (from 1,
        also the error's ``column``).
    """
    name = _SINGULAR.get(field, field)
    if isinstance(data, np.ndarray) and data.dtype.kind in "iuf":
        arr = np.array(data, dtype=np.float64)
    else:
        try:
            arr = np.array(data, dtype=object)
        except ValueError:
            raise AttentionInputError(field, f"{field} are ragged: every token needs the same width") from None
        if arr.ndim == 0:
            # A bare number, string or None is not a list of tokens; astype would raise an
            # unlabelled ValueError (text) or TypeError (None) instead.
            raise AttentionInputError(
                field,
                f"{field} must be a list with one number (or one row) per token, got {_plain(data)!r}",
            )
        for index, item in np.ndenumerate(arr):
            token = index[0] + 1
            column = index[1] + 1 if arr.ndim == 2 else None
            where = f"{name.capitalize()} {token}" + ("" if column is None else f", component {column},")
            if isinstance(item, (list, tuple, np.ndarray)):
                if arr.ndim == 1:
                    token = _ragged_token(arr)
                    problem = f"{name} {token} has a different width from {name} 1"
                else:
                    problem = f"{name} {token} holds a list where a number belongs"
                raise AttentionInputError(field, f"{field} are ragged: {problem}", token)
            if isinstance(item, (bool, np.bool_)):
                raise AttentionInputError(field, f"{where} is not a number: {bool(item)!r}", token, column=column)
            if not isinstance(item, (int, float, np.integer, np.floating)):
                raise AttentionInputError(field, f"{where} is not a number: {_plain(item)!r}", token, column=column)
            try:
                float(item)
            except OverflowError:  # a Python int beyond float64, e.g. 10**400
                raise AttentionInputError(
                    field, f"{where} is too large for float64 (beyond ±1.8e308)", token, column=column
                ) from None
        arr = arr.astype(np.float64)
    if arr.ndim == 0:  # a 0-d numpy array: one number, not a list of tokens
        raise AttentionInputError(
            field, f"{field} must be a list with one number (or one row) per token, got {float(arr)!r}"
        )
    if arr.size == 0:
        raise AttentionInputError(field, f"{field} are empty: give at least one token")
    if arr.ndim > 2:
        raise AttentionInputError(
            field, f"{field} must be 1-D (one number per token) or 2-D (tokens × width), got {arr.ndim}-D"
        )
    if arr.shape[0] > max_tokens:
        raise AttentionInputError(
            field, f"{field} have {arr.shape[0]} tokens; the attention core takes at most {max_tokens}"
        )
    if not np.isfinite(arr).all():
        position = np.argwhere(~np.isfinite(arr))[0]
        token = int(position[0]) + 1
        column = int(position[1]) + 1 if arr.ndim == 2 else None
        where = f"{name.capitalize()} {token}" + ("" if column is None else f", component {column},")
        raise AttentionInputError(
            field, f"{where} is not a finite number: {float(arr[tuple(position)])}", token, column=column
        )
    return arr


def key_padding(data: object, T: int) -> np.ndarray:
    """Check a key-padding mask: bool, shape (T,), ``True`` = real token.

    Parameters
    ----------
    data : array_like of bool, shape (T,)
        The mask as given.
    T : int
        Number of tokens.

    Returns
    -------
    numpy.ndarray of bool, shape (T,)

    Raises
    ------
    AttentionInputError
        Wrong length or not booleans.
    """
    try:
        arr = np.asarray(data)
    except ValueError:  # ragged nested lists
        arr = np.asarray(data, dtype=object)
    if arr.shape != (T,) or arr.dtype != bool:
        raise AttentionInputError(
            "padding_mask", f"padding_mask must be {T} booleans (True = real token), got {arr.shape} {arr.dtype}"
        )
    return arr
