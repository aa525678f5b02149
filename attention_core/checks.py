"""The invariants of masked attention as small named checks, in the audit order of seed 004.

Seed 004 ("Audit Order") says to inspect the first incorrect object in dependency order:
input shapes; score shape and scale; allowed and forbidden mask entries; finite softmax values
and row sums; exact zeros at forbidden positions; weighted value shape. Each check here
recomputes what it needs from the inputs instead of trusting the pipeline, so a failure mode
that corrupts one stage is caught at that stage. The UI checklist and the tests call these same
functions. Batch independence is left out: the core takes one sequence at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from attention_core._bools import every, some

if TYPE_CHECKING:
    from attention_core.attention import AttentionResult

ROW_SUM_TOLERANCE = 1e-9

CHECK_TITLES: dict[str, str] = {
    "input_shapes": "Input shapes",
    "score_scale": "Score shape and scale",
    "mask": "Mask applied before softmax",
    "finite_weights": "Finite weights",
    "row_sums": "Row sums equal 1",
    "forbidden_zeros": "Exact zeros at forbidden cells",
    "output": "Output shape and values",
}
CHECK_NAMES: tuple[str, ...] = tuple(CHECK_TITLES)


@dataclass(frozen=True)
class Check:
    """The outcome of one check.

    Attributes
    ----------
    name : str
        Stable identifier, one of :data:`CHECK_NAMES`.
    title : str
        Short title for a checklist.
    passed : bool or None
        ``None`` when the check does not apply (no values were given).
    message : str
        One human sentence saying why it passed or failed.
    rows : tuple of int
        Offending query rows, counted from 1.
    cells : tuple of (int, int)
        Offending (row, column) cells, counted from 1.
    """

    name: str
    title: str
    passed: bool | None
    message: str
    rows: tuple[int, ...] = ()
    cells: tuple[tuple[int, int], ...] = ()


def _check(name: str, passed: bool | None, message: str, rows=(), cells=()) -> Check:
    if not rows and not cells:
        return _outcome(name, passed, message)
    return Check(name, CHECK_TITLES[name], passed, message, tuple(rows), tuple(cells))


@lru_cache(maxsize=1024)
def _outcome(name: str, passed: bool | None, message: str) -> Check:
    # A Check is frozen and an outcome without rows or cells is fully named by these three, so
    # equal ones can be one shared object (building a frozen dataclass costs more than the
    # comparison most checks make).
    return Check(name, CHECK_TITLES[name], passed, message)


@lru_cache(maxsize=1024)
def _passed(name: str, template: str, *numbers: int) -> Check:
    # A pass whose message holds numbers, cached by the constant template and the numbers, so a
    # passing edit neither formats nor hashes a fresh message string.
    return _outcome(name, True, template.format(*numbers))


def _cells(where: np.ndarray) -> list[tuple[int, int]]:
    return [(int(i) + 1, int(j) + 1) for i, j in np.argwhere(where)]


def _list(items) -> str:
    items = list(items)
    shown = ", ".join(str(x) for x in items[:6])
    return shown + (f" and {len(items) - 6} more" if len(items) > 6 else "")


def close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool = False) -> np.ndarray:
    """``numpy.isclose(a, b, rtol, atol, equal_nan)`` for float arrays, elementwise.

    Same rule, ``|a - b| <= atol + rtol * |b|`` with equal infinities close and a finite value
    never close to an infinite one, without ``isclose``'s generic set-up, which costs more than
    the comparison itself on a T×T matrix (the checks run on every edit a learner makes).

    Returns
    -------
    numpy.ndarray of bool, the broadcast shape of ``a`` and ``b``
    """
    with np.errstate(invalid="ignore", over="ignore"):
        result = (a == b) | ((np.abs(a - b) <= atol + rtol * np.abs(b)) & np.isfinite(b))
    if equal_nan:
        result |= np.isnan(a) & np.isnan(b)
    return result


def is_row_stochastic(weights: np.ndarray, allowed: np.ndarray, tol: float = ROW_SUM_TOLERANCE) -> np.ndarray:
    """Which rows are valid distributions over their allowed keys.

    Parameters
    ----------
    weights : numpy.ndarray of float, shape (T, T)
        Attention weights, rows are query positions.
    allowed : numpy.ndarray of bool, shape (T, T)
        Cells the masks allow; a row with none cannot be a distribution.
    tol : float, default ROW_SUM_TOLERANCE (1e-9)
        Largest accepted ``|row sum - 1|``.

    Returns
    -------
    numpy.ndarray of bool, shape (T,)
        ``True`` where the row is finite, non-negative and sums to 1 within ``tol``. A row with
        no allowed key is never stochastic.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        return _row_stochastic(weights, allowed, tol)


