"""The invariants of masked attention as small named checks, in the course's audit order.

Review, "Audit Order", says to inspect the first incorrect object in dependency order, in nine
steps: input and projection shapes; Q, K and V shapes and selected rows; score shape and scale;
allowed and forbidden mask entries; finite softmax values and row sums; exact zeroes at forbidden
positions; weighted value shape and selected rows; output-projection orientation and final width;
independence between batch items. :data:`CHECK_STEPS` maps each check to its step (step 5 has two
checks). Each check here recomputes what it needs from the inputs instead of trusting the
pipeline, so a failure mode that corrupts one stage is caught at that stage; the first failed one
names :data:`CHECK_OBJECTS`, the object to inspect. The UI checklist and the tests call these
same functions.

Left out: batch independence needs more than one sequence, so on one result it does not apply;
:mod:`attention_core.layer` runs it over a batch. No tolerance can be tuned per check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attention_core.attention import AttentionResult

ROW_SUM_TOLERANCE = 1e-9

CHECK_TITLES: dict[str, str] = {
    "input_shapes": "Input shapes",
    "projections": "Q, K and V shapes and rows",
    "score_scale": "Score shape and scale",
    "mask": "Mask applied before softmax",
    "finite_weights": "Finite weights",
    "row_sums": "Row sums equal 1",
    "forbidden_zeros": "Exact zeros at forbidden cells",
    "output": "Output shape and values",
    "output_projection": "Output projection orientation and width",
    "batch_independence": "Independence between batch items",
}
CHECK_NAMES: tuple[str, ...] = tuple(CHECK_TITLES)
# The step of Review, "Audit Order", each check belongs to; the object that step inspects.
CHECK_STEPS: dict[str, int] = {
    "input_shapes": 1, "projections": 2, "score_scale": 3, "mask": 4, "finite_weights": 5,
    "row_sums": 5, "forbidden_zeros": 6, "output": 7, "output_projection": 8, "batch_independence": 9,
}
CHECK_OBJECTS: dict[str, str] = {
    "input_shapes": "the inputs and their shapes",
    "projections": "Q, K and V",
    "score_scale": "the scores S",
    "mask": "the mask M",
    "finite_weights": "the weights A",
    "row_sums": "the weights A",
    "forbidden_zeros": "the weights A at forbidden cells",
    "output": "the weighted values H = A V",
    "output_projection": "the output Y = H W_O",
    "batch_independence": "the batch axis",
}


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
    return Check(name, CHECK_TITLES[name], passed, message, tuple(rows), tuple(cells))


def _cells(where: np.ndarray) -> list[tuple[int, int]]:
    return [(int(i) + 1, int(j) + 1) for i, j in np.argwhere(where)]


def _list(items) -> str:
    items = list(items)
    shown = ", ".join(str(x) for x in items[:6])
    return shown + (f" and {len(items) - 6} more" if len(items) > 6 else "")


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
    # A nan or infinite weight makes its row's sum nan or infinite, so the sum test also rejects
    # every row that is not finite; a nan minimum compares False too.
    with np.errstate(invalid="ignore"):
        sums_ok = np.abs(weights.sum(axis=-1) - 1.0) <= tol
        nonneg = weights.min(axis=-1) >= 0
    return sums_ok & nonneg & allowed.any(axis=-1)


def check_input_shapes(r: AttentionResult) -> Check:
    """Queries (T, d_k) and keys (T_k, d_k) share their width; values, if any, have T_k rows; in
    matrix mode X is (T, d_model), X_kv (T_k, d_model), W_Q and W_K (d_model, d_k), W_V
    (d_model, d_v) and W_O (d_v, d_model)."""
    q, k, v = r.queries_2d, r.keys_2d, r.values_2d
    if q.shape[1] != k.shape[1]:
        return _check("input_shapes", False, f"queries {q.shape} and keys {k.shape} differ in width")
    if v is not None and v.shape[0] != k.shape[0]:
        return _check("input_shapes", False, f"values have {v.shape[0]} rows for {k.shape[0]} keys")
    (T, d_k), T_k = q.shape, k.shape[0]
    p = r.projection
    shapes = f"{T} token{'' if T == 1 else 's'}" + (f", {T_k} key{'' if T_k == 1 else 's'}" if T_k != T else "")
    shapes += ("" if p is None else f", d_model = {p.d_model}") + f", d_k = {d_k}"
    if v is not None:
        shapes += f", d_v = {v.shape[1]}"
    if p is None:
        return _check("input_shapes", True, shapes + ".")
    # Review, "Audit Order", starts with the projections: X is T×d_model and each W maps d_model on.
    expected = {"X": (T, p.d_model), "W_Q": (p.d_model, d_k), "W_K": (p.d_model, d_k)}
    found = {"X": p.x.shape, "W_Q": p.w_q.shape, "W_K": p.w_k.shape}
    if p.x_kv is not None:
        expected["X_kv"], found["X_kv"] = (T_k, p.d_model), p.x_kv.shape
    if v is not None:
        expected["W_V"], found["W_V"] = (p.d_model, v.shape[1]), (None if p.w_v is None else p.w_v.shape)
    if p.w_o is not None:
        expected["W_O"], found["W_O"] = (None if v is None else v.shape[1], p.d_model), p.w_o.shape
    wrong = [name for name in expected if found[name] != expected[name]]
    if wrong:
        return _check("input_shapes", False, "; ".join(
            f"{name} is {found[name]}, expected {expected[name]}" for name in wrong))
    return _check("input_shapes", True, shapes + ": " + ", ".join(
        f"{name} {rows}×{cols}" for name, (rows, cols) in found.items()) + ".")


def check_projections(r: AttentionResult) -> Check:
    """Q is (T, d_k), K (T_k, d_k), V (T_k, d_v); in matrix mode every row equals its
    projection, ``Q = X W_Q``, ``K = X_kv W_K``, ``V = X_kv W_V`` (Review, "Audit Order", step 2)."""
    q, k, v = r.queries_2d, r.keys_2d, r.values_2d
    shapes = f"Q is {q.shape[0]}×{q.shape[1]}, K {k.shape[0]}×{k.shape[1]}" + (
        "" if v is None else f", V {v.shape[0]}×{v.shape[1]}")
    p = r.projection
    if p is None:
        return _check("projections", True, shapes + " (given, not projected).")
    source = p.x if p.x_kv is None else p.x_kv
    kv = "X" if p.x_kv is None else "X_kv"
    for name, got, x, w, weight in (("Q", q, p.x, p.w_q, "W_Q"), ("K", k, source, p.w_k, "W_K"),
                                    ("V", v, source, p.w_v, "W_V")):
        if got is None or w is None:
            continue
        expected = x @ w  # [T, d_model] @ [d_model, d] -> [T, d]
        if got.shape != expected.shape:
            return _check("projections", False, f"{name} is {got.shape[0]}×{got.shape[1]}, expected "
                          f"{expected.shape[0]}×{expected.shape[1]} ({'X' if name == 'Q' else kv} {weight})")
        wrong = ~np.isclose(got, expected, rtol=1e-12, atol=1e-300).all(axis=-1)
        if wrong.any():
            rows = [int(i) + 1 for i in np.flatnonzero(wrong)]
            return _check("projections", False, f"{name} rows {_list(rows)} differ from "
                          f"{'X' if name == 'Q' else kv} {weight}", rows=rows)
    return _check("projections", True, shapes + f": every row equals X W_Q, {kv} W_K"
                  + ("" if v is None else f", {kv} W_V") + ".")


def check_score_scale(r: AttentionResult) -> Check:
    """Scores are (T, T) and equal ``Q K^T / sqrt(d_k)`` (Self-Attention in Matrix Form).

    Recomputed as ``(Q / sqrt(d_k)) K^T``, the pipeline's order, so a score whose scaled value
    is finite is checked against a finite number.
    """
    T, T_k = r.T, r.T_k
    if r.scores.shape != (T, T_k):
        return _check("score_scale", False, f"scores have shape {r.scores.shape}, expected ({T}, {T_k})")
    q, k = r.queries_2d, r.keys_2d
    if q.shape[1] != k.shape[1]:  # reported by input_shapes; q·k is undefined here
        return _check("score_scale", False, "scores cannot be recomputed: queries and keys differ in width")
    expected = (q / math.sqrt(r.d_k)) @ k.T  # [T, d_k] @ [d_k, T_k] -> [T, T_k]
    wrong = ~np.isclose(r.scores, expected, rtol=1e-12, atol=1e-300)
    if wrong.any():
        return _check(
            "score_scale", False,
            f"scores differ from q·k / sqrt({r.d_k}) at cells {_list(_cells(wrong))}",
            cells=_cells(wrong),
        )
    return _check("score_scale", True, f"Scores are {T}×{T_k} and equal q·k / sqrt({r.d_k}).")


def check_mask(r: AttentionResult) -> Check:
    """Softmax received ``-inf`` at exactly the forbidden cells.

    Self-attention, "The attention calculation", step 2.
    """
    received_masked = r.masked_scores == -np.inf
    leaked = ~r.allowed & ~received_masked
    extra = r.allowed & received_masked
    if not leaked.any() and not extra.any():
        forbidden = int((~r.allowed).sum())
        if forbidden == 0:
            return _check("mask", True, "No cell is forbidden, so softmax sees every score.")
        if forbidden == 1:
            return _check("mask", True, "The 1 forbidden cell was -inf before softmax.")
        return _check("mask", True, f"All {forbidden} forbidden cells were -inf before softmax.")
    if leaked.any():
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
    if bad.any():
        rows = sorted({i for i, _ in _cells(bad)})
        return _check(
            "finite_weights", False,
            f"weights are not finite numbers in rows {_list(rows)} (softmax overflowed)",
            rows=rows, cells=_cells(bad),
        )
    return _check("finite_weights", True, "Every weight is a finite number.")


def check_row_sums(r: AttentionResult) -> Check:
    """Every row with a visible key sums to 1; a row with none is named as failed.

    Self-attention, "Inspect the invariants".
    """
    stochastic = is_row_stochastic(r.weights, r.allowed)
    if stochastic.all():
        return _check("row_sums", True, "Every row sums to 1.")
    bad = [int(i) + 1 for i in np.flatnonzero(~stochastic)]
    no_key = [int(i) + 1 for i in np.flatnonzero(~r.allowed.any(axis=-1))]
    parts = []
    if no_key:
        if len(no_key) == 1:
            parts.append(f"row {no_key[0]} has no visible key, so no weights over allowed keys can sum to 1")
        else:
            parts.append(f"rows {_list(no_key)} have no visible key, so no weights over allowed keys can sum to 1")
    others = [i for i in bad if i not in no_key]
    if others:
        detail = ", ".join(f"row {i} sums to {r.row_sums[i - 1]:.6g}" for i in others[:4])
        parts.append(f"rows do not sum to 1: {detail}")
    return _check("row_sums", False, "; ".join(parts), rows=bad)


def check_forbidden_zeros(r: AttentionResult) -> Check:
    """Forbidden cells hold exactly 0.0 weight (Self-attention, "Inspect the invariants")."""
    bad = ~r.allowed & (r.weights != 0.0)  # nan != 0, so a nan counts as weight too
    if bad.any():
        return _check(
            "forbidden_zeros", False,
            f"forbidden cells {_list(_cells(bad))} carry weight",
            cells=_cells(bad),
        )
    return _check("forbidden_zeros", True, "Every forbidden cell has exactly 0 weight.")


def check_output(r: AttentionResult) -> Check:
    """Output is (T, d_v) and equals ``weights @ values``.

    Self-attention, "The attention calculation", step 4.
    """
    if r.values is None:
        return _check("output", None, "No values given, so there is no output to check.")
    T, v = r.T, r.values_2d
    if v.shape[0] != r.T_k:  # reported by input_shapes; weights @ values is undefined
        return _check("output", False, f"output cannot be recomputed: values have {v.shape[0]} rows")
    if r.output is None:
        return _check("output", False, r.output_error or "the output was not formed")
    out = r.output.reshape(T, -1)
    expected = r.weights @ v
    if out.shape != expected.shape:
        return _check("output", False, f"output has shape {out.shape}, expected {expected.shape}")
    wrong = ~np.isclose(out, expected, rtol=1e-12, atol=1e-12, equal_nan=True).all(axis=-1)
    if wrong.any():
        rows = [int(i) + 1 for i in np.flatnonzero(wrong)]
        return _check("output", False, f"output rows {_list(rows)} are not weights × values", rows=rows)
    return _check("output", True, "Each output row is its weights times the values.")


def check_output_projection(r: AttentionResult) -> Check:
    """``Y`` is (T, d_model) and equals ``H W_O`` (Review, "The Complete Layer"; "Audit Order",
    step 8: "A passing final shape is weak evidence")."""
    p = r.projection
    if p is None or p.w_o is None:
        return _check("output_projection", None, "No W_O given, so the layer ends at H = A V.")
    # Step 8 audits how H is projected; an H that is missing or of the wrong width is step 7's
    # failure (the output check), so this step has nothing of its own to judge.
    if r.output is None:
        return _check("output_projection", None, "Y cannot be checked: there is no H to project (see the output "
                      "check).")
    h = r.output.reshape(r.T, -1)
    if h.shape[1] != p.w_o.shape[0]:
        return _check("output_projection", None, f"Y cannot be checked: H is {h.shape[0]}×{h.shape[1]}, not "
                      f"{r.T}×{p.w_o.shape[0]} (T × d_v), so W_O cannot project it (see the output check).")
    if r.y is None:
        return _check("output_projection", False, r.y_error or "Y was not formed")
    expected = h @ p.w_o  # [T, d_v] @ [d_v, d_model] -> [T, d_model]
    if r.y.shape != expected.shape:
        return _check("output_projection", False, f"Y is {r.y.shape[0]}×{r.y.shape[1]}, expected "
                      f"{expected.shape[0]}×{expected.shape[1]} (T × d_model)")
    # A nan in H (invalid weights, reported by finite_weights) is a nan in both.
    wrong = ~np.isclose(r.y, expected, rtol=1e-12, atol=1e-12, equal_nan=True).all(axis=-1)
    if wrong.any():
        rows = [int(i) + 1 for i in np.flatnonzero(wrong)]
        return _check("output_projection", False, f"Y has the right shape, {r.y.shape[0]}×{r.y.shape[1]}, "
                      f"but rows {_list(rows)} differ from H W_O: the output projection is misapplied "
                      "(transposed?)", rows=rows)
    return _check("output_projection", True, f"Y = H W_O is {r.y.shape[0]}×{r.y.shape[1]}: model width "
                  f"d_model = {p.d_model} again.")


def check_batch_independence(r: AttentionResult) -> Check:
    """One sequence has no other batch item to mix with; :mod:`attention_core.layer` runs the
    real check over a batch (Review, "Audit Order", step 9)."""
    # The words of a layer of one item (attention_core.layer), so a one-sequence result and a layer of
    # B = 1 have equal checks and a saved run reopens to the same record whichever built it.
    return _check("batch_independence", None, "One batch item, so there is no other sequence to mix with.")


CHECKS = (
    check_input_shapes,
    check_projections,
    check_score_scale,
    check_mask,
    check_finite_weights,
    check_row_sums,
    check_forbidden_zeros,
    check_output,
    check_output_projection,
    check_batch_independence,
)


def run_checks(result: AttentionResult) -> tuple[Check, ...]:
    """Run every check on ``result`` in the order of Review, "Audit Order".

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
        return tuple(check(result) for check in CHECKS)
