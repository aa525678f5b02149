"""row_steps shows the steps of Self-attention, "A worked row", from the result's own arrays; exposure
says when an input cannot show a mode's failure."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from attention_core import (
    FAILURE_MODES,
    RowSteps,
    attention_layer,
    exposure,
    row_steps,
    scaled_dot_product_attention,
    self_attention,
)

WORKED = {"queries": [1, 1, 1], "keys": [1, 2, 9], "values": [10, 20, 100]}


def worked_row(**settings) -> RowSteps:
    return row_steps(scaled_dot_product_attention(**WORKED, **settings), 1)


# --- Self-attention, "A worked row", step by step -------------------------------------------


def test_worked_row_in_the_lessons_order() -> None:
    s = worked_row(causal=True)
    assert s.row == 1 and s.along == "row"
    assert s.raw_scores.tolist() == [1.0, 2.0, 9.0]
    assert s.scale == 1.0
    assert s.scores.tolist() == [1.0, 2.0, 9.0]
    assert s.masked_scores.tolist() == [1.0, 2.0, -math.inf]
    assert s.shift == 2.0
    assert s.shifted.tolist() == [-1.0, 0.0, -math.inf]
    assert s.exps.tolist() == [math.exp(-1), 1.0, 0.0]
    assert s.total == math.exp(-1) + 1.0
    assert np.round(s.softmax, 3).tolist() == [0.269, 0.731, 0.0]
    assert s.zeroed is None
    assert np.round(s.weights, 3).tolist() == [0.269, 0.731, 0.0]
    assert s.weights[0] == pytest.approx(1 / (1 + math.e), rel=1e-12)
    assert s.row_sum == pytest.approx(1.0, abs=1e-15)
    assert s.mixed.tolist() == [10.0, 20.0, 100.0]
    np.testing.assert_allclose(s.weighted, [10 / (1 + math.e), 20 * math.e / (1 + math.e), 0.0])
    assert round(s.output, 2) == 17.31
    assert isinstance(s.output, float)
    assert s.no_visible_key is False


def test_steps_are_slices_of_the_result() -> None:
    r = scaled_dot_product_attention(**WORKED)
    s = row_steps(r, 2)
    for name, whole in [("raw_scores", r.raw_scores), ("scores", r.scores), ("masked_scores", r.masked_scores),
                        ("shifted", r.shifted), ("exps", r.exps), ("softmax", r.softmax_weights),
                        ("weights", r.weights), ("weighted", r.contributions)]:
        assert np.shares_memory(getattr(s, name), whole), name
    assert s.output == r.output[2] and s.row_sum == r.row_sums[2]


def test_steps_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        worked_row().shift = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("i", [-1, 3])
def test_a_row_outside_the_result_is_refused(i: int) -> None:
    with pytest.raises(IndexError, match="rows count from 0"):
        row_steps(scaled_dot_product_attention(**WORKED), i)


def test_scaling_is_a_step_of_its_own() -> None:
    X = np.array([[1, 0], [0, 1], [1, 1], [-1, 1]], dtype=float)  # the four-token trace
    r = scaled_dot_product_attention(X, X)
    s = row_steps(r, 3)
    assert s.raw_scores.tolist() == [-1.0, 1.0, 0.0, 2.0]
    assert s.scale == math.sqrt(2)
    np.testing.assert_allclose(s.scores, s.raw_scores / s.scale, rtol=1e-15)
    assert np.abs(s.scores - [-0.707, 0.707, 0.0, 1.414]).max() < 5e-4
    assert s.shift == s.scores[3]
    unscaled = row_steps(scaled_dot_product_attention(X, X, failure_mode="no_scaling"), 3)
    assert unscaled.scale == 1.0 and unscaled.scores.tolist() == [-1.0, 1.0, 0.0, 2.0]


# --- what each failure mode did instead -------------------------------------------------------


def test_mask_after_softmax_shows_softmax_of_the_whole_row_then_the_zeroing() -> None:
    s = worked_row(mask_after_softmax=True)
    assert s.masked_scores.tolist() == [1.0, 2.0, 9.0]  # softmax saw the future score
    assert s.shift == 9.0
    assert s.shifted.tolist() == [-8.0, -7.0, 0.0]
    visible = math.exp(1) + math.exp(2)
    np.testing.assert_allclose(s.softmax, np.exp([1, 2, 9]) / (visible + math.exp(9)), rtol=1e-15)
    assert s.zeroed.tolist() == [s.softmax[0], s.softmax[1], 0.0]  # zeroed, not renormalised
    assert s.weights.tolist() == s.zeroed.tolist()
    prefix = visible / (visible + math.exp(9))  # 0.0012457906632...
    assert s.row_sum == pytest.approx(prefix, rel=1e-12)
    assert round(s.row_sum, 5) == 0.00125
    assert s.no_visible_key is False


def test_naive_softmax_shows_the_exponentials_that_overflow() -> None:
    s = row_steps(
        scaled_dot_product_attention([1.0, 1.0, 1.0], [1000.0, 999.0, 1001.0], failure_mode="naive_softmax"), 1
    )
    assert s.shift == 0.0
    assert s.shifted.tolist() == [1000.0, 999.0, -math.inf]
    assert s.exps.tolist() == [math.inf, math.inf, 0.0]  # exp overflows beyond about 709.78
    assert s.total == math.inf
    assert np.isnan(s.softmax[:2]).all() and s.softmax[2] == 0.0  # inf / inf
    assert math.isnan(s.row_sum)


def test_wrong_axis_shows_the_column_it_normalised() -> None:
    r = scaled_dot_product_attention(**WORKED, failure_mode="wrong_axis")
    s = row_steps(r, 1)
    assert s.along == "column"
    # Column 2 holds query rows' scores against key 2; the causal mask hides row 1's.
    assert s.raw_scores.tolist() == [2.0, 2.0, 2.0]
    assert s.masked_scores.tolist() == [-math.inf, 2.0, 2.0]
    assert s.shift == 2.0
    assert s.softmax.tolist() == [0.0, 0.5, 0.5]
    np.testing.assert_array_equal(s.softmax, r.weights[:, 1])
    assert s.total == 2.0
    # The weights and the row sum are still query row 2's.
    np.testing.assert_array_equal(s.weights, r.weights[1])
    assert s.row_sum == r.row_sums[1] != 1.0


def test_keys_as_values_shows_the_keys_it_mixed() -> None:
    s = worked_row(failure_mode="keys_as_values")
    assert s.mixed.tolist() == [1.0, 2.0, 9.0]
    assert s.output == pytest.approx(float(s.weights @ [1.0, 2.0, 9.0]))


def test_without_values_there_is_nothing_mixed() -> None:
    s = row_steps(scaled_dot_product_attention([1, 1, 1], [1, 2, 9]), 1)
    assert s.mixed is None and s.weighted is None and s.output is None


def test_vector_values_give_vector_steps() -> None:
    s = row_steps(scaled_dot_product_attention(np.ones((2, 2)), np.ones((2, 2)), np.eye(2)), 1)
    assert s.weighted.shape == (2, 2) and s.output.shape == (2,)
    np.testing.assert_allclose(s.output, [0.5, 0.5])


def test_a_row_with_no_visible_key() -> None:
    r = scaled_dot_product_attention(**WORKED, padding_mask=[False, True, True])
    s = row_steps(r, 0)
    assert s.no_visible_key is True
    assert s.masked_scores.tolist() == [-math.inf, -math.inf, -math.inf]
    assert s.shift == 0.0 and s.total == 0.0
    assert s.exps.tolist() == s.softmax.tolist() == s.weights.tolist() == [0.0, 0.0, 0.0]
    assert s.row_sum == 0.0 and s.output == 0.0
    assert not row_steps(r, 1).no_visible_key


# --- exposure: can this input show the mode's failure? ------------------------------------------

EXPOSING = {
    "mask_after_softmax": {**WORKED},
    "no_mask": {**WORKED},
    "no_scaling": {"queries": np.eye(2), "keys": np.array([[1.0, 2.0], [3.0, 1.0]])},
    "naive_softmax": {"queries": [1.0, 1.0], "keys": [1000.0, 1001.0]},
    "wrong_axis": {**WORKED},
    "keys_as_values": {**WORKED},
}


@pytest.mark.parametrize("name", list(EXPOSING))
def test_an_exposing_input_needs_no_note(name: str) -> None:
    r = scaled_dot_product_attention(**EXPOSING[name], failure_mode=name)
    assert set(r.failed_checks) == FAILURE_MODES[name].breaks
    assert exposure(r) is None


@pytest.mark.parametrize("causal", [True, False])
def test_correct_needs_no_note(causal: bool) -> None:
    assert exposure(scaled_dot_product_attention(**WORKED, causal=causal)) is None
    padded = scaled_dot_product_attention(**WORKED, causal=causal, padding_mask=[False, True, True])
    assert exposure(padded) is None


def test_a_padding_only_row_does_not_hide_an_exposed_mode() -> None:
    r = scaled_dot_product_attention(**WORKED, failure_mode="no_mask", padding_mask=[True, True, False])
    assert exposure(r) is None
    r = scaled_dot_product_attention(**WORKED, failure_mode="keys_as_values", padding_mask=[False, True, True])
    assert set(r.failed_checks) == {"output", "row_sums"}
    assert exposure(r) is None


NOTES = [
    ("keys_as_values", {"queries": [1, 1, 1], "keys": [1, 2, 9]},
     "No values are given, so there is no output to get wrong."),
    ("keys_as_values", {"queries": [1, 1, 1], "keys": [1, 2, 9], "values": [1, 2, 9]},
     "The values equal the keys here, so mixing the keys gives the same output."),
    ("no_scaling", WORKED, "d_k = 1, so dividing by sqrt(1) changes nothing; a head of width d_k = 2 or "
     "more (vector or matrix mode) shows the sharper rows."),
    ("no_scaling", {"queries": np.zeros((2, 2)), "keys": np.ones((2, 2))},
     "Every score is 0 here, so dividing by sqrt(d_k) changes nothing."),
    ("keys_as_values", {**WORKED, "padding_mask": [False, False, False]},
     "Every key is padding, so no row reads anything and there is nothing to get wrong."),
    ("naive_softmax", WORKED,
     "No score is large enough to overflow exp (above about 709), so the naive softmax still gives valid weights."),
    ("mask_after_softmax", {**WORKED, "causal": False},
     "The causal mask is off and no key is padding, so there is nothing to mask."),
    ("mask_after_softmax", {"queries": [1.0], "keys": [9.0]},
     "There is one token, so no cell is in the future and there is nothing to mask."),
    ("mask_after_softmax", {"queries": [1.0, 1.0], "keys": [0.0, -1000.0]},
     "The masked scores are so far below the visible ones that softmax gives them next to no weight, "
     "so zeroing them afterwards loses nothing."),
    ("no_mask", {**WORKED, "causal": False}, "The causal mask is off, so there is no causal mask to forget."),
    ("no_mask", {"queries": [1.0], "keys": [9.0]},
     "There is one token, so no cell is in the future and there is no causal mask to forget."),
    ("no_mask", {**WORKED, "padding_mask": [True, True, False]}, None),
    ("no_mask", {"queries": [1.0, 1.0], "keys": [0.0, -1000.0]},
     "The future cells are padding or score so far below the visible ones that they get next to no weight, "
     "so forgetting the causal mask lets nothing through."),
    ("wrong_axis", {"queries": [1.0], "keys": [9.0]},
     "Here softmax down each key column happens to leave every row summing to 1 too (as with one token), "
     "so no check can tell the wrong axis apart."),
    ("wrong_axis", {"queries": [1.0, 1.0], "keys": [3.0, 3.0], "causal": False},
     "Here softmax down each key column happens to leave every row summing to 1 too (as with one token), "
     "so no check can tell the wrong axis apart."),
]


@pytest.mark.parametrize(("name", "inputs", "note"), NOTES)
def test_an_input_that_cannot_expose_its_mode_says_why(name: str, inputs: dict, note: str | None) -> None:
    r = scaled_dot_product_attention(**inputs, failure_mode=name)
    assert exposure(r) == note
    if note is not None:
        assert set(r.failed_checks) != FAILURE_MODES[name].breaks


def test_naive_softmax_on_a_padding_row_says_no_score_overflows() -> None:
    r = scaled_dot_product_attention(**WORKED, failure_mode="naive_softmax", padding_mask=[False, True, True])
    assert r.failed_checks == ("row_sums",)
    assert exposure(r).startswith("No score is large enough to overflow exp")


# --- exposure for the layer's modes (Review, "The Complete Layer") --------------------------

X3 = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
SYMMETRIC_W_O = [[1.0, 2.0], [2.0, -1.0]]
LAYER_NOTES = [
    ("output_projection_transposed", {}, "No W_O is given, so there is no output projection to get wrong."),
    ("output_projection_transposed", {"w_o": SYMMETRIC_W_O},
     "W_O equals its transpose here, so H W_Oᵀ = H W_O; a W_O that is not symmetric shows it."),
    ("output_projection_transposed", {"w_o": [[1.0, 2.0], [0.0, -1.0]]}, None),
    ("batch_items_mixed", {"w_o": SYMMETRIC_W_O},
     "One batch item, so there is no other sequence to mix with: a batch of 2 or 3 sequences shows items "
     "reading each other."),
    ("rows_and_columns_swapped", {"w_v": None}, "No values are given, so there is no output to get wrong."),
    ("rows_and_columns_swapped", {"x": [[1.0, 2.0]]},
     "Aᵀ V happens to equal A V here (as with one token), so no check can tell them apart."),
    ("rows_and_columns_swapped", {}, None),
]


@pytest.mark.parametrize(("name", "inputs", "note"), LAYER_NOTES)
def test_a_layer_input_that_cannot_expose_its_mode_says_why(name: str, inputs: dict, note: str | None) -> None:
    arguments = {"x": X3, "w_q": np.eye(2), "w_k": [[1.0, 0.5], [0.0, 2.0]], "w_v": [[1.0, 0.0], [2.0, 3.0]],
                 "w_o": None, **inputs}
    r = self_attention(arguments.pop("x"), arguments.pop("w_q"), arguments.pop("w_k"), arguments.pop("w_v"),
                       arguments.pop("w_o"), failure_mode=name)
    assert exposure(r) == note
    if note is None:
        assert set(r.failed_checks) == FAILURE_MODES[name].breaks
    else:  # nothing failed: the input has no object the mode could get wrong
        assert r.failed_checks == ()


def test_exposure_of_a_layer_is_judged_on_the_layers_checks() -> None:
    x = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.0, 2.0], [1.0, -1.0], [2.0, 1.0]]])
    w_k = [[1.0, 0.5], [0.0, 2.0]]
    mixed = attention_layer(x, np.eye(2), w_k, np.eye(2), failure_mode="batch_items_mixed")
    # The flattened map alone has no score-shape or independence failure; the layer has both.
    assert mixed.flattened and exposure(mixed) is None
    one = attention_layer(x[:1], np.eye(2), w_k, np.eye(2), failure_mode="batch_items_mixed")
    assert exposure(one) == exposure(one.maps[0]) == (
        "One batch item, so there is no other sequence to mix with: a batch of 2 or 3 sequences shows items "
        "reading each other.")
    no_w_o = attention_layer(x, np.eye(2), w_k, np.eye(2), failure_mode="output_projection_transposed")
    assert exposure(no_w_o) == "No W_O is given, so there is no output projection to get wrong."
    assert exposure(attention_layer(x, np.eye(2), w_k, np.eye(2))) is None


def test_exposure_of_a_layer_names_each_items_own_reason() -> None:
    # Neither item overflows exp; item 1's keys are all padding, item 2's are not.
    x = [[[1.0], [2.0]], [[1.0], [3.0]]]
    layer = attention_layer(x, [[1.0]], [[1.0]], [[1.0]], failure_mode="naive_softmax",
                            padding_mask=[[False, False], [True, True]])
    assert exposure(layer) == (
        "Item 1: Every key is padding, so no row reads anything and there is nothing to get wrong. "
        "Item 2: No score is large enough to overflow exp (above about 709), so the naive softmax still gives "
        "valid weights.")
