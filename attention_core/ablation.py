"""Projection ablations: change one of W_Q, W_K, W_V, W_O and see what moves.

Review, "What the Projection Ablations Establish", makes five controlled statements: changing
``W_Q`` changes what each position requests; changing ``W_K`` changes how each position can be
matched; changing ``W_V`` changes routed content without directly changing attention weights;
changing ``W_O`` changes how weighted value features are written into model width without
changing the attention weights; ``W_O = 0`` makes this branch's output zero. :func:`ablate`
recomputes the layer with one matrix changed and turns the statements that apply into live
checks on the two results, so a learner sees each one hold (or sees why it says nothing here:
a change that moves nothing).

Left out: trained networks. The chapter: these are statements about one forward pass; how a
whole trained network would compensate needs further evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_core.checks import Check
from attention_core.layer import LayerResult

ABLATION_TARGETS: tuple[str, ...] = ("W_Q", "W_K", "W_V", "W_O")
ABLATION_CHANGES: tuple[str, ...] = ("scale", "zero", "edit")
STATEMENTS: dict[str, str] = {
    "W_Q": "Changing W_Q changes what each position requests.",
    "W_K": "Changing W_K changes how each position can be matched.",
    "W_V": "Changing W_V changes routed content without directly changing attention weights.",
    "W_O": "Changing W_O changes how weighted value features are written into model width without "
           "changing the attention weights.",
    "W_O = 0": "Setting W_O = 0 makes this branch's output zero for the current forward pass.",
}


@dataclass(frozen=True)
class Ablation:
    """One ablation: the layer before and after one projection matrix changed.

    Attributes
    ----------
    target : {"W_Q", "W_K", "W_V", "W_O"}
    change : {"scale", "zero", "edit"}
    factor : float or None
        The scale factor (``change == "scale"``).
    matrix : numpy.ndarray
        The changed matrix, same shape as the original.
    before, after : LayerResult
    statements : tuple of Check
        The chapter's statements for this target as live checks, named ``ablation_w_q`` ...
        ``ablation_w_o_zero``; ``passed`` is ``None`` where the change moved nothing the
        statement is about (scaling by 1, a zero X), so the statement cannot be seen here.
    """

    target: str
    change: str
    factor: float | None
    matrix: np.ndarray
    before: LayerResult
    after: LayerResult
    statements: tuple[Check, ...]


def _stack(layer: LayerResult, what: str) -> np.ndarray | None:
    parts = [getattr(m, what) for m in layer.maps]
    if any(p is None for p in parts):
        return None
    return np.concatenate([np.asarray(p, dtype=np.float64).reshape(len(p), -1) for p in parts])


def _moved(a: np.ndarray | None, b: np.ndarray | None) -> list[int]:
    """Rows (from 1, over the whole batch) where ``a`` and ``b`` differ; exact, nan equal to nan."""
    if a is None or b is None:
        return []
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return [int(i) + 1 for i in np.flatnonzero(~same.all(axis=-1))]


def _rows(rows: list[int], B: int = 1, T: int = 1) -> str:
    """Rows over the whole batch (from 1) as a reader of ``B`` items of ``T`` rows finds them:
    "rows 1, 2", or "item 1 rows 1, 2 and item 2 row 3"."""
    def some(found: list[int]) -> str:
        shown = ", ".join(str(r) for r in found[:6])
        return f"row{'' if len(found) == 1 else 's'} {shown}" + (
            f" and {len(found) - 6} more" if len(found) > 6 else "")

    if B == 1:
        return some(rows)
    items: dict[int, list[int]] = {}
    for r in rows:
        items.setdefault((r - 1) // T + 1, []).append((r - 1) % T + 1)
    return " and ".join(f"item {b} {some(found)}" for b, found in items.items())


def _statements(target: str, before: LayerResult, after: LayerResult, matrix: np.ndarray) -> tuple[Check, ...]:
    weights = _moved(_stack(before, "weights"), _stack(after, "weights"))
    h = _moved(_stack(before, "output"), _stack(after, "output"))
    y = _moved(_stack(before, "y"), _stack(after, "y"))
    B, T = before.B, before.T

    def rows(found: list[int], per_item: int = T) -> str:
        return _rows(found, B, per_item)

    checks = []

    def add(key: str, name: str, passed: bool | None, message: str) -> None:
        checks.append(Check(name, STATEMENTS[key], passed, message))

    if target in ("W_Q", "W_K"):
        what, moved_inputs = ("Q", "queries") if target == "W_Q" else ("K", "keys")
        inputs = _moved(_stack(before, moved_inputs), _stack(after, moved_inputs))
        moved = rows(inputs, T if target == "W_Q" else before.T_k)  # K has T_k rows per item
        if not inputs:
            same = np.array_equal(matrix, getattr(before, target.lower()))  # scaled by 1, or edited back
            why = f"{target} itself did not change" if same else f"the change to {target} met a zero X"
            add(target, f"ablation_{target.lower()}", None, f"{what} did not change ({why}), so nothing can move.")
        elif weights:
            add(target, f"ablation_{target.lower()}", True,
                f"{what} moved in {moved}, and with it the weights of {rows(weights)}.")
        elif all((m.allowed.sum(axis=-1) <= 1).all() for m in before.maps):
            # One visible key (or none) per row: its weight is 1 (or 0) whatever the scores.
            add(target, f"ablation_{target.lower()}", None,
                f"{what} moved in {moved}, but no row sees more than one key, so no weight can move.")
        else:
            add(target, f"ablation_{target.lower()}", False,
                f"{what} moved in {moved} but no weight moved: every row's visible scores "
                "shifted together.")
    else:
        content = h if target == "W_V" else y  # what the statement says moves
        passed = False if weights else (True if content else None)
        add(target, f"ablation_{target.lower()}", passed,
            _unchanged_message(target, rows(weights) if weights else "", rows(h) if h else "", rows(y) if y else ""))
        if target == "W_O" and not matrix.any():
            out = _stack(after, "y")
            zero = out is not None and not out.any()
            add("W_O = 0", "ablation_w_o_zero", zero,
                "Every number of Y is exactly 0." if zero else "Y is not all zero.")
    return tuple(checks)


def _unchanged_message(target: str, weights: str, h: str, y: str) -> str:
    """The W_V or W_O statement's sentence; each argument says where that array moved ("" if nowhere)."""
    if weights:
        return f"The weights moved in {weights}: this change reached the scores."
    if target == "W_V":
        if not h:
            return "Every weight is unchanged, and so is H: this change to W_V moved no value that has weight."
        return f"Every weight is exactly unchanged; H moved in {h}."
    if not y:
        return "Every weight and H are unchanged, and so is Y: this change to W_O moved nothing."
    return f"Every weight and H are exactly unchanged; Y moved in {y}."


