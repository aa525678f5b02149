"""Review, "What the Projection Ablations Establish", as tests of :func:`attention_core.ablate`.

Changing W_V or W_O leaves every weight exactly unchanged and moves H (W_V) or Y (W_O); W_O = 0
makes Y exactly zero; changing W_Q or W_K moves the weights. Each statement is checked twice: on
the arrays of the two layers, compared here, and as the live check the ablation reports.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_core import (
    ABLATION_CHANGES,
    ABLATION_TARGETS,
    AttentionInputError,
    LayerResult,
    ablate,
    attention_layer,
    changed_matrix,
    scaled_dot_product_attention,
)
from attention_core.ablation import STATEMENTS

# Two sequences of different lengths (item 2 padded) sharing asymmetric W's, d_v = 3 != d_model = 2.
X = [[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.0, 2.0], [1.0, -1.0], [0.0, 0.0]]]
PADDING = [[True, True, True], [True, True, False]]
W_Q = np.array([[1.0, 0.5], [-0.5, 1.0]])
W_K = np.array([[0.5, 1.0], [1.0, -1.0]])
W_V = np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])
W_O = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, -1.0]])
CHANGES = {
    "scale by 2": ("scale", {"factor": 2.0}),
    "zero": ("zero", {}),
    "edit": ("edit", {}),  # the matrix is made per target below: the original with one number changed
}


@pytest.fixture(params=[1, 2], ids=["B=1", "B=2"])
def layer(request) -> LayerResult:
    B = request.param
    return attention_layer(X[:B], W_Q, W_K, W_V, W_O, padding_mask=PADDING[:B])


def do(layer: LayerResult, target: str, change: str):
    kind, settings = CHANGES[change]
    if kind == "edit":
        edited = getattr(layer, target.lower()).copy()
        edited[0, 0] += 1.5
        settings = {"matrix": edited}
    return ablate(layer, target, kind, **settings)


def stacked(layer: LayerResult, what: str) -> np.ndarray:
    return np.concatenate([np.asarray(getattr(m, what)) for m in layer.maps])


def statement(ablation, name: str):
    return next(s for s in ablation.statements if s.name == name)


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("target", ["W_V", "W_O"])
def test_changing_w_v_or_w_o_leaves_every_weight_exactly_unchanged_and_moves_the_output(layer, target, change):
    a = do(layer, target, change)
    before, after = a.before, a.after
    assert before is layer
    np.testing.assert_array_equal(stacked(after, "weights"), stacked(before, "weights"))  # exactly
    np.testing.assert_array_equal(stacked(after, "scores"), stacked(before, "scores"))
    if target == "W_V":
        assert not np.array_equal(after.output, before.output)  # routed content moved
        assert after.output.shape == before.output.shape
        np.testing.assert_allclose(after.output[0], after.maps[0].weights @ (np.asarray(X[0]) @ a.matrix),
                                   rtol=1e-12, atol=1e-15)  # H = A (X W_V')
    else:
        np.testing.assert_array_equal(after.output, before.output)  # H is upstream of W_O
        assert not np.array_equal(after.y, before.y)
        np.testing.assert_allclose(after.y, after.output @ a.matrix, rtol=1e-12, atol=1e-15)  # Y = H W_O'
    s = statement(a, f"ablation_{target.lower()}")
    assert s.passed is True and s.title == STATEMENTS[target]
    assert s.message.startswith("Every weight is exactly unchanged" if target == "W_V"
                                else "Every weight and H are exactly unchanged")
    assert after.failed_checks == before.failed_checks == ()


def test_the_statements_name_rows_by_item_in_a_batch() -> None:
    # Item 2's third token is padding with X = 0, so its query does not move.
    layer = attention_layer(X, W_Q, W_K, W_V, W_O, padding_mask=PADDING)
    assert ablate(layer, "W_V", "scale", factor=2.0).statements[0].message == (
        "Every weight is exactly unchanged; H moved in item 1 rows 1, 2, 3 and item 2 rows 1, 2, 3.")
    q = ablate(layer, "W_Q", "scale", factor=2.0).statements[0].message
    assert q.startswith("Q moved in item 1 rows 1, 2, 3 and item 2 rows 1, 2, and with it the weights of item 1 ")
    # In cross-attention K has T_k rows per item.
    cross = attention_layer(X, W_Q, W_K, W_V, x_kv=[[[1.0, 0.0]] * 4, [[0.0, 1.0]] * 4], causal=False)
    assert ablate(cross, "W_K", "scale", factor=2.0).statements[0].message.startswith(
        "K moved in item 1 rows 1, 2, 3, 4 and item 2 rows 1, 2, 3, 4")


def test_w_o_zero_makes_y_exactly_zero(layer) -> None:
    a = ablate(layer, "W_O", "zero")
    assert not a.matrix.any() and a.matrix.shape == W_O.shape
    assert (a.after.y == 0.0).all() and a.after.y.shape == layer.y.shape
    assert layer.y.any()  # it was not zero before
    zero = statement(a, "ablation_w_o_zero")
    assert zero.passed is True and zero.message == "Every number of Y is exactly 0."
    assert zero.title == "Setting W_O = 0 makes this branch's output zero for the current forward pass."
    assert [s.name for s in a.statements] == ["ablation_w_o", "ablation_w_o_zero"]


def test_only_a_zero_w_o_brings_the_zero_statement(layer) -> None:
    assert [s.name for s in ablate(layer, "W_O", "scale", factor=2.0).statements] == ["ablation_w_o"]
    assert [s.name for s in ablate(layer, "W_V", "zero").statements] == ["ablation_w_v"]


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("target", ["W_Q", "W_K"])
def test_changing_w_q_or_w_k_moves_the_weights(layer, target, change):
    a = do(layer, target, change)
    what = "queries" if target == "W_Q" else "keys"
    assert not np.array_equal(stacked(a.after, what), stacked(a.before, what))
    assert not np.array_equal(stacked(a.after, "weights"), stacked(a.before, "weights"))
    np.testing.assert_array_equal(stacked(a.after, "values"), stacked(a.before, "values"))  # W_V untouched
    s = statement(a, f"ablation_{target.lower()}")
    assert s.passed is True and s.title == STATEMENTS[target]
    where = "rows" if layer.B == 1 else "item 1 rows"
    assert s.message.startswith(f"{'Q' if target == 'W_Q' else 'K'} moved in {where} ")
    assert ", and with it the weights of " in s.message


@pytest.mark.parametrize("target", ABLATION_TARGETS)
def test_scaling_by_1_moves_nothing_and_the_statement_cannot_be_seen(layer, target: str) -> None:
    a = ablate(layer, target, "scale", factor=1.0)
    np.testing.assert_array_equal(a.matrix, getattr(layer, target.lower()))
    assert a.factor == 1.0
    for what in ("weights", "output", "y"):
        np.testing.assert_array_equal(stacked(a.after, what), stacked(layer, what))
    assert [s.passed for s in a.statements] == [None]
    assert "zero X" not in a.statements[0].message  # the matrix did not change; X is not zero
    if target in ("W_Q", "W_K"):
        assert f"({target} itself did not change)" in a.statements[0].message


def test_a_change_that_meets_a_zero_x_cannot_be_seen() -> None:
    layer = attention_layer([[0.0, 0.0], [0.0, 0.0]], W_Q, W_K, W_V)
    a = ablate(layer, "W_K", "scale", factor=3.0)
    assert a.statements[0].passed is None
    assert a.statements[0].message == "K did not change (the change to W_K met a zero X), so nothing can move."


@pytest.mark.parametrize("target", ["W_Q", "W_K"])
def test_with_one_visible_key_per_row_no_weight_can_move_and_the_statement_cannot_be_seen(target: str) -> None:
    for layer in (attention_layer([[1.0, 2.0]], W_Q, W_K, W_V),  # one token
                  attention_layer([[1.0, 2.0], [0.0, 1.0]], W_Q, W_K, W_V, padding_mask=[True, False])):
        a = ablate(layer, target, "scale", factor=2.0)
        np.testing.assert_array_equal(stacked(a.after, "weights"), stacked(layer, "weights"))
        s = a.statements[0]
        assert s.passed is None  # not a failure of the chapter's statement: nothing could move
        assert s.message.endswith("but no row sees more than one key, so no weight can move.")


def test_a_change_that_shifts_every_visible_score_together_moves_no_weight_and_fails() -> None:
    # Every query is (q, 0) (W_Q drops the second feature): changing K's second column changes no
    # score, so the weights stay, and the live check says so.
    layer = attention_layer([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]], np.eye(2), np.eye(2),
                            causal=False)
    edited = np.eye(2)
    edited[1, 1] = 5.0
    a = ablate(layer, "W_K", "edit", matrix=edited)
    assert not np.array_equal(stacked(a.after, "keys"), stacked(layer, "keys"))
    s = a.statements[0]
    assert s.passed is False
    assert s.message == "K moved in row 3 but no weight moved: every row's visible scores shifted together."


def test_the_ablation_keeps_the_layers_mode_and_masks() -> None:
    layer = attention_layer(X, W_Q, W_K, W_V, W_O, padding_mask=PADDING, causal=False,
                            failure_mode="output_projection_transposed")
    a = ablate(layer, "W_V", "scale", factor=-1.0)
    assert a.after.mode is layer.mode and a.after.causal is False
    np.testing.assert_array_equal(a.after.padding_mask, layer.padding_mask)
    assert a.after.failed_checks == layer.failed_checks == ("output_projection",)
    np.testing.assert_array_equal(stacked(a.after, "weights"), stacked(layer, "weights"))


# --- what an ablation refuses -----------------------------------------------------------------


@pytest.mark.parametrize(("matrix", "message"), [
    ([[1.0, 2.0]], "the edited matrix is 1×2; it must keep the shape 2×3"),
    (np.ones((3, 2)), "the edited matrix is 3×2; it must keep the shape 2×3"),
    ([[1.0, math.nan, 0.0], [0.0, 1.0, 0.0]], "the edited matrix holds a number that is not finite"),
    ([[1.0, math.inf, 0.0], [0.0, 1.0, 0.0]], "the edited matrix holds a number that is not finite"),
    ([[1.0, "x", 0.0], [0.0, 1.0, 0.0]], "the edited matrix must be rows of numbers"),
    ([[1.0, 2.0, 0.0], [0.0, 1.0]], "the edited matrix must be rows of numbers"),
    (None, "the edited matrix is empty; it must keep the shape 2×3"),
])
def test_an_edit_of_the_wrong_shape_or_not_finite_is_refused(layer, matrix, message: str) -> None:
    with pytest.raises(ValueError) as info:
        ablate(layer, "W_V", "edit", matrix=matrix)
    assert str(info.value) == message


@pytest.mark.parametrize("factor", [None, math.nan, math.inf])
def test_scaling_needs_a_finite_factor(layer, factor) -> None:
    with pytest.raises(ValueError, match=r"scaling needs a finite factor, not "):
        ablate(layer, "W_Q", "scale", factor=factor)


def test_a_scale_beyond_float64_is_refused_by_the_ablation() -> None:
    layer = attention_layer(X[0], W_Q, W_K, W_V)
    with pytest.raises(ValueError) as info:
        ablate(layer, "W_V", "scale", factor=1e308)  # 3 × 1e308 is not a float64
    assert str(info.value) == "scaling by 1e+308 overflows float64 (beyond ±1.8e308); use a smaller factor"


def test_an_ablated_matrix_the_layer_refuses_is_the_layers_clear_error() -> None:
    # Every number of W_V' is finite, but V = X W_V' is not: the layer's own refusal, naming the token.
    layer = attention_layer([[1e200, 0.0], [0.0, 1e200]], W_Q * 1e-200, W_K * 1e-200, W_V)
    with pytest.raises(AttentionInputError, match="V = X W_V overflows float64 at token 1") as info:
        ablate(layer, "W_V", "scale", factor=1e200)
    assert info.value.field == "X" and info.value.token == 1


def test_a_matrix_the_layer_does_not_have_cannot_be_ablated() -> None:
    without_w_o = attention_layer(X, W_Q, W_K, W_V, padding_mask=PADDING)
    with pytest.raises(ValueError, match="^this layer has no W_O to change$"):
        ablate(without_w_o, "W_O", "zero")
    without_w_v = attention_layer(X, W_Q, W_K)
    with pytest.raises(ValueError, match="^this layer has no W_V to change$"):
        ablate(without_w_v, "W_V", "scale", factor=2.0)


def test_only_a_layer_projected_from_x_can_be_ablated() -> None:
    given = LayerResult.of(scaled_dot_product_attention([1.0, 2.0], [1.0, 2.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match="needs a layer projected from X"):
        ablate(given, "W_V", "zero")


def test_unknown_targets_and_changes_list_the_known_ones(layer) -> None:
    with pytest.raises(ValueError, match="unknown ablation target 'W_X'; known: W_Q, W_K, W_V, W_O"):
        ablate(layer, "W_X", "zero")
    with pytest.raises(ValueError, match="unknown change 'double'; known: scale, zero, edit"):
        ablate(layer, "W_V", "double")
    assert ABLATION_CHANGES == ("scale", "zero", "edit")


def test_changed_matrix_leaves_the_original_alone() -> None:
    original = W_V.copy()
    scaled = changed_matrix(original, "scale", factor=-2.0)
    zeroed = changed_matrix(original, "zero")
    edited = changed_matrix(original, "edit", matrix=np.ones((2, 3), dtype=np.int64))
    np.testing.assert_array_equal(original, W_V)
    np.testing.assert_array_equal(scaled, -2.0 * W_V)
    assert not zeroed.any() and zeroed.shape == (2, 3)
    assert edited.dtype == np.float64 and (edited == 1.0).all()
