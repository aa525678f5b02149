"""Which key columns each query row may read.

Masks here are boolean ``allowed`` matrices (``True`` = the query may read that key), the
opposite sign of the additive ``M`` of Self-Attention in Matrix Form, "Mask Before Normalizing";
:func:`additive_mask` converts. A causal mask removes real future positions; a padding mask
removes artificial positions (Review, "Distinctions to Keep"). They combine with logical *and*.

With queries and keys of different lengths (cross-attention, ``T_q != T_k``) "the future" needs
an alignment, a named choice (:data:`ALIGNMENTS`): ``"top_left"`` lines query ``i`` up with key
``i`` (PyTorch's ``is_causal``), ``"bottom_right"`` lines the last query up with the last key
(key-value-cache decoding; MLX's ``"causal"``). They agree when ``T_q == T_k``; mixing them up is a
known trap (pytorch/pytorch#103082, #108108).

Left out: other mask shapes (sliding windows, blocks, per-query padding). A batch is one mask per
item (:mod:`attention_core.layer`).
"""

from __future__ import annotations

import numpy as np

ALIGNMENTS: dict[str, str] = {
    "top_left": "Top-left: query i may read keys 1 to i (PyTorch's is_causal)",
    "bottom_right": "Bottom-right: the last query may read every key (key-value-cache decoding)",
}


def _offset(T: int, T_k: int | None, alignment: str | None) -> int:
    """How far right of the diagonal row ``i``'s last visible key sits (0 when aligned top-left)."""
    if alignment is not None and alignment not in ALIGNMENTS:
        raise ValueError(f"unknown causal alignment {alignment!r}; known: {', '.join(ALIGNMENTS)}")
    T_k = T if T_k is None else T_k
    return T_k - T if alignment == "bottom_right" else 0


def causal_mask(T: int, T_k: int | None = None, alignment: str | None = None) -> np.ndarray:
    """Allowed cells of a causal mask: ``allowed[i, j] = j <= i`` (top-left aligned), or
    ``j <= i + T_k - T`` (bottom-right aligned).

    Parameters
    ----------
    T : int
        Number of queries (tokens), ``T >= 1``.
    T_k : int, optional
        Number of keys; defaults to ``T`` (self-attention).
    alignment : {"top_left", "bottom_right"}, optional
        See :data:`ALIGNMENTS`; ``None`` means top-left, the only one when ``T_k == T``.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T_k)
        ``True`` on and left of the aligned diagonal; future cells ``False``.

    Raises
    ------
    ValueError
        An unknown alignment.
    """
    T_k = T if T_k is None else T_k
    return np.tri(T, T_k, k=_offset(T, T_k, alignment), dtype=bool)


def future_cells(T: int, T_k: int | None = None, alignment: str | None = None) -> np.ndarray:
    """Future cells ``j > i``: the cells a causal mask forbids (Self-attention, "Inspect the invariants").

    Parameters
    ----------
    T : int
        Number of queries (tokens), ``T >= 1``.
    T_k, alignment
        As for :func:`causal_mask`.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T_k)
        The complement of :func:`causal_mask` (strict upper triangle when ``T_k == T``).
    """
    return ~causal_mask(T, T_k, alignment)


def padding_mask(key_is_real: np.ndarray, T: int | None = None) -> np.ndarray:
    """Allowed cells of a key-padding mask.

    Parameters
    ----------
    key_is_real : array_like of bool, shape (T_k,)
        ``True`` for a real token, ``False`` for a padding position.
    T : int, optional
        Number of query rows; defaults to ``T_k`` (self-attention).

    Returns
    -------
    numpy.ndarray of bool, shape (T, T_k)
        ``allowed[i, j] = key_is_real[j]`` for every query row ``i``.
    """
    key_is_real = np.asarray(key_is_real, dtype=bool)
    return np.broadcast_to(key_is_real, (key_is_real.size if T is None else T, key_is_real.size)).copy()


def combine_masks(T: int, *, causal: bool, key_is_real: np.ndarray | None = None,
                  T_k: int | None = None, alignment: str | None = None) -> np.ndarray:
    """The allowed cells under a causal mask, a padding mask, both or neither.

    Parameters
    ----------
    T : int
        Number of queries (tokens), ``T >= 1``.
    causal : bool
        Forbid future cells (``j > i``, or as ``alignment`` says).
    key_is_real : array_like of bool, shape (T_k,), optional
        Key-padding mask, ``True`` for a real token; ``None`` for no padding.
    T_k, alignment
        As for :func:`causal_mask`.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T_k)
        ``True`` where query row ``i`` may read key column ``j`` (logical *and* of the masks).
    """
    T_k = T if T_k is None else T_k
    allowed = causal_mask(T, T_k, alignment) if causal else np.ones((T, T_k), dtype=bool)
    if key_is_real is not None:
        allowed &= padding_mask(key_is_real, T)
    return allowed


def additive_mask(allowed: np.ndarray) -> np.ndarray:
    """The additive mask ``M``, so that ``softmax_last(S + M)`` is the masked softmax.

    Self-Attention in Matrix Form, "Mask Before Normalizing".

    Parameters
    ----------
    allowed : array_like of bool, shape (T, T_k)
        ``True`` where a query row may read a key column.

    Returns
    -------
    numpy.ndarray of float64, shape (T, T_k)
        ``0.0`` where allowed, ``-inf`` where forbidden.
    """
    return np.where(allowed, 0.0, -np.inf)