def changed_matrix(original: np.ndarray, change: str, *, factor: float | None = None,
                   matrix: object = None) -> np.ndarray:
    """The matrix an ablation puts in place of ``original``.

    Parameters
    ----------
    original : numpy.ndarray, shape (rows, columns)
    change : {"scale", "zero", "edit"}
        ``factor * original``, all zeros, or ``matrix`` as given (an edited copy).
    factor : float, optional
        Required for ``"scale"``; finite.
    matrix : array_like of float, optional
        Required for ``"edit"``; the shape of ``original``, finite.

    Returns
    -------
    numpy.ndarray of float64, the shape of ``original``

    Raises
    ------
    ValueError
        An unknown change, a missing or non-finite factor (or one that takes a number of the
        matrix beyond float64), or an edited matrix of another shape or with a number that is
        not finite.
    """
    if change == "scale":
        if factor is None or not np.isfinite(factor):
            raise ValueError(f"scaling needs a finite factor, not {factor!r}")
        with np.errstate(over="ignore"):
            scaled = original * float(factor)
        if not np.isfinite(scaled).all():  # else the layer would blame a cell of the W for it
            raise ValueError(f"scaling by {float(factor):g} overflows float64 (beyond ±1.8e308); use a smaller factor")
        return scaled
    if change == "zero":
        return np.zeros_like(original)
    if change == "edit":
        try:
            edited = np.array(matrix, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("the edited matrix must be rows of numbers") from None
        if edited.shape != original.shape:
            raise ValueError(f"the edited matrix is {'×'.join(map(str, edited.shape)) or 'empty'}; it must "
                             f"keep the shape {original.shape[0]}×{original.shape[1]}")
        if not np.isfinite(edited).all():
            raise ValueError("the edited matrix holds a number that is not finite")
        return edited
    raise ValueError(f"unknown change {change!r}; known: {', '.join(ABLATION_CHANGES)}")


def ablate(layer: LayerResult, target: str, change: str, *, factor: float | None = None,
           matrix: object = None) -> Ablation:
    """Recompute ``layer`` with one projection matrix changed, and check the chapter's statements.

    Review, "What the Projection Ablations Establish".

    Parameters
    ----------
    layer : LayerResult
        A matrix-mode layer (from :func:`~attention_core.layer.attention_layer`).
    target : {"W_Q", "W_K", "W_V", "W_O"}
    change, factor, matrix
        As for :func:`changed_matrix`.

    Returns
    -------
    Ablation

    Raises
    ------
    ValueError
        Not a matrix-mode layer, an unknown target, a target the layer does not have (W_V or W_O
        not given), or a bad change (see :func:`changed_matrix`).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_core.layer import attention_layer
    >>> layer = attention_layer([[1, 0], [0, 1], [1, 1]], np.eye(2), np.eye(2), np.eye(2), np.eye(2))
    >>> a = ablate(layer, "W_V", "scale", factor=2.0)
    >>> [s.passed for s in a.statements]
    [True]

    Zeroing W_O leaves every weight as it was and makes Y exactly zero:

    >>> z = ablate(layer, "W_O", "zero")
    >>> [(s.name, s.passed) for s in z.statements], bool(z.after.y.any())
    ([('ablation_w_o', True), ('ablation_w_o_zero', True)], False)
    """
    if layer.x is None:
        raise ValueError("an ablation changes a projection matrix, so it needs a layer projected from X")
    if target not in ABLATION_TARGETS:
        raise ValueError(f"unknown ablation target {target!r}; known: {', '.join(ABLATION_TARGETS)}")
    original = getattr(layer, target.lower())
    if original is None:
        raise ValueError(f"this layer has no {target} to change")
    new = changed_matrix(original, change, factor=factor, matrix=matrix)
    after = layer.recompute(**{target.lower(): new})
    return Ablation(target=target, change=change, factor=None if change != "scale" else float(factor),
                    matrix=new, before=layer, after=after,
                    statements=_statements(target, layer, after, new))
