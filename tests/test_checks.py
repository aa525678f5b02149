"""The shared checks, the public API's docstrings, and the core's numpy-only import."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import numpy as np
import pytest

import attention_core
from attention_core import (
    CHECK_NAMES,
    CHECK_OBJECTS,
    CHECK_STEPS,
    is_row_stochastic,
    run_checks,
    scaled_dot_product_attention,
    self_attention,
)
from attention_core.masks import (
    additive_mask,
    causal_mask,
    combine_masks,
    future_cells,
    padding_mask,
)

# --- is_row_stochastic: the predicate code and tests share ---------------------------------


def test_is_row_stochastic() -> None:
    allowed = np.ones((3, 3), dtype=bool)
    weights = np.array([[0.5, 0.5, 0.0], [0.2, 0.2, 0.2], [1.5, -0.5, 0.0]])
    assert is_row_stochastic(weights, allowed).tolist() == [True, False, False]
    with_nan = np.array([[np.nan, 1.0], [0.0, 1.0]])
    assert is_row_stochastic(with_nan, np.ones((2, 2), dtype=bool)).tolist() == [False, True]
    # A row with no allowed key is never a distribution, whatever its weights.
    assert not is_row_stochastic(np.array([[1.0]]), np.array([[False]]))[0]


# --- masks ----------------------------------------------------------------------------------


def test_masks() -> None:
    T, F = True, False
    assert causal_mask(3).tolist() == [[T, F, F], [T, T, F], [T, T, T]]
    np.testing.assert_array_equal(future_cells(3), ~causal_mask(3))
    assert padding_mask([True, False]).tolist() == [[True, False], [True, False]]
    both = combine_masks(3, causal=True, key_is_real=np.array([False, True, True]))
    assert both.tolist() == [[False, False, False], [False, True, False], [False, True, True]]
    assert combine_masks(2, causal=False).all()
    assert additive_mask(causal_mask(2)).tolist() == [[0.0, -np.inf], [0.0, 0.0]]


def test_causal_masks_over_queries_and_keys_of_different_lengths() -> None:
    # Two queries, four keys: top-left lines query i up with key i (PyTorch's is_causal),
    # bottom-right lines the last query up with the last key (key-value-cache decoding).
    T, F = True, False
    assert causal_mask(2, 4, "top_left").tolist() == [[T, F, F, F], [T, T, F, F]]
    assert causal_mask(2, 4, "bottom_right").tolist() == [[T, T, T, F], [T, T, T, T]]
    assert causal_mask(3, 2, "bottom_right").tolist() == [[F, F], [T, F], [T, T]]  # query 1 sees nothing
    assert causal_mask(2, 4).tolist() == causal_mask(2, 4, "top_left").tolist()
    np.testing.assert_array_equal(causal_mask(3, 3, "bottom_right"), causal_mask(3))
    np.testing.assert_array_equal(future_cells(2, 4, "bottom_right"), ~causal_mask(2, 4, "bottom_right"))
    both = combine_masks(2, causal=True, key_is_real=np.array([T, F, T, T]), T_k=4, alignment="bottom_right")
    assert both.tolist() == [[T, F, T, F], [T, F, T, T]]
    with pytest.raises(ValueError, match="unknown causal alignment 'left'"):
        causal_mask(2, 4, "left")


# --- each check names its stage and the offending rows/cells -----------------------------------


def result(**kwargs):
    return scaled_dot_product_attention([1.0, 2.0, 3.0], [1.0, 0.0, 2.0], [5.0, 6.0, 7.0], **kwargs)


def by_name(r) -> dict:
    return {c.name: c for c in r.checks}


def test_checks_run_in_audit_order_and_pass() -> None:
    r = result()
    # Review, "Audit Order": nine steps, step 5 (finite softmax values and row sums) as two checks.
    assert tuple(c.name for c in r.checks) == CHECK_NAMES == (
        "input_shapes", "projections", "score_scale", "mask", "finite_weights", "row_sums",
        "forbidden_zeros", "output", "output_projection", "batch_independence",
    )
    assert [CHECK_STEPS[name] for name in CHECK_NAMES] == [1, 2, 3, 4, 5, 5, 6, 7, 8, 9]
    assert set(CHECK_OBJECTS) == set(CHECK_NAMES) and all(CHECK_OBJECTS.values())
    # One sequence without W_O: every check passed or did not apply, and exactly these did not.
    assert all(c.passed is not False for c in r.checks)
    assert {c.name for c in r.checks if c.passed is None} == {"output_projection", "batch_independence"}
    assert r.first_incorrect is None
    assert all(c.message and c.title for c in r.checks)
    assert run_checks(r) == r.checks


def test_checks_with_w_o_leave_only_batch_independence_not_applicable() -> None:
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    r = self_attention(x, np.eye(2), np.eye(2), np.eye(2), [[1.0, 2.0], [0.0, 1.0]])
    assert all(c.passed is not False for c in r.checks)
    assert {c.name for c in r.checks if c.passed is None} == {"batch_independence"}
    assert by_name(r)["output_projection"].message == "Y = H W_O is 3×2: model width d_model = 2 again."


def test_the_shape_message_counts_tokens_in_words() -> None:
    assert by_name(result())["input_shapes"].message == "3 tokens, d_k = 1, d_v = 1."
    one = by_name(scaled_dot_product_attention([2.0], [1.0]))["input_shapes"]
    assert one.message == "1 token, d_k = 1."
    one = by_name(scaled_dot_product_attention([2.0], [1.0], [5.0]))["input_shapes"]
    assert one.message == "1 token, d_k = 1, d_v = 1."


def test_mask_after_softmax_checks_name_rows_and_cells() -> None:
    checks = by_name(result(mask_after_softmax=True))
    assert checks["mask"].passed is False
    assert set(checks["mask"].cells) == {(1, 2), (1, 3), (2, 3)}
    assert checks["row_sums"].passed is False
    assert checks["row_sums"].rows == (1, 2)  # row 3 sees every key, so it still sums to 1
    assert "row 1 sums to" in checks["row_sums"].message
    assert checks["forbidden_zeros"].passed is True


def test_no_mask_names_the_leaking_cells() -> None:
    checks = by_name(result(failure_mode="no_mask"))
    assert set(checks["forbidden_zeros"].cells) == {(1, 2), (1, 3), (2, 3)}
    assert "(1, 2)" in checks["forbidden_zeros"].message


def test_shape_checks_catch_tampered_results() -> None:
    # The pipeline cannot produce these; the checks must still catch them, since the UI and tests
    # trust them for any result.
    r = result()
    bad_scores = dataclasses.replace(r, scores=r.scores[:2])
    assert by_name_of(run_checks(bad_scores))["score_scale"].passed is False
    bad_keys = dataclasses.replace(r, keys=np.ones((3, 2)))
    failed = {c.name for c in run_checks(bad_keys) if c.passed is False}
    assert {"input_shapes", "score_scale"} <= failed  # reported, not raised
    bad_values = dataclasses.replace(r, values=np.ones(2))
    failed = {c.name for c in run_checks(bad_values) if c.passed is False}
    assert {"input_shapes", "output"} <= failed
    bad_output = dataclasses.replace(r, output=r.output + 1.0)
    check = by_name_of(run_checks(bad_output))["output"]
    assert check.passed is False and check.rows == (1, 2, 3)
    bad_weights = dataclasses.replace(r, weights=np.where(r.allowed, r.weights, np.inf))
    failed = {c.name for c in run_checks(bad_weights) if c.passed is False}
    assert {"finite_weights", "forbidden_zeros"} <= failed


def test_the_layer_checks_catch_tampered_projections_and_y() -> None:
    # Steps 2 and 8 recompute Q, K, V from X and Y from H; a result that disagrees is caught there.
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    r = self_attention(x, np.eye(2), [[1.0, 0.5], [0.0, 2.0]], np.eye(2), [[1.0, 2.0], [0.0, 1.0]])
    bad_q = dataclasses.replace(r, queries=r.queries + np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    check = by_name_of(run_checks(bad_q))["projections"]
    assert check.passed is False and check.rows == (2,) and check.message == "Q rows 2 differ from X W_Q"
    bad_y = dataclasses.replace(r, y=r.y[:, ::-1])
    check = by_name_of(run_checks(bad_y))["output_projection"]
    assert check.passed is False and check.rows == (1, 2, 3)
    assert check.message.startswith("Y has the right shape, 3×2, but rows 1, 2, 3 differ from H W_O")
    narrow_y = dataclasses.replace(r, y=r.y[:, :1])
    check = by_name_of(run_checks(narrow_y))["output_projection"]
    assert check.passed is False and check.message == "Y is 3×1, expected 3×2 (T × d_model)"


def by_name_of(checks) -> dict:
    return {c.name: c for c in checks}


def test_checks_are_frozen() -> None:
    check = result().checks[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.passed = False  # type: ignore[misc]


# --- public API documentation ----------------------------------------------------------------

SECTIONS = ("Parameters", "Returns", "Attributes")


def takes_arguments(obj) -> bool:
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        parameters = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return False
    return bool([p for p in parameters if p != "self"])


PUBLIC = [(name, getattr(attention_core, name)) for name in attention_core.__all__]
CALLABLES = [(name, obj) for name, obj in PUBLIC if callable(obj)]


def test_all_names_exist() -> None:
    assert PUBLIC and all(obj is not None for _, obj in PUBLIC)
    for required in ("scaled_dot_product_attention", "stable_softmax"):
        assert required in attention_core.__all__


@pytest.mark.parametrize(("name", "obj"), CALLABLES, ids=[name for name, _ in CALLABLES])
def test_public_callable_has_numpydoc_docstring(name: str, obj) -> None:
    doc = inspect.getdoc(obj)
    assert doc, f"{name} has no docstring"
    assert doc.splitlines()[0].strip(), f"{name} docstring lacks a one-line summary"
    if takes_arguments(obj):
        assert any(f"{s}\n{'-' * len(s)}" in doc for s in SECTIONS), (
            f"{name} takes arguments but has no numpydoc Parameters/Returns/Attributes section"
        )


def test_public_modules_have_docstrings() -> None:
    import attention_core.attention as attention
    import attention_core.checks as checks
    import attention_core.masks as masks
    import attention_core.modes as modes
    import attention_core.softmax as softmax
    import attention_core.validation as validation

    for module in (attention_core, attention, checks, masks, modes, softmax, validation):
        assert module.__doc__ and module.__doc__.strip(), module.__name__


def test_importing_the_core_needs_no_panel_or_bokeh() -> None:
    code = (
        "import sys, attention_core\n"
        "attention_core.scaled_dot_product_attention([1, 2], [3, 4], [5, 6])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'panel', 'bokeh', 'param'})\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_one_forbidden_cell_is_one_cell():
    r = scaled_dot_product_attention([1, 1], [1, 2])
    mask = next(c for c in r.checks if c.name == "mask")
    assert mask.message == "The 1 forbidden cell was -inf before softmax."
