"""stable_softmax on exact extremes (tested as scipy.special.softmax is) and naive overflow."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from attention_core import naive_softmax, stable_softmax


def test_large_score_dominates_exactly() -> None:
    assert stable_softmax(np.array([1000.0, 0.0, 0.0])).tolist() == [1.0, 0.0, 0.0]


def test_shift_invariance_at_1000() -> None:
    w = stable_softmax(np.array([1000.0, 1001.0, 1002.0]))
    expected = stable_softmax(np.array([0.0, 1.0, 2.0]))
    np.testing.assert_allclose(w, expected, rtol=1e-15)
    assert np.isfinite(w).all() and w.sum() == pytest.approx(1.0, abs=1e-15)


def test_matches_formula() -> None:
    x = [0.5, -1.25, 3.0]
    total = sum(math.exp(v) for v in x)
    np.testing.assert_allclose(stable_softmax(np.array(x)), [math.exp(v) / total for v in x])


def test_all_equal_is_uniform() -> None:
    assert stable_softmax(np.full(4, -7.5)).tolist() == [0.25] * 4


def test_minus_inf_gives_exact_zero() -> None:
    w = stable_softmax(np.array([1.0, 2.0, -np.inf]))
    assert w[2] == 0.0
    assert np.round(w, 3).tolist() == [0.269, 0.731, 0.0]


def test_all_masked_row_is_zero_not_nan() -> None:
    x = np.array([[0.0, -np.inf], [-np.inf, -np.inf]])
    assert stable_softmax(x).tolist() == [[1.0, 0.0], [0.0, 0.0]]


def test_axis_is_respected() -> None:
    x = np.array([[0.0, 1.0], [2.0, 5.0]])
    by_row = stable_softmax(x, axis=-1)
    by_column = stable_softmax(x, axis=0)
    np.testing.assert_allclose(by_row.sum(axis=1), 1.0)
    np.testing.assert_allclose(by_column.sum(axis=0), 1.0)
    np.testing.assert_allclose(by_column, stable_softmax(x.T).T)


def test_list_input_and_dtype() -> None:
    w = stable_softmax([1, 2, 3])
    assert w.dtype == np.float64
    assert w.shape == (3,)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_rejects_nan_and_plus_inf(bad: float) -> None:
    with pytest.raises(ValueError, match="nan or \\+inf"):
        stable_softmax(np.array([0.0, bad]))


def test_naive_softmax_overflows_quietly() -> None:
    with np.errstate(all="raise"):  # nothing may warn or raise out of naive_softmax
        w = naive_softmax(np.array([1000.0, 0.0, -np.inf]))
    assert np.isnan(w[0])
    assert w[2] == 0.0


def test_naive_softmax_keeps_masked_entries_exactly_zero() -> None:
    # exp(-1000) underflows to 0, so the naive sum is 0 and the visible entry is 0 / 0; the
    # masked entry is still exactly 0 (masking is not what the naive route gets wrong).
    w = naive_softmax(np.array([[-1000.0, -np.inf], [-np.inf, -np.inf]]))
    assert np.isnan(w[0, 0]) and w[0, 1] == 0.0
    assert w[1].tolist() == [0.0, 0.0]


def test_naive_softmax_agrees_on_small_scores() -> None:
    x = np.array([[0.1, -0.3, 2.0], [1.0, 1.0, -np.inf]])
    np.testing.assert_allclose(naive_softmax(x), stable_softmax(x), rtol=1e-14)


def test_rows_are_the_same_with_or_without_a_fully_masked_row() -> None:
    # A slice with nothing visible is all zeros and leaves the other slices bit-for-bit alone.
    rng = np.random.default_rng(3)
    x = np.where(np.tril(np.ones((6, 6), dtype=bool)), rng.normal(size=(6, 6)) * 50, -np.inf)
    with_empty = np.vstack([x, np.full((1, 6), -np.inf)])
    assert stable_softmax(with_empty)[:6].tolist() == stable_softmax(x).tolist()
    assert stable_softmax(with_empty)[6].tolist() == [0.0] * 6


# stable_softmax at float64's ends, without a warning.


def test_softmax_of_opposite_extremes_is_exact_and_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            w = stable_softmax(np.array([1e308, -1e308]))
            both = stable_softmax(np.array([[-1.7976931348623157e308, 1.7976931348623157e308]]))
    assert w.tolist() == [1.0, 0.0]
    assert both.tolist() == [[0.0, 1.0]]


# A row with no visible key: the same named failure in every mode.


def test_naive_softmax_of_a_slice_with_nothing_visible_is_zero() -> None:
    assert naive_softmax(np.array([[-np.inf, -np.inf], [0.0, -np.inf]])).tolist() == [[0.0, 0.0], [1.0, 0.0]]
