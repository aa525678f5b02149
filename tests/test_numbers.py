"""The one number format of the pages (app.shared.numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from app.learner.checks import _words
from app.shared.numbers import format_number, format_result

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(("x", "style", "text"), [
    (0.0, "cell", "0"), (-0.0, "cell", "0"), (0.269, "cell", "0.269"), (-0.707, "cell", "\u22120.707"),
    (0.00125, "cell", "0.00125"), (-0.00125, "cell", "\u22120.00125"), (0.0646, "cell", "0.065"),
    (1e-5, "cell", "1.00e\u221205"), (-1e-5, "cell", "\u22121.00e\u221205"), (1e5, "cell", "1.00e+05"),
    (1000.0, "cell", "1000.000"), (np.float64(17.311), "cell", "17.311"), (3, "cell", "3.000"),
    (NAN, "cell", "undefined"), (INF, "cell", "∞"), (-INF, "cell", "\u2212∞"),
    (0.000335, "narrow", "3e\u221204"), (0.269, "narrow", "0.27"), (17.31, "narrow", "17.3"),
    (1001.0, "narrow", "1001"), (0.0, "narrow", "0"), (-9.0, "narrow", "\u22129.00"),
    (123456.0, "narrow", "1e+05"), (0.00125, "narrow", "1e\u221203"),
    (NAN, "narrow", "undefined"), (INF, "narrow", "∞"), (-INF, "narrow", "\u2212∞"),
    (0.9999, "exact", "0.9999"), (-0.99999999, "exact", "\u22120.99999999"), (1e-5, "exact", "1e\u221205"),
    (NAN, "exact", "undefined"), (-INF, "exact", "\u2212∞"),
])
def test_format_number(x, style, text):
    assert format_number(x, style) == text
    assert "-" not in format_number(x, style)  # never an ASCII hyphen for a minus


@pytest.mark.parametrize(("x", "text"), [
    (14.621, "14.6"), (1.0, "1"), (-2.0, "\u22122"), (0.5, "0.5"), (100.0, "100"), (1e-5, "1e\u221205"),
    (0.0, "0"), (NAN, "undefined"),
])
def test_a_trimmed_narrow_number_drops_trailing_zeros_only(x, text):
    assert format_number(x, "narrow", trim=True) == text


def test_format_result_and_an_unknown_style():
    # A record writes a result that was not finite as null: NaN, naive softmax's ∞/∞.
    assert format_result(None) == "undefined" and format_result(-0.5) == "\u22120.500"
    with pytest.raises(ValueError, match="style"):
        format_number(1.0, "wide")


@pytest.mark.parametrize(("message", "shown"), [
    ("row 2 sums to -0.5", "row 2 sums to \u22120.5"), ("weights -1e-05", "weights \u22121e\u221205"),
    ("a score of -inf", "a score of \u2212∞"), ("W_Q is (2, -1)", "W_Q is (2, \u22121)"),
    ("nan weights", "undefined weights"), ("T-1 tokens, a row-sum", "T-1 tokens, a row-sum"),
])
def test_the_cores_check_messages_follow_the_pages_number_rule(message, shown):
    assert _words(message) == shown
