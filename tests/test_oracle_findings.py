"""Regression tests for what the peer cross-check found (against PyTorch, JAX and a 60-digit
reference), one block per finding; each failed on the core before its fix (issue 13)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from attention_core import (
    FAILURE_MODES,
    MAX_TOKENS,
    AttentionInputError,
    naive_softmax,
    scaled_dot_product_attention,
    stable_softmax,
)

# --- (a) a 0-d array is one number, not a list of tokens --------------------------------------


@pytest.mark.parametrize("field", ["queries", "keys", "values"])
@pytest.mark.parametrize("zero_d", [np.array(1.0), np.array(3), np.float64(2.0)], ids=["float", "int", "scalar"])
def test_a_zero_d_array_is_refused_by_field(field: str, zero_d) -> None:
    arguments = {"queries": [1.0, 2.0], "keys": [1.0, 2.0], "values": [1.0, 2.0], field: zero_d}
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention(**arguments)
    assert info.value.field == field
    assert info.value.token is None
    assert "one number (or one row) per token" in str(info.value)
    assert "np." not in str(info.value)


# --- (b) booleans are refused, in a list and as a numpy bool array alike ----------------------


@pytest.mark.parametrize("field", ["queries", "keys", "values"])
@pytest.mark.parametrize(
    "booleans",
    [[True, False], np.array([True, False]), [np.True_, np.False_], np.array([[True], [False]])],
    ids=["list", "numpy bool array", "list of numpy bools", "2-D numpy bool array"],
)
def test_b_booleans_are_refused_in_every_form(field: str, booleans) -> None:
    good = np.ones((2, 1)) if np.ndim(booleans) == 2 else [1.0, 2.0]  # the same shape, numbers
    arguments = {"queries": good, "keys": good, "values": good, field: booleans}
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention(**arguments)
    singular = {"queries": "Query", "keys": "Key", "values": "Value"}[field]
    assert info.value.field == field
    assert info.value.token == 1
    component = ", component 1," if np.ndim(booleans) == 2 else ""  # a (T, d) field names the component
    assert str(info.value) == f"{singular} 1{component} is not a number: True"


def test_b_a_boolean_later_in_the_list_is_named() -> None:
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention([1.0, 2.0, np.False_], [1.0, 2.0, 3.0])
    assert info.value.token == 3
    assert str(info.value) == "Query 3 is not a number: False"


# --- (c) overflow is judged on the scaled score ---------------------------------------------


def test_c_a_finite_scaled_score_is_accepted() -> None:
    # q · k = 4 × 0.81e308 overflows float64, but q · k / sqrt(4) = 1.62e308 does not.
    q = np.full((2, 4), 0.9e154)
    r = scaled_dot_product_attention(q, q, [1.0, 2.0])
    assert np.isfinite(r.scores).all()
    assert r.scores[0, 0] == pytest.approx(1.62e308, rel=1e-12)
    assert r.weights.tolist() == [[1.0, 0.0], [0.5, 0.5]]
    assert r.failed_checks == ()


def test_c_a_scaled_score_beyond_float64_is_still_refused() -> None:
    q = np.full((2, 4), 1e154)  # q · k / sqrt(4) = 2e308
    with pytest.raises(AttentionInputError, match="overflows float64") as info:
        scaled_dot_product_attention(q, q)
    assert info.value.field == "queries" and info.value.token == 1


def test_c_no_scaling_refuses_what_it_cannot_divide() -> None:
    # The no_scaling mode never divides, so the same input overflows there, and says so.
    q = np.full((2, 4), 0.9e154)
    with pytest.raises(AttentionInputError, match="overflows float64"):
        scaled_dot_product_attention(q, q, failure_mode="no_scaling")


# --- (d) stable_softmax at float64's ends, without a warning -----------------------------------


def test_d_softmax_of_opposite_extremes_is_exact_and_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            w = stable_softmax(np.array([1e308, -1e308]))
            both = stable_softmax(np.array([[-1.7976931348623157e308, 1.7976931348623157e308]]))
    assert w.tolist() == [1.0, 0.0]
    assert both.tolist() == [[0.0, 1.0]]


# --- (e) the core's limit is the core's, in its own words ----------------------------------


def test_e_the_token_limit_message_names_the_core() -> None:
    too_many = [1.0] * (MAX_TOKENS + 1)
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention(too_many, too_many)
    assert MAX_TOKENS == 16
    assert str(info.value) == "queries have 17 tokens; the attention core takes at most 16"
    assert "workbench" not in str(info.value)


# --- (f) a row with no visible key: the same named failure in every mode -----------------------


def test_f_naive_softmax_of_a_slice_with_nothing_visible_is_zero() -> None:
    assert naive_softmax(np.array([[-np.inf, -np.inf], [0.0, -np.inf]])).tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_f_naive_mode_on_a_padding_row_breaks_only_row_sums() -> None:
    # Small scores: the naive softmax has nothing to overflow, so the only failure is padding's.
    r = scaled_dot_product_attention(
        [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [10.0, 20.0, 30.0],
        padding_mask=[False, True, True], failure_mode="naive_softmax",
    )
    assert r.weights[0].tolist() == [0.0, 0.0, 0.0]
    assert not np.isnan(r.weights).any() and not np.isnan(r.output).any()
    assert r.failed_checks == ("row_sums",)
    assert set(r.failed_checks) <= FAILURE_MODES["naive_softmax"].breaks
