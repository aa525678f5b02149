"""Bad input is refused with a ValueError that names the field and the token (counted from 1)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from attention_core import MAX_TOKENS, AttentionInputError, scaled_dot_product_attention

GOOD = [1.0, 2.0, 3.0]

# keyword arguments, field, token (or None when the whole field is at fault), message words
P = pytest.param
BAD_INPUTS = [
    P({"queries": [1.0, math.nan, 3.0]}, "queries", 2, ["Query 2", "finite", "nan"], id="nan"),
    P({"keys": [1.0, 2.0, math.inf]}, "keys", 3, ["Key 3", "not a finite", "inf"], id="inf"),
    P({"values": [-math.inf, 2.0, 3.0]}, "values", 1, ["Value 1", "-inf"], id="-inf"),
    P(
        {"queries": np.array([[0.0, 1.0], [2.0, np.nan], [1.0, 1.0]]), "keys": np.ones((3, 2))},
        "queries", 2, ["Query 2", "nan"], id="nan in a numpy matrix",
    ),
    P({"keys": [1.0, "abc", 3.0]}, "keys", 2, ["Key 2", "not a number", "'abc'"], id="text"),
    P({"queries": ["1", 2.0, 3.0]}, "queries", 1, ["Query 1", "not a number"], id="numeric text"),
    P({"queries": "abc"}, "queries", None, ["queries", "'abc'"], id="a whole string"),
    P({"keys": 5.0}, "keys", None, ["keys", "one number"], id="bare number"),
    P({"values": [10.0, 20.0, None]}, "values", 3, ["Value 3", "None"], id="None in a list"),
    P({"queries": None}, "queries", None, ["queries"], id="None for queries"),
    P({"queries": [1.0, True, 3.0]}, "queries", 2, ["Query 2", "not a number"], id="bool"),
    P({"queries": [], "keys": []}, "queries", None, ["queries", "empty"], id="empty list"),
    P({"queries": [[], [], []]}, "queries", None, ["queries", "empty"], id="empty rows"),
    P(
        {"queries": [[1.0, 2.0], [3.0, 4.0], [5.0]]}, "queries", 3,
        ["queries", "ragged", "query 3"], id="ragged",
    ),
    P({"keys": [[1.0], 2.0, [3.0]]}, "keys", 2, ["ragged", "key 2"], id="ragged scalar and list"),
    P({"values": [1, 2, 10**400]}, "values", 3, ["Value 3", "float64"], id="int beyond float64"),
    P(
        {"queries": np.ones((3, 1, 1)), "keys": np.ones((3, 1, 1))}, "queries", None,
        ["queries", "3-D"], id="3-D",
    ),
    P(
        {"queries": [1.0] * 17, "keys": [1.0] * 17}, "queries", None,
        ["queries", "17 tokens", f"at most {MAX_TOKENS}"], id="17 tokens",
    ),
    P(
        # Queries and keys of different lengths are cross-attention now; a causal mask over them
        # needs a named alignment (see test_cross_attention_lengths_are_accepted below).
        {"keys": [1.0, 2.0]}, "causal_alignment", None, ["3 queries and 2 keys", "top_left", "bottom_right"],
        id="causal mask over query/key lengths without an alignment",
    ),
    P(
        {"keys": [1.0, 2.0], "causal_alignment": "diagonal"}, "causal_alignment", None,
        ["unknown causal alignment", "'diagonal'", "top_left or bottom_right"], id="unknown alignment",
    ),
    P(
        {"queries": np.ones((3, 2)), "keys": np.ones((3, 3))}, "keys", None, ["(3, 2)", "(3, 3)"],
        id="mismatched query/key width",
    ),
    P({"values": [1.0, 2.0]}, "values", None, ["values", "2 tokens", "3"], id="values wrong T"),
    P(
        {"queries": [1e200], "keys": [1e200]}, "queries", 1,
        ["query 1", "key 1", "overflows float64"], id="scores overflow float64",
    ),
    P(
        {"queries": [1.0, 1e200], "keys": [1.0, 1e200]}, "queries", 2,
        ["query 2", "key 2", "overflows"], id="scores overflow at a later token",
    ),
    P(
        {"padding_mask": [True, False]}, "padding_mask", None, ["padding_mask", "3 booleans"],
        id="padding mask of wrong length",
    ),
    P(
        {"padding_mask": [1, 0, 1]}, "padding_mask", None, ["padding_mask", "booleans"],
        id="padding mask not booleans",
    ),
    P(
        {"padding_mask": [[True], [True, False], True]}, "padding_mask", None, ["padding_mask"],
        id="padding mask ragged",
    ),
]


def call(overrides: dict):
    arguments = {"queries": GOOD, "keys": GOOD, "values": None}
    arguments.update(overrides)
    return scaled_dot_product_attention(
        arguments.pop("queries"), arguments.pop("keys"), arguments.pop("values"), **arguments
    )


@pytest.mark.parametrize(("overrides", "field", "token", "words"), BAD_INPUTS)
def test_bad_input_is_refused_by_field_and_token(overrides, field, token, words) -> None:
    with pytest.raises(AttentionInputError) as info:
        call(overrides)
    error = info.value
    assert isinstance(error, ValueError)  # the public contract: bad input raises ValueError
    assert error.field == field
    assert error.token == token
    message = str(error)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    # Numpy's repr noise (np.float64(nan)) is not for learners.
    assert "np." not in message and "dtype(" not in message


@pytest.mark.parametrize("settings", [{"causal": False}, {"causal_alignment": "top_left"},
                                      {"causal_alignment": "bottom_right"}], ids=["no causal mask", "top-left",
                                                                                  "bottom-right"])
def test_cross_attention_lengths_are_accepted(settings: dict) -> None:
    # The old refusal of T_q != T_k is gone (Review, "Distinctions to Keep": cross-attention).
    r = call({"keys": [1.0, 2.0], "values": [10.0, 20.0], **settings})
    assert (r.T, r.T_k) == (3, 2) and r.weights.shape == (3, 2) and r.output.shape == (3,)
    if settings.get("causal_alignment") == "bottom_right":
        # Three queries lined up with two keys from the bottom right: query 1 sits before key 1.
        assert not r.allowed[0].any() and r.failed_checks == ("row_sums",)
    else:
        assert r.failed_checks == ()


def test_token_in_message_counts_from_1() -> None:
    with pytest.raises(AttentionInputError, match=re.escape("Query 1 ")) as info:
        call({"queries": [math.nan, 1.0, 2.0]})
    assert info.value.token == 1


def test_first_bad_token_is_named() -> None:
    with pytest.raises(AttentionInputError) as info:
        call({"keys": [1.0, math.nan, math.inf]})
    assert info.value.token == 2


def test_sixteen_tokens_are_accepted() -> None:
    r = call({"queries": np.arange(MAX_TOKENS), "keys": np.arange(MAX_TOKENS)})
    assert r.T == MAX_TOKENS == 16


def test_large_but_finite_scores_are_accepted() -> None:
    r = call({"queries": [1e150, 0.0], "keys": [1e150, 1.0]})
    assert np.isfinite(r.weights).all()
    assert r.failed_checks == ()


def test_integer_and_tuple_inputs_are_accepted() -> None:
    r = scaled_dot_product_attention((1, 2), np.array([3, 4], dtype=np.int64), [np.float32(1), 2])
    assert r.queries.dtype == r.keys.dtype == r.values.dtype == np.float64


# A 0-d array is one number, not a list of tokens.


@pytest.mark.parametrize("field", ["queries", "keys", "values"])
@pytest.mark.parametrize("zero_d", [np.array(1.0), np.array(3), np.float64(2.0)], ids=["float", "int", "scalar"])
def test_zero_d_array_is_refused_by_field(field: str, zero_d) -> None:
    arguments = {"queries": [1.0, 2.0], "keys": [1.0, 2.0], "values": [1.0, 2.0], field: zero_d}
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention(**arguments)
    assert info.value.field == field
    assert info.value.token is None
    assert "one number (or one row) per token" in str(info.value)
    assert "np." not in str(info.value)


# Booleans are refused, in a list and as a numpy bool array alike.


@pytest.mark.parametrize("field", ["queries", "keys", "values"])
@pytest.mark.parametrize(
    "booleans",
    [[True, False], np.array([True, False]), [np.True_, np.False_], np.array([[True], [False]])],
    ids=["list", "numpy bool array", "list of numpy bools", "2-D numpy bool array"],
)
def test_booleans_are_refused_in_every_form(field: str, booleans) -> None:
    good = np.ones((2, 1)) if np.ndim(booleans) == 2 else [1.0, 2.0]  # the same shape, numbers
    arguments = {"queries": good, "keys": good, "values": good, field: booleans}
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention(**arguments)
    singular = {"queries": "Query", "keys": "Key", "values": "Value"}[field]
    assert info.value.field == field
    assert info.value.token == 1
    component = ", component 1," if np.ndim(booleans) == 2 else ""  # a (T, d) field names the component
    assert str(info.value) == f"{singular} 1{component} is not a number: True"


def test_a_boolean_later_in_the_list_is_named() -> None:
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention([1.0, 2.0, np.False_], [1.0, 2.0, 3.0])
    assert info.value.token == 3
    assert str(info.value) == "Query 3 is not a number: False"


# Overflow is judged on the scaled score.


def test_a_finite_scaled_score_is_accepted() -> None:
    # q · k = 4 × 0.81e308 overflows float64, but q · k / sqrt(4) = 1.62e308 does not.
    q = np.full((2, 4), 0.9e154)
    r = scaled_dot_product_attention(q, q, [1.0, 2.0])
    assert np.isfinite(r.scores).all()
    assert r.scores[0, 0] == pytest.approx(1.62e308, rel=1e-12)
    assert r.weights.tolist() == [[1.0, 0.0], [0.5, 0.5]]
    assert r.failed_checks == ()


def test_a_scaled_score_beyond_float64_is_still_refused() -> None:
    q = np.full((2, 4), 1e154)  # q · k / sqrt(4) = 2e308
    with pytest.raises(AttentionInputError, match="overflows float64") as info:
        scaled_dot_product_attention(q, q)
    assert info.value.field == "queries" and info.value.token == 1


def test_no_scaling_refuses_what_it_cannot_divide() -> None:
    # The no_scaling mode never divides, so the same input overflows there, and says so.
    q = np.full((2, 4), 0.9e154)
    with pytest.raises(AttentionInputError, match="overflows float64"):
        scaled_dot_product_attention(q, q, failure_mode="no_scaling")


# The core's limit is the core's, in its own words.


def test_the_token_limit_message_names_the_core() -> None:
    too_many = [1.0] * (MAX_TOKENS + 1)
    with pytest.raises(AttentionInputError) as info:
        scaled_dot_product_attention(too_many, too_many)
    assert MAX_TOKENS == 16
    assert str(info.value) == "queries have 17 tokens; the attention core takes at most 16"
    assert "workbench" not in str(info.value)
