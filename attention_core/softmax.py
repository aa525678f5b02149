"""Softmax over one axis, the stable way and the naive way.

``stable_softmax`` is what the workbench teaches; ``naive_softmax`` exists only so the
"naive softmax" failure mode can show what overflow does. Both take ``-inf`` as "masked".
"""

from __future__ import annotations

import numpy as np

from attention_core._bools import every


def stable_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Normalise ``x`` into non-negative weights that sum to 1 along ``axis``.

    ``softmax(x)_j = exp(x_j - m) / sum_k exp(x_k - m)`` with ``m`` the largest finite entry
    of the slice.

    Parameters
    ----------
    x : array_like of float, any shape
        Scores; ``-inf`` marks a masked entry. ``nan`` and ``+inf`` are not accepted.
    axis : int, default -1
        Axis to normalise over. For attention this is the last (key) axis, seed 000:
        ``A = softmax_last(S + M)``.

    Returns
    -------
    numpy.ndarray of float64, same shape as ``x``
        Masked entries are exactly ``0.0``. A slice whose entries are all ``-inf`` (a row with no
        visible key) is all zeros, never ``nan``.

    Raises
    ------
    ValueError
        If ``x`` holds ``nan`` or ``+inf``.

    Notes
    -----
    Subtracting the slice maximum leaves the result unchanged (the factor ``exp(-m)`` cancels)
    but keeps every exponent ``<= 0``, so scores such as 1000 do not overflow (seed 003,
    "Stable softmax subtracts the largest finite score before exponentiating").

    Examples
    --------
    >>> w = stable_softmax(np.array([[1000.0, 0.0, 0.0], [1.0, 2.0, -np.inf]]))
    >>> w[0].tolist()
    [1.0, 0.0, 0.0]
    >>> np.round(w[1], 3).tolist()
    [0.269, 0.731, 0.0]
    >>> w.sum(axis=-1).tolist()
    [1.0, 1.0]
    """
    x = np.asarray(x, dtype=np.float64)
    if not (x < np.inf).all():  # one pass: false exactly for nan and +inf
        raise ValueError("stable_softmax takes finite numbers or -inf (masked); got nan or +inf")
    return shifted_softmax(x, axis)


def shifted_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`stable_softmax` for float64 scores already known to hold no ``nan`` or ``+inf``.

    The attention pipeline refuses non-finite scores before softmax, so it skips the check
    that :func:`stable_softmax` makes on arbitrary input. Same parameters, same result.
    """
    # With nan and +inf refused, the slice maximum is the largest visible score, or -inf for a
    # slice with nothing visible; such a slice is shifted by 0 instead, so it stays finite.
    row_max = np.maximum.reduce(x, axis=axis, keepdims=True)
    has_visible = row_max > -np.inf
    if every(has_visible):  # the usual case (a causal row always sees its own key): no where
        exps = np.exp(x - row_max)
        return exps / np.add.reduce(exps, axis=axis, keepdims=True)
    exps = np.exp(x - np.where(has_visible, row_max, 0.0))  # exp(-inf) is exactly 0.0
    totals = exps.sum(axis=axis, keepdims=True)
    return exps / np.where(has_visible, totals, 1.0)  # a slice with nothing visible: 0 / 1


def naive_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax without the max shift: ``exp(x) / sum(exp(x))``.

    Parameters
    ----------
    x : array_like of float, any shape
        Scores; ``-inf`` gives ``exp(-inf) = 0``.
    axis : int, default -1
        Axis to normalise over.

    Returns
    -------
    numpy.ndarray of float64, same shape as ``x``
        For scores above about 709 ``exp`` overflows to ``inf`` and the slice becomes
        ``nan``; this is the failure seed 003 warns about ("Using naive exponentials: large
        scores overflow to Infinity"). Floating-point warnings are silenced; nothing raises.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        exps = np.exp(x)
        return exps / exps.sum(axis=axis, keepdims=True)
