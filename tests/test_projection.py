"""Matrix mode: the four-token trace (Self-Attention in Matrix Form, "Extend the Four-Token Trace")
to its decimals, projections checked field by field, and row steps and exposure for vectors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from attention_core import (
    AttentionInputError,
    exposure,
    project,
    row_steps,
    run_checks,
    scaled_dot_product_attention,
    self_attention,
)

# Self-Attention in Matrix Form, "Extend the Four-Token Trace".
X = [[1, 0], [0, 1], [1, 1], [-1, 1]]
W_Q = W_K = [[1, 0], [0, 1]]
W_V = [[1, 1], [1, -1]]


def naive_self_attention(x, w_q, w_k, w_v, causal=True):
    """A double loop straight from the formulas of Self-Attention in Matrix Form, to hold the
    pipeline to."""
    x, w_q, w_k, w_v = (np.asarray(a, dtype=float) for a in (x, w_q, w_k, w_v))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    T, d_k = q.shape
    weights = np.zeros((T, T))
    for i in range(T):
        visible = [j for j in range(T) if j <= i or not causal]
        s = {j: sum(q[i, c] * k[j, c] for c in range(d_k)) / math.sqrt(d_k) for j in visible}
        top = max(s.values())
        total = sum(math.exp(s[j] - top) for j in visible)
        for j in visible:
            weights[i, j] = math.exp(s[j] - top) / total
    return weights, weights @ v


def test_four_token_trace_row_4_to_the_chapters_decimals() -> None:
    r = self_attention(X, W_Q, W_K, W_V, causal=True)
    assert np.round(r.scores[3], 3).tolist() == [-0.707, 0.707, 0.0, 1.414]
    assert np.round(r.weights[3], 3).tolist() == [0.065, 0.266, 0.131, 0.539]
    assert np.round(r.output[3], 3).tolist() == [0.592, -1.279]
    assert r.failed_checks == ()
    assert (r.T, r.d_k, r.d_v, r.projection.d_model, r.input_mode) == (4, 2, 2, 2, "matrix")


def test_four_token_trace_every_row_matches_a_naive_double_loop() -> None:
    r = self_attention(X, W_Q, W_K, W_V)
    weights, output = naive_self_attention(X, W_Q, W_K, W_V)
    np.testing.assert_allclose(r.weights, weights, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(r.output, output, rtol=1e-12, atol=1e-15)  # H = A V, 4 × 2
    # The projections are what the result attended over, and X and the W's ride along.
    np.testing.assert_array_equal(r.values, [[1, 1], [1, -1], [2, 0], [0, -2]])
    np.testing.assert_array_equal(r.queries, X)
    np.testing.assert_array_equal(r.projection.x, X)
    np.testing.assert_array_equal(r.projection.w_v, W_V)
    plain = scaled_dot_product_attention(r.queries, r.keys, r.values)
    np.testing.assert_array_equal(plain.weights, r.weights)
    assert plain.projection is None and plain.input_mode == "vector"


def test_matrix_mode_is_general_in_its_widths() -> None:
    rng = np.random.default_rng(3)
    for T, d_model, d_k, d_v in [(1, 1, 1, 1), (3, 5, 2, 7), (8, 4, 4, 4), (16, 6, 9, 3)]:
        x, w_q, w_k, w_v = (rng.normal(size=s) for s in [(T, d_model), (d_model, d_k), (d_model, d_k),
                                                         (d_model, d_v)])
        r = self_attention(x, w_q, w_k, w_v, causal=bool(T % 2))
        weights, output = naive_self_attention(x, w_q, w_k, w_v, causal=bool(T % 2))
        np.testing.assert_allclose(r.weights, weights, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(r.output, output, rtol=1e-10, atol=1e-12)
        assert r.output.shape == (T, d_v) and r.contributions.shape == (T, T, d_v)


def test_without_w_v_there_are_no_values() -> None:
    r = self_attention(X, W_Q, W_K)
    assert r.values is None and r.output is None and r.d_v is None and r.projection.w_v is None


def test_padding_and_failure_modes_reach_the_pipeline() -> None:
    r = self_attention(X, W_Q, W_K, W_V, padding_mask=[True, True, False, True], failure_mode="no_scaling")
    assert r.mode.name == "no_scaling" and r.failed_checks == ("score_scale",)
    assert (r.weights[:, 2] == 0).all()
    np.testing.assert_allclose(r.scores, np.asarray(X) @ np.asarray(X).T)  # q·k, undivided


# --- refusals: the field, the row (for X, the token) and the column, counted from 1 -----------

REFUSED = {
    "text in X": ((X[:2] + [[1, "a"]], W_Q, W_K), "X", 3, 3, 2, "X row 3 (token 3), column 2 is not a number"),
    "nan in X": (([[1, 0], [math.nan, 1]], W_Q, W_K), "X", 2, 2, 1, "X row 2 (token 2), column 1 is not a finite"),
    "ragged X": (([[1, 0], [1]], W_Q, W_K), "X", 2, 2, None, "X row 2 (token 2) has a different number"),
    "boolean in W_Q": ((X, [[1, 0], [True, 1]], W_K), "W_Q", None, 2, 1, "W_Q row 2, column 1 is not a number"),
    "inf in W_K": ((X, W_Q, [[1, 0], [0, math.inf]]), "W_K", None, 2, 2, "W_K row 2, column 2 is not a finite"),
    "W_V one row short": ((X, W_Q, W_K, [[1, 1]]), "W_V", None, 2, None, "row 2 is missing"),
    "W_Q one row too many": ((X, [[1], [0], [2]], [[1], [0]]), "W_Q", None, 3, None, "row 3 is extra"),
    "W_K narrower than W_Q": ((X, W_Q, [[1], [0]]), "W_K", None, None, None, "same width d_k"),
    "X one-dimensional": (([1, 2, 3], [[1]], [[1]]), "X", None, None, None, "must be a matrix"),
    "empty W_Q": ((X, [], W_K), "W_Q", None, None, None, "must be a matrix"),
    "17 tokens": (([[1.0]] * 17, [[1]], [[1]]), "X", None, None, None, "at most 16"),
    "overflowing Q": (([[1e300, 1e300]], [[1e10], [0]], [[1], [0]]), "X", 1, 1, None, "Q = X W_Q overflows"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_projection_errors_name_field_row_and_column(case: str) -> None:
    args, field, token, row, column, words = REFUSED[case]
    with pytest.raises(AttentionInputError) as caught:
        project(*args)
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.field, error.token, error.row, error.column) == (field, token, row, column)
    assert words in str(error) and field in str(error)


def test_token_field_errors_keep_their_token_as_row() -> None:
    with pytest.raises(AttentionInputError) as caught:
        scaled_dot_product_attention([1, 2, "x"], [1, 2, 3])
    assert (caught.value.field, caught.value.token, caught.value.row, caught.value.column) == ("queries", 3, 3, None)


# --- row steps and exposure with vectors ------------------------------------------------------


def test_row_steps_show_the_dot_product_term_by_term_then_the_division() -> None:
    s = row_steps(self_attention(X, W_Q, W_K, W_V), 3)
    assert s.d_k == 2 and s.scale == math.sqrt(2)
    # q_4 = [-1, 1] against k_1..k_4: the terms, their sums (raw scores), then / sqrt(2).
    assert s.products.tolist() == [[-1.0, 0.0], [-0.0, 1.0], [-1.0, 1.0], [1.0, 1.0]]
    assert s.raw_scores.tolist() == [-1.0, 1.0, 0.0, 2.0]
    np.testing.assert_array_equal(s.products.sum(axis=-1), s.raw_scores)
    np.testing.assert_allclose(s.scores, s.raw_scores / math.sqrt(2), rtol=1e-15)


def test_row_steps_give_each_sources_contribution_as_a_vector() -> None:
    # Self-Attention in Matrix Form, "Keep Four Quantities Separate": A_ij v_j per source, summing
    # to h_4.
    s = row_steps(self_attention(X, W_Q, W_K, W_V), 3)
    assert s.weighted.shape == (4, 2)
    np.testing.assert_allclose(s.weighted, s.weights[:, None] * s.mixed, rtol=1e-15)
    np.testing.assert_allclose(s.weighted.sum(axis=0), s.output, rtol=1e-12)
    assert np.round(s.output, 3).tolist() == [0.592, -1.279]
    # The largest weight need not give the largest contribution: source 4 (value [0, -2]) adds
    # nothing to h_4's first component, where source 2 (half its weight) adds the most.
    assert s.weights.argmax() == 3 and s.weighted[3, 0] == 0.0
    assert s.weighted[:, 0].argmax() == 1


def test_row_steps_along_a_column_take_every_query_against_one_key() -> None:
    r = self_attention(X, W_Q, W_K, W_V, failure_mode="wrong_axis")
    s = row_steps(r, 0)
    assert s.along == "column"
    np.testing.assert_array_equal(s.products.sum(axis=-1), r.raw_scores[:, 0])


def test_no_scaling_is_exposed_from_d_k_2_and_said_to_be_unexposable_at_d_k_1() -> None:
    scalar = scaled_dot_product_attention([1, 2, 3], [3, 1, 2], failure_mode="no_scaling")
    assert scalar.failed_checks == ()
    assert exposure(scalar).startswith("d_k = 1, so dividing by sqrt(1) changes nothing")
    assert "d_k = 2 or more" in exposure(scalar)
    # The same numbers as one-wide vectors are still d_k = 1.
    column = scaled_dot_product_attention([[1], [2], [3]], [[3], [1], [2]], failure_mode="no_scaling")
    assert column.d_k == 1 and exposure(column) == exposure(scalar)
    for d_k in (2, 3, 4):
        q = np.ones((3, d_k))
        correct = scaled_dot_product_attention(q, q)
        broken = scaled_dot_product_attention(q, q, failure_mode="no_scaling")
        assert exposure(broken) is None and broken.failed_checks == ("score_scale",)
        np.testing.assert_allclose(broken.scores, correct.scores * math.sqrt(d_k))  # sharper rows
    matrix = self_attention(X, W_Q, W_K, W_V, failure_mode="no_scaling")
    assert exposure(matrix) is None and matrix.failed_checks == ("score_scale",)


# --- Review, "Audit Order", starts with the projection shapes ---------------------------------


def test_the_input_shapes_check_names_the_projection_shapes() -> None:
    check = self_attention(X, W_Q, W_K, W_V).checks[0]
    assert check.name == "input_shapes" and check.passed
    assert check.message == "4 tokens, d_model = 2, d_k = 2, d_v = 2: X 4×2, W_Q 2×2, W_K 2×2, W_V 2×2."
    assert self_attention(X, W_Q, W_K).checks[0].message == "4 tokens, d_model = 2, d_k = 2: X 4×2, W_Q 2×2, W_K 2×2."


def test_the_input_shapes_check_fails_a_projection_that_does_not_fit() -> None:
    r = self_attention(X, W_Q, W_K, W_V)
    wide = dataclasses.replace(r.projection, w_q=np.ones((2, 3)), w_v=None)
    check = run_checks(dataclasses.replace(r, projection=wide))[0]
    assert check.passed is False
    assert check.message == "W_Q is (2, 3), expected (2, 2); W_V is None, expected (2, 2)"


def test_vector_field_errors_name_the_token_and_the_component() -> None:
    with pytest.raises(AttentionInputError) as caught:
        scaled_dot_product_attention([[1, 2], [3, "x"]], [[1, 2], [3, 4]])
    assert str(caught.value) == "Query 2, component 2, is not a number: 'x'"
    assert (caught.value.token, caught.value.row, caught.value.column) == (2, 2, 2)
    with pytest.raises(AttentionInputError) as caught:
        scaled_dot_product_attention([[1, 2], [3, 4]], [[1, 2], [3, 4]], [[0.0], [math.inf]])
    assert str(caught.value) == "Value 2, component 1, is not a finite number: inf"
    assert (caught.value.field, caught.value.token, caught.value.column) == ("values", 2, 1)


# --- Review, "The Complete Layer": W_O and cross-attention in matrix mode ------------------------

W_O = [[1, 2], [0, -1]]


def test_y_is_h_times_w_o_and_the_shape_check_names_it() -> None:
    r = self_attention(X, W_Q, W_K, W_V, W_O)
    np.testing.assert_allclose(r.y, r.output @ np.asarray(W_O, dtype=float), rtol=1e-12)
    assert r.y.shape == (4, 2) and r.y_error is None and r.projection.w_o.shape == (2, 2)
    assert np.round(r.y[3], 3).tolist() == [0.592, 2.463]  # [0.592, -1.279] @ W_O
    assert r.checks[0].message == ("4 tokens, d_model = 2, d_k = 2, d_v = 2: X 4×2, W_Q 2×2, W_K 2×2, W_V 2×2, "
                                   "W_O 2×2.")


def test_cross_attention_projects_keys_and_values_from_the_second_sequence() -> None:
    x_kv = [[1, 2], [0, 1], [2, 0]]
    r = self_attention(X[:2], W_Q, W_K, W_V, x_kv=x_kv, causal=False)
    np.testing.assert_array_equal(r.keys, np.asarray(x_kv, dtype=float) @ np.asarray(W_K, dtype=float))
    np.testing.assert_array_equal(r.values, np.asarray(x_kv, dtype=float) @ np.asarray(W_V, dtype=float))
    np.testing.assert_array_equal(r.queries, np.asarray(X[:2], dtype=float))
    assert (r.T, r.T_k) == (2, 3) and r.weights.shape == (2, 3) and r.failed_checks == ()
    projections = next(c for c in r.checks if c.name == "projections")
    assert projections.message == "Q is 2×2, K 3×2, V 3×2: every row equals X W_Q, X_kv W_K, X_kv W_V."


@pytest.mark.parametrize(("arguments", "field", "where", "message"), [
    ({"x_kv": [[1, 2, 3]]}, "X_kv", (None, None, 3),
     "X_kv has 3 columns but X has 2 (d_model = 2); both sequences meet the same W_K and W_V"),
    ({"x_kv": [[1, 2], [3, math.nan]]}, "X_kv", (2, 2, 2),
     "X_kv row 2 (token 2), column 2 is not a finite number: nan"),
    ({"w_o": [[1, 2], [0, 1], [2, 2]]}, "W_O", (None, 3, None),
     "W_O has 3 rows but W_V has 2 columns (d_v = 2): row 3 is extra; W_O needs one row per value feature"),
    ({"w_o": [[1, 2, 3], [0, 1, 0]]}, "W_O", (None, None, 3),
     "W_O has 3 columns but X has 2 (d_model = 2); the output projection returns each token to model width"),
    ({"w_o": [[1, 2], [3, "x"]]}, "W_O", (None, 2, 2), "W_O row 2, column 2 is not a number: 'x'"),
    ({"w_v": None, "w_o": W_O}, "W_O", (None, None, None),
     "W_O projects the weighted values H, so it needs W_V (the values) too"),
])
def test_w_o_and_x_kv_errors_name_the_field_row_and_column(arguments: dict, field: str, where, message: str) -> None:
    given = {"w_v": W_V, **arguments}
    with pytest.raises(AttentionInputError) as info:
        project(X, W_Q, W_K, given.pop("w_v"), **given)
    assert (info.value.field, (info.value.token, info.value.row, info.value.column)) == (field, where)
    assert str(info.value) == message
