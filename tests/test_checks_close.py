"""``checks.close`` is ``numpy.isclose`` for the float matrices the checks compare."""

from __future__ import annotations

import numpy as np
import pytest

from attention_core.checks import close

EXTREMES = np.array([0.0, -0.0, 1.0, -1.0, 1e-300, 5e-324, 1e300, 1.7976931348623157e308,
                     np.inf, -np.inf, np.nan, 1.0 + 1e-12, 1.0 + 1e-11])


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize(("rtol", "atol"), [(1e-12, 1e-300), (1e-12, 1e-12), (0.0, 0.0)])
def test_close_agrees_with_numpy_isclose_on_extremes(rtol, atol, equal_nan):
    a, b = np.meshgrid(EXTREMES, EXTREMES)
    expected = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    np.testing.assert_array_equal(close(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan), expected)


def test_close_agrees_with_numpy_isclose_on_random_matrices():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(16, 16))
    b = a * (1 + rng.choice([0.0, 1e-13, 1e-11], size=a.shape))
    np.testing.assert_array_equal(close(a, b, 1e-12, 1e-12), np.isclose(a, b, 1e-12, 1e-12))
