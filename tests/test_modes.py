"""Every failure mode breaks exactly the checks it names, through the one pipeline."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from attention_core import (
    CHECK_NAMES,
    FAILURE_MODES,
    FailureMode,
    LayerResult,
    attention_layer,
    exposure,
    get_mode,
    scaled_dot_product_attention,
    self_attention,
)

# An input that exposes each mode: d_k = 2 so sqrt(d_k) != 1, distinct keys and values (of a
# different width) so mixing keys shows, causal so masking matters, and, for the naive softmax,
# scores near 1000 so exp overflows.
QUERIES = np.array([[1.0, 0.5], [0.0, 1.0], [1.0, 1.0], [-1.0, 2.0]])
KEYS = np.array([[1.0, 0.0], [0.5, 1.0], [1.0, -1.0], [2.0, 1.0]])
VALUES = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0], [5.0, 1.0, -2.0], [0.0, 3.0, 1.0]])
EXPOSING_INPUTS: dict[str, dict] = {name: {} for name in FAILURE_MODES}
EXPOSING_INPUTS["naive_softmax"] = {"queries": QUERIES * 40.0, "keys": KEYS * 40.0}

# The same lesson at the page's widest head (d_k = 4, d_v = 1 as a column) and in matrix mode
# (Self-Attention in Matrix Form: Q = X W_Q, K = X W_K, V = X W_V with d_model = 3), where the
# naive softmax's large scores come from a large W_Q and W_K.
QUERIES_4 = np.hstack([QUERIES, QUERIES[:, ::-1]])
KEYS_4 = np.hstack([KEYS, KEYS[:, ::-1] * 0.5])
VALUES_1 = VALUES[:, :1]
X = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0], [1.0, 1.0, 0.0], [-1.0, 2.0, 1.0]])
W_Q = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, -1.0]])
W_K = np.array([[0.0, 1.0], [1.0, 0.5], [-1.0, 1.0]])
W_V = np.array([[1.0, 2.0, 0.0, 1.0], [0.0, -1.0, 3.0, 1.0], [2.0, 0.0, 1.0, -1.0]])
# Review, "The Complete Layer": Y = H W_O. With d_v = 4 != d_model = 3 a transposed W_O cannot
# multiply H at all; with d_v = d_model = 3 it can, and only its values are wrong, so W_O must not
# be symmetric ("A passing final shape is weak evidence").
W_O_WIDE = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [1.0, 1.0, 0.0], [-1.0, 0.5, 1.0]])
W_V_SQUARE = W_V[:, :3]
W_O_SQUARE = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0]])
# A batch of two (Review, "The Complete Layer": X is B×T×d_model with one set of W's): the second
# item is a different sequence, so an item that reads the other one gets another output.
X_2 = np.array([[0.0, 1.0, 2.0], [1.0, -1.0, 0.0], [2.0, 0.0, 1.0], [0.5, 0.5, -1.0]])


def _vector(mode_name: str, **settings):
    inputs = {"queries": QUERIES, "keys": KEYS, "values": VALUES, **EXPOSING_INPUTS[mode_name]}
    return scaled_dot_product_attention(**inputs, failure_mode=mode_name, **settings)


def _vector_4(mode_name: str, **settings):
    big = 40.0 if mode_name == "naive_softmax" else 1.0
    return scaled_dot_product_attention(QUERIES_4 * big, KEYS_4 * big, VALUES_1, failure_mode=mode_name, **settings)


def _matrix(mode_name: str, w_v=W_V, w_o=None, **settings):
    big = 40.0 if mode_name == "naive_softmax" else 1.0
    settings.pop("mask_after_softmax", None)
    return self_attention(X, W_Q * big, W_K * big, w_v, w_o, failure_mode=mode_name, **settings)


def _batch(mode_name: str, **settings):
    big = 40.0 if mode_name == "naive_softmax" else 1.0
    settings.pop("mask_after_softmax", None)
    if settings.get("padding_mask") is not None:  # the same padding in each item
        settings["padding_mask"] = [settings["padding_mask"]] * 2
    return attention_layer([X, X_2], W_Q * big, W_K * big, W_V_SQUARE, W_O_SQUARE, failure_mode=mode_name, **settings)


INPUT_KINDS = {
    "vector d_k=2": _vector,
    "vector d_k=4": _vector_4,
    "matrix d_model=3": _matrix,
    "matrix W_O d_v=d_model": functools.partial(_matrix, w_v=W_V_SQUARE, w_o=W_O_SQUARE),
    "matrix W_O d_v!=d_model": functools.partial(_matrix, w_o=W_O_WIDE),
    "batch B=2 W_O": _batch,
}
WITH_W_O = {"matrix W_O d_v=d_model", "matrix W_O d_v!=d_model", "batch B=2 W_O"}
BATCHES = {"batch B=2 W_O"}


def exposes(mode: FailureMode, kind: str) -> bool:
    """Whether this kind of input can show the mode at all: a transposed W_O needs a W_O, mixed
    batch items need a second item."""
    if mode.name == "output_projection_transposed":
        return kind in WITH_W_O
    if mode.name == "batch_items_mixed":
        return kind in BATCHES
    return True


def not_applicable(kind: str) -> set[str]:
    """The checks that do not apply to a correct run of this kind of input."""
    no_w_o = set() if kind in WITH_W_O else {"output_projection"}
    return no_w_o | (set() if kind in BATCHES else {"batch_independence"})


def run(mode_name: str, kind: str = "vector d_k=2", **settings) -> object:
    return INPUT_KINDS[kind](mode_name, causal=settings.pop("causal", True), **settings)


def correctly(r):
    """The same inputs through the correct pipeline."""
    if isinstance(r, LayerResult):
        return r.recompute(failure_mode="correct")
    p = r.projection
    if p is not None:
        return self_attention(p.x, p.w_q, p.w_k, p.w_v, p.w_o, padding_mask=r.key_is_real, causal=r.causal)
    return scaled_dot_product_attention(r.queries, r.keys, r.values, padding_mask=r.key_is_real, causal=r.causal)


# What exposure() says where an input cannot show the mode (tests/test_steps.py has the rest).
UNEXPOSED = {
    "output_projection_transposed": "No W_O is given, so there is no output projection to get wrong.",
    "batch_items_mixed": ("One batch item, so there is no other sequence to mix with: a batch of 2 or 3 "
                          "sequences shows items reading each other."),
}


def test_every_mode_has_an_exposing_input() -> None:
    assert set(EXPOSING_INPUTS) == set(FAILURE_MODES)
    for mode in FAILURE_MODES.values():
        assert any(exposes(mode, kind) for kind in INPUT_KINDS), mode.name


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("mode", FAILURE_MODES.values(), ids=list(FAILURE_MODES))
def test_mode_breaks_exactly_what_it_claims(mode: FailureMode, kind: str) -> None:
    assert mode.breaks <= set(CHECK_NAMES)
    r = run(mode.name, kind)
    assert r.mode == mode
    first = r.maps[0] if isinstance(r, LayerResult) else r
    assert first.input_mode == kind.split()[0].replace("batch", "matrix")
    if exposes(mode, kind):
        assert set(r.failed_checks) == mode.breaks
        # The first incorrect object is the mode's first broken check in audit order.
        expected_first = None if mode.name == "correct" else next(n for n in CHECK_NAMES if n in mode.breaks)
        assert (r.first_incorrect and r.first_incorrect.name) == expected_first
    else:  # nothing to get wrong here: every check passes or does not apply, and exposure says why
        assert r.failed_checks == ()
        assert exposure(r) == UNEXPOSED[mode.name]
    # The claim is what the checks report, not the mode's own say-so; and checks never go missing.
    assert [c.name for c in r.checks] == list(CHECK_NAMES)


def test_a_transposed_w_o_of_the_right_shape_is_caught_by_its_values() -> None:
    # Review, "Audit Order", step 8: "A passing final shape is weak evidence".
    r = run("output_projection_transposed", "matrix W_O d_v=d_model")
    h = r.output
    assert r.y.shape == (4, 3) == (h @ W_O_SQUARE).shape
    np.testing.assert_allclose(r.y, h @ W_O_SQUARE.T, rtol=1e-12)
    check = next(c for c in r.checks if c.name == "output_projection")
    assert check.passed is False and check.rows and "the right shape, 4×3" in check.message
    assert r.y_error is None


def test_a_transposed_w_o_of_the_wrong_shape_forms_no_y() -> None:
    r = run("output_projection_transposed", "matrix W_O d_v!=d_model")
    assert r.y is None
    assert r.y_error == "Y = H W_Oᵀ cannot be formed: H is 4×4 but W_Oᵀ is 3×4"
    check = next(c for c in r.checks if c.name == "output_projection")
    assert check.passed is False and check.message == r.y_error
    assert r.output is not None  # H itself is right: the output check passed
    assert next(c for c in r.checks if c.name == "output").passed is True


# Key 1 as padding empties causal row 1 (it may read only key 1); key 3 as padding empties none.
PADDINGS = {
    "empties row 1": ([False, True, True, True], {"row_sums"}),
    "empties no row": ([True, True, False, True], set()),
}


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("padding", PADDINGS, ids=list(PADDINGS))
@pytest.mark.parametrize("mode", FAILURE_MODES.values(), ids=list(FAILURE_MODES))
def test_mode_breaks_exactly_what_it_claims_with_padding(mode: FailureMode, padding: str, kind: str) -> None:
    # Padding adds nothing surprising: a row with no visible key fails row_sums in every mode,
    # and that is the only check a mode may fail beyond its claim.
    padding_mask, padding_breaks = PADDINGS[padding]
    r = run(mode.name, kind, padding_mask=padding_mask)
    assert set(r.failed_checks) == (mode.breaks if exposes(mode, kind) else set()) | padding_breaks
    maps = r.maps if isinstance(r, LayerResult) else (r,)
    assert mode.name == "naive_softmax" or not any(np.isnan(m.weights).any() for m in maps)
    if padding_breaks:
        row_sums = next(c for c in r.checks if c.name == "row_sums")
        if isinstance(r, LayerResult) and r.flattened:  # rows of the B·T map, said in items and tokens
            assert row_sums.rows == (1, 5) and "rows 1, 5 have no visible key" in row_sums.message
            assert "row 1 is item 1 token 1, row 5 is item 2 token 1" in row_sums.message
        else:
            assert 1 in row_sums.rows and "row 1 has no visible key" in row_sums.message


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("mode", FAILURE_MODES.values(), ids=list(FAILURE_MODES))
def test_exposing_input_passes_every_check_when_computed_correctly(mode: FailureMode, kind: str) -> None:
    # The exposing input is honest: the correct pipeline passes every check on it that applies,
    # and exactly the checks this kind of input has no object for do not apply.
    r = correctly(run(mode.name, kind))
    assert r.mode.name == "correct"
    assert r.failed_checks == ()
    assert all(c.passed is not False for c in r.checks)
    assert {c.name for c in r.checks if c.passed is None} == not_applicable(kind)
    assert r.first_incorrect is None


def test_correct_mode_passes_on_many_inputs() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        T, d = rng.integers(1, 9), rng.integers(1, 5)
        r = scaled_dot_product_attention(
            rng.normal(scale=5, size=(T, d)), rng.normal(scale=5, size=(T, d)),
            rng.normal(size=(T, 2)), causal=bool(rng.integers(2)),
        )
        assert r.failed_checks == ()


def test_no_values_means_output_check_does_not_apply() -> None:
    r = scaled_dot_product_attention(QUERIES, KEYS)
    output = next(c for c in r.checks if c.name == "output")
    assert output.passed is None
    assert r.failed_checks == ()


def test_mask_after_softmax_flag_equals_the_mode() -> None:
    by_flag = run("correct", mask_after_softmax=True)
    by_mode = run("mask_after_softmax")
    both = run("mask_after_softmax", mask_after_softmax=True)
    assert by_flag.mode is by_mode.mode is both.mode is FAILURE_MODES["mask_after_softmax"]
    for field in ("scores", "masked_scores", "weights", "row_sums", "future_weight", "output"):
        np.testing.assert_array_equal(getattr(by_flag, field), getattr(by_mode, field))
        np.testing.assert_array_equal(getattr(both, field), getattr(by_mode, field))
    assert by_flag.failed_checks == by_mode.failed_checks


def test_mode_object_and_name_are_interchangeable() -> None:
    by_name = scaled_dot_product_attention(QUERIES, KEYS, VALUES, failure_mode="wrong_axis")
    wrong_axis = get_mode("wrong_axis")
    by_object = scaled_dot_product_attention(QUERIES, KEYS, VALUES, failure_mode=wrong_axis)
    np.testing.assert_array_equal(by_name.weights, by_object.weights)


CONTRADICTING = [n for n in FAILURE_MODES if n not in ("correct", "mask_after_softmax")]


@pytest.mark.parametrize("name", CONTRADICTING)
def test_contradictory_combination_raises(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        scaled_dot_product_attention(QUERIES, KEYS, mask_after_softmax=True, failure_mode=name)


def test_unknown_mode_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known modes: correct, mask_after_softmax"):
        get_mode("mask_before_softmax")
    with pytest.raises(ValueError, match="unknown failure mode"):
        scaled_dot_product_attention(QUERIES, KEYS, failure_mode="nope")


def test_modes_are_frozen_data() -> None:
    mode = FAILURE_MODES["no_mask"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        mode.mask = "before"  # type: ignore[misc]
    assert {m.name for m in FAILURE_MODES.values()} == set(FAILURE_MODES)
    assert FAILURE_MODES["correct"].breaks == frozenset()
    assert all(m.breaks for name, m in FAILURE_MODES.items() if name != "correct")


def test_no_mask_forgets_only_the_causal_mask() -> None:
    # Review, "Distinctions to Keep": causal and padding masks are different rules; no_mask forgets
    # the first only.
    padding_mask = [True, True, False, True]
    r = run("no_mask", padding_mask=padding_mask)
    assert (r.masked_scores[:, 2] == -np.inf).all()  # padding reached softmax as -inf
    assert (r.weights[:, 2] == 0.0).all()
    assert np.isfinite(r.masked_scores[:, [0, 1, 3]]).all()  # the future did not
    assert r.future_weight[0] > 0  # the future still leaks
    np.testing.assert_allclose(r.row_sums, 1.0, atol=1e-12)
    assert set(r.failed_checks) == {"mask", "forbidden_zeros"}
    forbidden = next(c for c in r.checks if c.name == "forbidden_zeros")
    assert all(j != 3 for _, j in forbidden.cells)  # no weight on the padding key


@pytest.mark.parametrize("matrix_mode", [False, True], ids=["vector", "matrix"])
@pytest.mark.parametrize("mode", FAILURE_MODES.values(), ids=list(FAILURE_MODES))
def test_no_mode_breaks_more_than_it_claims_on_any_input(mode: FailureMode, matrix_mode: bool) -> None:
    # Random sizes, scales from 0.01 to 1000 (so naive exponentials overflow and underflow),
    # random padding: a mode may fail only its own checks, plus row_sums for a row padding emptied.
    rng = np.random.default_rng(11)
    for _ in range(300):
        T, d, d_model = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
        scale = 10.0 ** rng.integers(-2, 4)
        settings = {"causal": bool(rng.integers(2)), "padding_mask": rng.random(T) < 0.7,
                    "failure_mode": mode.name}
        if matrix_mode:
            r = self_attention(
                rng.normal(size=(T, d_model)), rng.normal(size=(d_model, d)) * scale,
                rng.normal(size=(d_model, d)) * scale,
                rng.normal(size=(d_model, int(rng.integers(1, 5)))) if rng.integers(2) else None, **settings,
            )
        else:
            r = scaled_dot_product_attention(
                rng.normal(size=(T, d)) * scale, rng.normal(size=(T, d)) * scale,
                rng.normal(size=(T, 2)) if rng.integers(2) else None, **settings,
            )
        padding_breaks = set() if r.allowed.any(axis=-1).all() else {"row_sums"}
        assert set(r.failed_checks) <= mode.breaks | padding_breaks


@pytest.mark.parametrize("mode", FAILURE_MODES.values(), ids=list(FAILURE_MODES))
def test_no_mode_breaks_more_than_it_claims_on_any_layer(mode: FailureMode) -> None:
    # The same over whole layers: B = 1 to 3, W_O or not, cross-attention (T_k != T, either causal
    # alignment) or not, each item padded its own way.
    rng = np.random.default_rng(23)
    for _ in range(150):
        B, T, d_model = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
        d_k, d_v = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        T_k = int(rng.integers(1, 6)) if rng.integers(2) else None
        scale = 10.0 ** rng.integers(-2, 4)
        w_v = rng.normal(size=(d_model, d_v)) if rng.integers(4) else None
        w_o = rng.normal(size=(d_v, d_model)) if w_v is not None and rng.integers(2) else None
        causal = bool(rng.integers(2))
        r = attention_layer(
            rng.normal(size=(B, T, d_model)), rng.normal(size=(d_model, d_k)) * scale,
            rng.normal(size=(d_model, d_k)) * scale, w_v, w_o,
            x_kv=None if T_k is None else rng.normal(size=(B, T_k, d_model)), causal=causal,
            causal_alignment=str(rng.choice(["top_left", "bottom_right"])),
            padding_mask=rng.random((B, T_k or T)) < 0.7,
            failure_mode=mode.name,
        )
        padding_breaks = set() if all(m.allowed.any(axis=-1).all() for m in r.maps) else {"row_sums"}
        assert set(r.failed_checks) <= mode.breaks | padding_breaks, (B, T, T_k, r.failed_checks)


# A row with no visible key: the same named failure in every mode.


def test_naive_mode_on_a_padding_row_breaks_only_row_sums() -> None:
    # Small scores: the naive softmax has nothing to overflow, so the only failure is padding's.
    r = scaled_dot_product_attention(
        [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [10.0, 20.0, 30.0],
        padding_mask=[False, True, True], failure_mode="naive_softmax",
    )
    assert r.weights[0].tolist() == [0.0, 0.0, 0.0]
    assert not np.isnan(r.weights).any() and not np.isnan(r.output).any()
    assert r.failed_checks == ("row_sums",)
    assert set(r.failed_checks) <= FAILURE_MODES["naive_softmax"].breaks
