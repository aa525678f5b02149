"""Which key columns each query row may read.

Masks here are boolean ``allowed`` matrices (``True`` = the query may read that key), the
opposite sign of the additive ``M`` of Self-Attention in Matrix Form, "Mask Before Normalizing";
:func:`additive_mask` converts. A causal mask removes real future positions; a padding mask
removes artificial positions (Review, "Distinctions to Keep"). They combine with logical *and*.

Left out: other mask shapes (sliding windows, blocks, per-query padding) and batches.
"""

from __future__ import annotations

import numpy as np


def causal_mask(T: int) -> np.ndarray:
    """Allowed cells of a causal mask: ``allowed[i, j] = j <= i``.

    Parameters
    ----------
    T : int
        Number of tokens, ``T >= 1``.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)
        Lower triangle (diagonal included) ``True``; future cells (``j > i``) ``False``.
    """
    return np.tril(np.ones((T, T), dtype=bool))


def future_cells(T: int) -> np.ndarray:
    """Future cells ``j > i``: the cells a causal mask forbids (Self-attention, "Inspect the invariants").

    Parameters
    ----------
    T : int
        Number of tokens, ``T >= 1``.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)
        Strict upper triangle ``True``; the complement of :func:`causal_mask`.
    """
    return np.triu(np.ones((T, T), dtype=bool), k=1)


def padding_mask(key_is_real: np.ndarray) -> np.ndarray:
    """Allowed cells of a key-padding mask.

    Parameters
    ----------
    key_is_real : array_like of bool, shape (T,)
        ``True`` for a real token, ``False`` for a padding position.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)
        ``allowed[i, j] = key_is_real[j]`` for every query row ``i``.
    """
    key_is_real = np.asarray(key_is_real, dtype=bool)
    return np.broadcast_to(key_is_real, (key_is_real.size, key_is_real.size)).copy()


def combine_masks(T: int, *, causal: bool, key_is_real: np.ndarray | None = None) -> np.ndarray:
    """The allowed cells under a causal mask, a padding mask, both or neither.

    Parameters
    ----------
    T : int
        Number of tokens, ``T >= 1``.
    causal : bool
        Forbid future cells ``j > i``.
    key_is_real : array_like of bool, shape (T,), optional
        Key-padding mask, ``True`` for a real token; ``None`` for no padding.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)
        ``True`` where query row ``i`` may read key column ``j`` (logical *and* of the masks).
    """
    allowed = causal_mask(T) if causal else np.ones((T, T), dtype=bool)
    if key_is_real is not None:
        allowed &= padding_mask(key_is_real)
    return allowed


def additive_mask(allowed: np.ndarray) -> np.ndarray:
    """The additive mask ``M``, so that ``softmax_last(S + M)`` is the masked softmax.

    Self-Attention in Matrix Form, "Mask Before Normalizing".

    Parameters
    ----------
    allowed : array_like of bool, shape (T, T)
        ``True`` where a query row may read a key column.

    Returns
    -------
    numpy.ndarray of float64, shape (T, T)
        ``0.0`` where allowed, ``-inf`` where forbidden.
    """
    return np.where(allowed, 0.0, -np.inf)
