"""The numeric core against the course's printed numbers, extremes, and a naive reference.

Layer 1 of the test plan (STYLE.md): exact values from Self-attention, "A worked row", and
Self-Attention in Matrix Form, "Extend the Four-Token Trace", the extremes a learner can type
(scores near 1000, ties, one token, a row with no visible key), and random inputs compared with a
double loop written here with :mod:`math`, so a shared numpy mistake in the core and the reference
cannot cancel out.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_core import is_row_stochastic, scaled_dot_product_attention
from attention_core.masks import causal_mask, future_cells

PRINTED_TOL = 5e-4  # the course prints three decimals


def assert_no_nan(result) -> None:
    """No array in a result holds NaN (inf is allowed only in masked_scores)."""
    for name in ("scores", "weights", "row_sums", "future_weight", "output", "contributions"):
        array = getattr(result, name)
        if array is not None:
            assert np.isfinite(array).all(), f"{name} is not finite: {array}"
    assert not np.isnan(result.masked_scores).any()


# --- Self-attention, "A worked row" ------------------------------------------------------------


def test_the_worked_row_causal_as_the_lesson_prints_it() -> None:
    r = scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100], causal=True)
    assert np.round(r.weights[1], 3).tolist() == [0.269, 0.731, 0.0]
    assert r.weights[1, 2] == 0.0  # the future cell is exactly zero, not merely small
    assert r.weights[1, :2].sum() == pytest.approx(1.0, abs=1e-12)
    assert r.output[1] == pytest.approx(17.31, abs=5e-3)
    # The exact value behind the printed 0.269: 1 / (1 + e).
    assert r.weights[1, 0] == pytest.approx(1 / (1 + math.e), rel=1e-12)
    assert r.scores[1].tolist() == [1.0, 2.0, 9.0]  # scores are unmasked
    assert r.masked_scores[1].tolist() == [1.0, 2.0, -math.inf]
    assert r.future_weight[1] == 0.0
    assert r.failed_checks == ()


def test_mask_after_softmax_on_the_worked_row_leaves_the_row_unnormalised() -> None:
    r = scaled_dot_product_attention(
        [1, 1, 1], [1, 2, 9], [10, 20, 100], causal=True, mask_after_softmax=True
    )
    visible = math.exp(1) + math.exp(2)
    expected_prefix = visible / (visible + math.exp(9))  # ≈ 0.0012457
    assert r.weights[1, 2] == 0.0
    assert r.weights[1, :2].sum() == pytest.approx(expected_prefix, rel=1e-12)
    assert round(float(r.row_sums[1]), 5) == 0.00125
    assert r.row_sums[1] < 1
    # What the learner compares: future weight is zero yet the row no longer sums to 1.
    assert r.future_weight.tolist() == [0.0, 0.0, 0.0]
    assert {"row_sums", "mask"} <= set(r.failed_checks)


# --- Self-Attention in Matrix Form, "Extend the Four-Token Trace" ------------------------------


def four_token_trace() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.array([[1, 0], [0, 1], [1, 1], [-1, 1]], dtype=float)
    W_Q = W_K = np.eye(2)
    W_V = np.array([[1, 1], [1, -1]], dtype=float)
    return X @ W_Q, X @ W_K, X @ W_V  # [4, 2] each


def test_the_four_token_trace_as_the_chapter_prints_it() -> None:
    queries, keys, values = four_token_trace()
    r = scaled_dot_product_attention(queries, keys, values, causal=True)
    assert r.d_k == 2
    assert r.scores.shape == r.weights.shape == (4, 4)
    assert r.output.shape == (4, 2)
    assert np.abs(r.scores[3] - [-0.707, 0.707, 0.0, 1.414]).max() < PRINTED_TOL
    assert np.abs(r.weights[3] - [0.065, 0.266, 0.131, 0.539]).max() < PRINTED_TOL
    assert np.abs(r.output[3] - [0.592, -1.279]).max() < PRINTED_TOL
    assert np.round(r.output[3], 3).tolist() == [0.592, -1.279]
    # H = A V for all four rows, and contributions sum to the output.
    np.testing.assert_allclose(r.output, r.weights @ values, rtol=1e-12)
    np.testing.assert_allclose(r.contributions.sum(axis=1), r.output, rtol=1e-12)
    assert r.contributions.shape == (4, 4, 2)
    assert (r.weights[future_cells(4)] == 0.0).all()
    assert r.failed_checks == ()


# --- extremes -----------------------------------------------------------------------------


def test_scores_near_1000_stay_finite() -> None:
    r = scaled_dot_product_attention([1.0, 1.0, 1.0], [1000.0, 999.0, 1001.0], [1, 2, 3])
    assert np.isfinite(r.weights).all()
    np.testing.assert_allclose(r.row_sums, 1.0, atol=1e-12)
    assert r.weights[0].tolist() == [1.0, 0.0, 0.0]
    np.testing.assert_allclose(r.weights[1, :2], [1 / (1 + math.exp(-1)), 1 / (1 + math.e)])
    assert_no_nan(r)
    assert r.failed_checks == ()


def test_scores_near_1000_without_causal_mask() -> None:
    r = scaled_dot_product_attention([1.0, 1.0], [1000.0, 0.0], causal=False)
    assert r.weights.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    assert r.failed_checks == ()


def test_all_equal_scores_give_uniform_rows() -> None:
    T = 5
    r = scaled_dot_product_attention(np.full(T, 3.0), np.full(T, 3.0), np.arange(T), causal=True)
    for i in range(T):
        np.testing.assert_allclose(r.weights[i, : i + 1], 1 / (i + 1), rtol=1e-15)
        assert (r.weights[i, i + 1 :] == 0.0).all()
        assert r.output[i] == pytest.approx(i / 2)  # mean of 0..i
    r = scaled_dot_product_attention(np.zeros((T, 3)), np.zeros((T, 3)), causal=False)
    np.testing.assert_allclose(r.weights, 1 / T, rtol=1e-15)


@pytest.mark.parametrize("causal", [True, False])
def test_one_token(causal: bool) -> None:
    r = scaled_dot_product_attention([2.5], [-4.0], [7.0], causal=causal)
    assert r.T == 1
    assert r.weights.tolist() == [[1.0]]
    assert r.output.tolist() == [7.0]
    assert r.row_sums.tolist() == [1.0]
    assert r.future_weight.tolist() == [0.0]
    assert r.failed_checks == ()


def test_fully_masked_padding_row_is_zero_and_named() -> None:
    # Key 1 is padding; with the causal mask, row 1 can see only key 1, so it sees nothing.
    r = scaled_dot_product_attention(
        [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [10.0, 20.0, 30.0],
        causal=True, padding_mask=[False, True, True],
    )
    assert r.weights[0].tolist() == [0.0, 0.0, 0.0]
    assert r.output[0] == 0.0
    assert r.row_sums[0] == 0.0
    assert r.allowed[0].tolist() == [False, False, False]
    assert_no_nan(r)
    # The other rows are normal distributions over their real, past keys.
    assert r.weights[1].tolist() == [0.0, 1.0, 0.0]
    assert r.weights[2, 0] == 0.0
    assert r.weights[2, 1:].sum() == pytest.approx(1.0)
    assert r.failed_checks == ("row_sums",)
    row_sums = next(c for c in r.checks if c.name == "row_sums")
    assert row_sums.rows == (1,)
    assert "1" in row_sums.message and "no visible key" in row_sums.message


def test_scalar_and_one_column_inputs_agree() -> None:
    q, k, v = [0.5, -1.0, 2.0], [1.0, 0.0, -3.0], [4.0, 5.0, 6.0]
    flat = scaled_dot_product_attention(q, k, v)
    column = scaled_dot_product_attention(
        np.array(q)[:, None], np.array(k)[:, None], np.array(v)[:, None]
    )
    assert flat.d_k == column.d_k == 1
    np.testing.assert_array_equal(flat.weights, column.weights)
    np.testing.assert_array_equal(flat.output, column.output[:, 0])
    assert flat.output.shape == (3,) and column.output.shape == (3, 1)


def test_result_does_not_alias_caller_arrays() -> None:
    queries = np.array([1.0, 2.0])
    r = scaled_dot_product_attention(queries, [1.0, 2.0])
    queries[0] = 100.0
    assert r.queries[0] == 1.0


# --- random inputs against a naive double loop ------------------------------------------------


def naive_attention(queries, keys, values, causal: bool):
    """The four steps of Self-attention, "The attention calculation", one cell at a time, with Python
    floats and :mod:`math`."""
    T, d_k = len(queries), len(queries[0])
    scores = [[0.0] * T for _ in range(T)]
    weights = [[0.0] * T for _ in range(T)]
    for i in range(T):
        for j in range(T):
            scores[i][j] = sum(queries[i][c] * keys[j][c] for c in range(d_k)) / math.sqrt(d_k)
        visible = [j for j in range(T) if not (causal and j > i)]
        top = max(scores[i][j] for j in visible)
        exps = {j: math.exp(scores[i][j] - top) for j in visible}
        total = math.fsum(exps.values())
        for j in visible:
            weights[i][j] = exps[j] / total
    output = None
    if values is not None:
        d_v = len(values[0])
        output = [
            [math.fsum(weights[i][j] * values[j][c] for j in range(T)) for c in range(d_v)]
            for i in range(T)
        ]
    return scores, weights, output


CASES = [(T, d) for T in range(1, 9) for d in range(1, 5)]


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("with_values", [True, False], ids=["values", "no_values"])
@pytest.mark.parametrize(("T", "d"), CASES, ids=[f"T{T}-d{d}" for T, d in CASES])
def test_random_inputs_match_naive_loop(T: int, d: int, causal: bool, with_values: bool) -> None:
    rng = np.random.default_rng(1000 * T + 10 * d + causal)
    queries = rng.normal(scale=3.0, size=(T, d))
    keys = rng.normal(scale=3.0, size=(T, d))
    values = rng.normal(size=(T, d + 1)) if with_values else None

    r = scaled_dot_product_attention(queries, keys, values, causal=causal)
    scores, weights, output = naive_attention(
        queries.tolist(), keys.tolist(), None if values is None else values.tolist(), causal
    )

    np.testing.assert_allclose(r.scores, scores, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.weights, weights, rtol=1e-12, atol=1e-15)
    if with_values:
        np.testing.assert_allclose(r.output, output, rtol=1e-10, atol=1e-12)
    else:
        assert r.output is None and r.contributions is None

    # Invariants through the same predicate the checks use.
    assert is_row_stochastic(r.weights, r.allowed).all()
    np.testing.assert_allclose(r.row_sums, 1.0, atol=1e-12)
    if causal:
        np.testing.assert_array_equal(r.allowed, causal_mask(T))
        assert (r.weights[future_cells(T)] == 0.0).all()
        assert (r.future_weight == 0.0).all()
    assert (r.weights >= 0).all()
    assert r.failed_checks == ()
