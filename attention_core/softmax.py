"""Softmax over one axis, the stable way and the naive way, with its steps kept.

``stable_softmax`` is what the workbench teaches; ``naive_softmax`` exists only so the
"naive softmax" failure mode can show what overflow does. Both take ``-inf`` as "masked".
:func:`softmax_steps` is the one route both take, and it keeps the shift, the exponentials and
their sum so the row-steps view can show them without recomputing anything.

Left out: temperature, ``log_softmax``, and any dtype but float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SoftmaxSteps(NamedTuple):
    """The intermediates of one softmax, each the shape of the input unless said otherwise.

    Attributes
    ----------
    shift : numpy.ndarray of float64, the input's shape with ``axis`` of length 1
        What was subtracted before ``exp``: the slice's largest entry (stable), or 0.0 (naive,
        or a slice with nothing visible).
    shifted : numpy.ndarray of float64
        ``x - shift``.
    exps : numpy.ndarray of float64
        ``exp(shifted)``; may hold ``inf`` in the naive route.
    totals : numpy.ndarray of float64, shaped like ``shift``
        ``exps.sum(axis)``; 0.0 for a slice with nothing visible.
    weights : numpy.ndarray of float64
        ``exps / totals``; exactly 0.0 at every ``-inf`` entry, so a slice with nothing visible
        is all zeros.
    """

    shift: np.ndarray
    shifted: np.ndarray
    exps: np.ndarray
    totals: np.ndarray
    weights: np.ndarray


def softmax_steps(x: np.ndarray, axis: int = -1, *, stable: bool = True) -> SoftmaxSteps:
    """Softmax of ``x`` along ``axis``, returning every step (see :class:`SoftmaxSteps`).

    Parameters
    ----------
    x : array_like of float, any shape
        Scores; ``-inf`` marks a masked entry. With ``stable=True`` they must hold no ``nan``
        or ``+inf`` (:func:`stable_softmax` checks; the attention pipeline refuses them earlier).
    axis : int, default -1
        Axis to normalise over.
    stable : bool, default True
        Subtract each slice's largest entry before ``exp`` (Self-attention, "The attention
        calculation"); with ``False``, exponentiate the scores as they are (the naive route, which
        overflows).

    Returns
    -------
    SoftmaxSteps
        ``shift``, ``shifted``, ``exps``, ``totals`` and ``weights``. A ``-inf`` entry has weight
        exactly 0.0 on both routes, so a slice whose entries are all ``-inf`` (a row with no
        visible key) is all zeros, never ``nan``: masking is not what the naive route gets wrong.
    """
    x = np.asarray(x, dtype=np.float64)
    visible = (x > -np.inf).any(axis=axis, keepdims=True)
    if stable:
        shift = np.where(visible, x.max(axis=axis, keepdims=True, initial=-np.inf), 0.0)
    else:
        shift = np.zeros_like(visible, dtype=np.float64)
    # x - shift <= 0 on the stable route, so an overflow there can only reach -inf, whose exp is
    # the correct 0; the naive route's inf and nan are what it exists to show.
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = x - shift
        exps = np.exp(shifted)
        totals = exps.sum(axis=axis, keepdims=True)
        # A masked entry is exactly 0 on both routes, also where the naive sum underflowed to 0.
        weights = np.where(x > -np.inf, exps / totals, 0.0)
    return SoftmaxSteps(shift, shifted, exps, totals, weights)


def stable_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Normalise ``x`` into non-negative weights that sum to 1 along ``axis``.

    ``softmax(x)_j = exp(x_j - m) / sum_k exp(x_k - m)`` with ``m`` the largest finite entry
    of the slice.

    Parameters
    ----------
    x : array_like of float, any shape
        Scores; ``-inf`` marks a masked entry. ``nan`` and ``+inf`` are not accepted.
    axis : int, default -1
        Axis to normalise over. For attention this is the last (key) axis, Self-Attention in
        Matrix Form, "Mask Before Normalizing": ``A = softmax_last(S + M)``.

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
    but keeps every exponent ``<= 0``, so scores such as 1000 do not overflow (Self-attention,
    "The attention calculation").

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
    if not (x < np.inf).all():  # false exactly for nan and +inf
        raise ValueError("stable_softmax takes finite numbers or -inf (masked); got nan or +inf")
    return softmax_steps(x, axis).weights


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
        For scores above about 709 ``exp`` overflows to ``inf`` and the slice becomes ``nan``; this
        is the failure Self-attention, "Common failure modes", warns about ("Using naive
        exponentials: large scores overflow to Infinity"). A slice with nothing visible is all
        zeros, as in :func:`stable_softmax`. Floating-point warnings are silenced; nothing raises.

    Examples
    --------
    >>> naive_softmax(np.array([1000.0, 0.0])).tolist()
    [nan, 0.0]
    """
    return softmax_steps(x, axis, stable=False).weights