def _row_stochastic(weights: np.ndarray, allowed: np.ndarray, tol: float) -> np.ndarray:
    # is_row_stochastic without its errstate, for run_checks, which holds one for every check.
    # A nan or infinite weight makes its row's sum nan or infinite, so this one test also
    # rejects every row that is not finite.
    sums_ok = np.abs(np.add.reduce(weights, axis=-1) - 1.0) <= tol  # weights.sum, unwrapped
    # The row minimum is >= 0 exactly when every weight is (a nan minimum compares False).
    nonneg = np.minimum.reduce(weights, axis=-1) >= 0
    return sums_ok & nonneg & np.logical_or.reduce(allowed, axis=-1)


def check_input_shapes(r: AttentionResult) -> Check:
    """Queries and keys are (T, d_k) with equal shapes; values, if any, have T rows."""
    q, k, v = r.queries_2d, r.keys_2d, r.values_2d
    if q.shape != k.shape:
        return _check("input_shapes", False, f"queries {q.shape} and keys {k.shape} differ in shape")
    if v is not None and v.shape[0] != q.shape[0]:
        return _check("input_shapes", False, f"values have {v.shape[0]} rows for {q.shape[0]} tokens")
    tokens = "{} token" if q.shape[0] == 1 else "{} tokens"
    if v is None:
        return _passed("input_shapes", tokens + ", d_k = {}.", *q.shape)
    return _passed("input_shapes", tokens + ", d_k = {}, d_v = {}.", *q.shape, v.shape[1])


def check_score_scale(r: AttentionResult) -> Check:
    """Scores are (T, T) and equal ``Q K^T / sqrt(d_k)`` (seed 000, ``S = QK^T / sqrt(d_k)``)."""
    T = r.T
    if r.scores.shape != (T, T):
        return _check("score_scale", False, f"scores have shape {r.scores.shape}, expected ({T}, {T})")
    q, k = r.queries_2d, r.keys_2d
    if q.shape != k.shape:  # reported by input_shapes; q·k is undefined here
        return _check("score_scale", False, "scores cannot be recomputed: queries and keys differ in shape")
    expected = q @ k.T
    if r.d_k != 1:  # x / sqrt(1) is exactly x
        expected = expected / math.sqrt(r.d_k)
    # Equal is the usual outcome (the same product); the tolerance is for any other route.
    wrong = None if every(r.scores == expected) else ~close(r.scores, expected, rtol=1e-12, atol=1e-300)
    if wrong is not None and some(wrong):
        return _check(
            "score_scale", False,
            f"scores differ from q·k / sqrt({r.d_k}) at cells {_list(_cells(wrong))}",
            cells=_cells(wrong),
        )
    return _passed("score_scale", "Scores are {0}×{0} and equal q·k / sqrt({1}).", T, r.d_k)


def check_mask(r: AttentionResult) -> Check:
    """Softmax received ``-inf`` at exactly the forbidden cells (seed 003, step 2)."""
    received_masked = r.masked_scores == -np.inf
    # One comparison finds both faults: a masked allowed cell or a visible forbidden one.
    if not some(received_masked == r.allowed):
        forbidden = r.allowed.size - np.count_nonzero(r.allowed)
        if forbidden == 0:
            return _check("mask", True, "No cell is forbidden, so softmax sees every score.")
        return _passed("mask", "All {} forbidden cells were -inf before softmax.", forbidden)
    leaked = ~r.allowed & ~received_masked
    extra = r.allowed & received_masked
    if some(leaked):
        return _check(
            "mask", False,
            f"softmax saw finite scores at forbidden cells {_list(_cells(leaked))}: "
            "the mask was not applied before softmax",
            cells=_cells(leaked),
        )
    return _check("mask", False, f"allowed cells {_list(_cells(extra))} were masked", cells=_cells(extra))


def check_finite_weights(r: AttentionResult) -> Check:
    """Every weight is a finite number (no overflow to inf or nan)."""
    bad = ~np.isfinite(r.weights)
    if some(bad):
        rows = sorted({i for i, _ in _cells(bad)})
        return _check(
            "finite_weights", False,
            f"weights are not finite numbers in rows {_list(rows)} (softmax overflowed)",
            rows=rows, cells=_cells(bad),
        )
    return _check("finite_weights", True, "Every weight is a finite number.")


def check_row_sums(r: AttentionResult) -> Check:
    """Every row with a visible key sums to 1; a row with none is named as failed (seed 003)."""
    stochastic = _row_stochastic(r.weights, r.allowed, ROW_SUM_TOLERANCE)
    if every(stochastic):
        return _check("row_sums", True, "Every row sums to 1.")
    bad = ~stochastic
    no_key = ~r.allowed.any(axis=-1)
    if some(no_key):
        rows = [int(i) + 1 for i in np.flatnonzero(no_key)]
        return _check(
            "row_sums", False,
            f"rows {_list(rows)} have no visible key, so their weights are all zero",
            rows=[int(i) + 1 for i in np.flatnonzero(bad)],
        )
    rows = [int(i) + 1 for i in np.flatnonzero(bad)]
    detail = ", ".join(f"row {i} sums to {r.row_sums[i - 1]:.6g}" for i in rows[:4])
    return _check("row_sums", False, f"rows do not sum to 1: {detail}", rows=rows)


def check_forbidden_zeros(r: AttentionResult) -> Check:
    """Forbidden cells hold exactly 0.0 weight (seed 003, "Inspect the invariants")."""
    if np.count_nonzero(r.weights[~r.allowed]):  # nan counts as weight too
        bad = ~r.allowed & (r.weights != 0.0)
        return _check(
            "forbidden_zeros", False,
            f"forbidden cells {_list(_cells(bad))} carry weight",
            cells=_cells(bad),
        )
    return _check("forbidden_zeros", True, "Every forbidden cell has exactly 0 weight.")


def check_output(r: AttentionResult) -> Check:
    """Output is (T, d_v) and equals ``weights @ values`` (seed 003, step 4)."""
    if r.values is None:
        return _check("output", None, "No values given, so there is no output to check.")
    T, v = r.T, r.values_2d
    if v.shape[0] != T:  # reported by input_shapes; weights @ values is undefined
        return _check("output", False, f"output cannot be recomputed: values have {v.shape[0]} rows")
    out = r.output.reshape(T, -1)
    expected = r.weights @ v
    if out.shape != expected.shape:
        return _check("output", False, f"output has shape {out.shape}, expected {expected.shape}")
    if every(out == expected):  # the usual outcome: the same product
        return _check("output", True, "Each output row is its weights times the values.")
    wrong = ~close(out, expected, rtol=1e-12, atol=1e-12, equal_nan=True).all(axis=-1)
    if some(wrong):
        rows = [int(i) + 1 for i in np.flatnonzero(wrong)]
        return _check("output", False, f"output rows {_list(rows)} are not weights × values", rows=rows)
    return _check("output", True, "Each output row is its weights times the values.")


CHECKS = (
    check_input_shapes,
    check_score_scale,
    check_mask,
    check_finite_weights,
    check_row_sums,
    check_forbidden_zeros,
    check_output,
)


def run_checks(result: AttentionResult) -> tuple[Check, ...]:
    """Run every check on ``result`` in the audit order of seed 004.

    Parameters
    ----------
    result : AttentionResult
        A computed result; its ``checks`` field is ignored.

    Returns
    -------
    tuple of Check
        One per name in :data:`CHECK_NAMES`, in that order. Floating-point warnings from
        non-finite weights are silenced: they are what the checks report.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        return audit(result)


def audit(result: AttentionResult) -> tuple[Check, ...]:
    """:func:`run_checks` for a caller that already silences floating-point warnings."""
    return tuple(check(result) for check in CHECKS)
