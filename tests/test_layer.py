"""The complete layer (Review, "The Complete Layer") against a naive loop reference written here.

A batch ``X: B×T×d_model`` shares one set of W's; each item attends only within itself; keys and
values may come from a second sequence (cross-attention, ``T_q != T_k``) with a named causal
alignment; padding is per item; ``Y = H W_O``. The reference below loops over items, query rows,
keys and features with :mod:`math` and shares nothing with the core, so a numpy mistake in the core
cannot cancel out. Then the first-incorrect-object rule, batch independence, and the errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import (
    CHECK_NAMES,
    CHECK_OBJECTS,
    FAILURE_MODES,
    MAX_BATCH,
    AttentionInputError,
    FailureMode,
    LayerResult,
    attention_layer,
    self_attention,
)

# --- the naive loop reference ------------------------------------------------------------------


def matmul(a: list, b: list) -> list:
    """``a @ b`` for lists of rows, three plain loops."""
    return [[sum(a[i][m] * b[m][j] for m in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def reference(x, w_q, w_k, w_v=None, w_o=None, *, x_kv=None, causal=True, alignment=None, padding=None) -> list:
    """One dict per batch item: scores, weights, H and Y, by loops.

    Query i (from 0) may read key j when the key is real and, under a causal mask, ``j <= i``
    (top-left) or ``j <= i + T_k - T`` (bottom-right). A row with no visible key gets weight 0
    everywhere (and so H = 0 there).
    """
    items = []
    for b in range(len(x)):
        seq = [list(map(float, row)) for row in x[b]]
        kv = seq if x_kv is None else [list(map(float, row)) for row in x_kv[b]]
        q, k = matmul(seq, w_q), matmul(kv, w_k)
        T, T_k, d_k = len(q), len(k), len(q[0])
        offset = T_k - T if alignment == "bottom_right" else 0
        scores, weights = [], []
        for i in range(T):
            row = [sum(q[i][c] * k[j][c] for c in range(d_k)) / math.sqrt(d_k) for j in range(T_k)]
            visible = [(padding is None or bool(padding[b][j])) and (not causal or j <= i + offset)
                       for j in range(T_k)]
            scores.append(row)
            if not any(visible):
                weights.append([0.0] * T_k)
                continue
            top = max(s for s, v in zip(row, visible, strict=True) if v)
            exps = [math.exp(s - top) if v else 0.0 for s, v in zip(row, visible, strict=True)]
            total = sum(exps)
            weights.append([e / total for e in exps])
        item = {"scores": scores, "weights": weights, "H": None, "Y": None}
        if w_v is not None:
            v = matmul(kv, w_v)
            item["H"] = [[sum(weights[i][j] * v[j][c] for j in range(T_k)) for c in range(len(v[0]))]
                         for i in range(T)]
            if w_o is not None:
                item["Y"] = matmul(item["H"], w_o)
        items.append(item)
    return items


def assert_matches_reference(layer: LayerResult, ref: list) -> None:
    assert len(layer.maps) == layer.B == len(ref)
    for m, item in zip(layer.maps, ref, strict=True):
        np.testing.assert_allclose(m.scores, item["scores"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m.weights, item["weights"], rtol=1e-12, atol=1e-15)
        if item["H"] is not None:
            np.testing.assert_allclose(m.output, item["H"], rtol=1e-12, atol=1e-12)
        if item["Y"] is not None:
            np.testing.assert_allclose(m.y, item["Y"], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(m.y, m.output @ layer.w_o, rtol=1e-12, atol=1e-12)  # Y = H W_O
    if ref[0]["H"] is not None:
        np.testing.assert_allclose(layer.output, [item["H"] for item in ref], rtol=1e-12, atol=1e-12)
    if ref[0]["Y"] is not None:
        assert layer.y.shape == (layer.B, layer.T, layer.d_model)
        np.testing.assert_allclose(layer.y, layer.output @ layer.w_o, rtol=1e-12, atol=1e-12)


# --- fixed inputs: three sequences, the third one and the second padded -----------------------

RNG = np.random.default_rng(23)
D_MODEL, D_K, D_V = 3, 2, 4
X_ALL = RNG.normal(size=(3, 4, D_MODEL))
X_KV_ALL = RNG.normal(size=(3, 5, D_MODEL))
W_Q = RNG.normal(size=(D_MODEL, D_K))
W_K = RNG.normal(size=(D_MODEL, D_K))
W_V = RNG.normal(size=(D_MODEL, D_V))
W_O = RNG.normal(size=(D_V, D_MODEL))

CAUSAL = {"no causal mask": (False, None), "top_left": (True, "top_left"), "bottom_right": (True, "bottom_right")}
# (T, T_k): self-attention, fewer queries than keys (decoding), more queries than keys.
LENGTHS = {"T=4 self": (4, None), "T=2 T_k=5": (2, 5), "T=4 T_k=3": (4, 3)}


def padding_for(B: int, T_k: int) -> np.ndarray:
    """Item 1 one token shorter than the batch, item 2 full length, item 3 two shorter (at least
    one real token each): sequences of different lengths in one batch, padded at the end."""
    real = [max(1, T_k - short) for short in (1, 0, 2)[:B]]
    return np.array([[j < n for j in range(T_k)] for n in real])


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("causal", CAUSAL)
@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("B", [1, 2, 3])
def test_the_layer_equals_the_loop_reference(B: int, lengths: str, causal: str, padded: bool) -> None:
    T, T_k = LENGTHS[lengths]
    is_causal, alignment = CAUSAL[causal]
    x = X_ALL[:B, :T]
    x_kv = None if T_k is None else X_KV_ALL[:B, :T_k]
    padding = padding_for(B, T_k or T) if padded else None
    assert padding is None or not padding.all()  # some key is padding in every padded batch
    layer = attention_layer(x, W_Q, W_K, W_V, W_O, x_kv=x_kv, causal=is_causal, causal_alignment=alignment,
                            padding_mask=padding)
    ref = reference(x.tolist(), W_Q.tolist(), W_K.tolist(), W_V.tolist(), W_O.tolist(),
                    x_kv=None if x_kv is None else x_kv.tolist(), causal=is_causal, alignment=alignment,
                    padding=None if padding is None else padding.tolist())
    assert_matches_reference(layer, ref)
    assert (layer.B, layer.T, layer.T_k, layer.d_model, layer.d_k, layer.d_v) == (B, T, T_k or T, D_MODEL, D_K, D_V)
    assert layer.cross == (T_k is not None) and layer.causal_alignment == alignment
    assert layer.output.shape == (B, T, D_V) and layer.y.shape == (B, T, D_MODEL)
    # Every check passes, except row_sums where a row sees no key (bottom-right with T > T_k, or
    # padding), and only independence does not apply to one item.
    empty_row = any(not any(row) for item in ref for row in item["weights"])
    assert set(layer.failed_checks) == ({"row_sums"} if empty_row else set())
    assert {c.name for c in layer.checks if c.passed is None} == ({"batch_independence"} if B == 1 else set())


def test_two_sequences_of_different_lengths_in_one_batch() -> None:
    # Review, "Distinctions to Keep": padding removes "artificial positions added to make sequence
    # lengths equal in a batch". Item 2 has two real tokens; its third row is padding.
    x = [[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.0, 2.0], [1.0, 0.0], [0.0, 0.0]]]
    padding = [[True, True, True], [True, True, False]]
    layer = attention_layer(x, np.eye(2), np.eye(2), np.eye(2), [[1.0, 2.0], [0.0, 1.0]], causal=False,
                            padding_mask=padding)
    assert_matches_reference(layer, reference(x, np.eye(2).tolist(), np.eye(2).tolist(), np.eye(2).tolist(),
                                              [[1.0, 2.0], [0.0, 1.0]], causal=False, padding=padding))
    assert (layer.maps[1].weights[:, 2] == 0.0).all()  # nobody reads item 2's padding
    assert (layer.maps[0].weights[:, 2] > 0.0).all()  # item 1's third token is real
    # Item 2 alone, unpadded at length 2, gives the same rows: the padding changed nothing real.
    alone = self_attention(x[1][:2], np.eye(2), np.eye(2), np.eye(2), [[1.0, 2.0], [0.0, 1.0]], causal=False)
    np.testing.assert_allclose(layer.y[1, :2], alone.y, rtol=1e-12)
    assert layer.failed_checks == () and layer.first_incorrect is None


def test_the_two_alignments_differ_only_when_the_lengths_do() -> None:
    x, x_kv = X_ALL[:1, :2], X_KV_ALL[:1, :4]
    top = attention_layer(x, W_Q, W_K, W_V, x_kv=x_kv, causal_alignment="top_left")
    bottom = attention_layer(x, W_Q, W_K, W_V, x_kv=x_kv, causal_alignment="bottom_right")
    assert top.maps[0].allowed.tolist() == [[True, False, False, False], [True, True, False, False]]
    assert bottom.maps[0].allowed.tolist() == [[True, True, True, False], [True, True, True, True]]
    same = X_ALL[:1, :3]
    a = attention_layer(same, W_Q, W_K, W_V, causal_alignment="top_left")
    b = attention_layer(same, W_Q, W_K, W_V, causal_alignment="bottom_right")
    np.testing.assert_array_equal(a.maps[0].weights, b.maps[0].weights)


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, MAX_BATCH), T=st.integers(1, 5), T_k=st.one_of(st.none(), st.integers(1, 5)),
    d_model=st.integers(1, 3), d_k=st.integers(1, 3), d_v=st.integers(1, 3), with_w_o=st.booleans(),
    causal=st.sampled_from(list(CAUSAL)), seed=st.integers(0, 2**32 - 1), pad=st.booleans(),
)
def test_any_shape_equals_the_loop_reference(B, T, T_k, d_model, d_k, d_v, with_w_o, causal, seed, pad) -> None:
    rng = np.random.default_rng(seed)
    is_causal, alignment = CAUSAL[causal]
    x = rng.normal(size=(B, T, d_model))
    x_kv = None if T_k is None else rng.normal(size=(B, T_k, d_model))
    w_q, w_k, w_v = (rng.normal(size=(d_model, d)) for d in (d_k, d_k, d_v))
    w_o = rng.normal(size=(d_v, d_model)) if with_w_o else None
    padding = rng.random((B, T_k or T)) < 0.7 if pad else None
    layer = attention_layer(x, w_q, w_k, w_v, w_o, x_kv=x_kv, causal=is_causal, causal_alignment=alignment,
                            padding_mask=padding)
    ref = reference(x.tolist(), w_q.tolist(), w_k.tolist(), w_v.tolist(), None if w_o is None else w_o.tolist(),
                    x_kv=None if x_kv is None else x_kv.tolist(), causal=is_causal, alignment=alignment,
                    padding=None if padding is None else padding.tolist())
    assert_matches_reference(layer, ref)
    assert (layer.y is None) == (w_o is None)
    empty_row = any(not any(row) for item in ref for row in item["weights"])
    assert set(layer.failed_checks) == ({"row_sums"} if empty_row else set())
    if B > 1:
        assert next(c for c in layer.checks if c.name == "batch_independence").passed is True


# --- the first incorrect object (Review, "Audit Order") -------------------------------------------

# A batch of two with an asymmetric W_O and d_v = d_model, so every mode is exposed; a large W_Q and
# W_K for the naive softmax's overflow.
X_2 = np.array([[[1.0, 0.0, 1.0], [0.0, 1.0, -1.0], [1.0, 1.0, 0.0], [-1.0, 2.0, 1.0]],
                [[0.0, 1.0, 2.0], [1.0, -1.0, 0.0], [2.0, 0.0, 1.0], [0.5, 0.5, -1.0]]])
W_Q_3 = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, -1.0]])
W_K_3 = np.array([[0.0, 1.0], [1.0, 0.5], [-1.0, 1.0]])
W_V_3 = np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0], [2.0, 0.0, 1.0]])
W_O_3 = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0]])


def batch_of_two(mode: str, B: int = 2, **settings) -> LayerResult:
    big = 40.0 if mode == "naive_softmax" else 1.0
    x = np.concatenate([X_2, X_2[:1] * -0.5])[:B]
    return attention_layer(x, W_Q_3 * big, W_K_3 * big, W_V_3, W_O_3, failure_mode=mode, **settings)


FIRST_INCORRECT = {
    "correct": None,
    "mask_after_softmax": "mask",
    "no_mask": "mask",
    "no_scaling": "score_scale",
    "naive_softmax": "finite_weights",
    "wrong_axis": "row_sums",
    "keys_as_values": "output",
    "output_projection_transposed": "output_projection",
    "batch_items_mixed": "score_scale",
    "rows_and_columns_swapped": "output",
}


def test_every_mode_has_its_first_incorrect_object() -> None:
    assert set(FIRST_INCORRECT) == set(FAILURE_MODES)


@pytest.mark.parametrize("mode", FAILURE_MODES.values(), ids=list(FAILURE_MODES))
def test_the_first_incorrect_object_is_the_first_failed_check_in_audit_order(mode: FailureMode) -> None:
    layer = batch_of_two(mode.name)
    assert set(layer.failed_checks) == mode.breaks
    expected = FIRST_INCORRECT[mode.name]
    # The rule itself: the first of CHECK_NAMES, in order, among the mode's broken checks.
    assert expected == next((name for name in CHECK_NAMES if name in mode.breaks), None)
    if expected is None:
        assert layer.first_incorrect is None
        return
    first = layer.first_incorrect
    assert first.name == expected and first.passed is False
    assert first is next(c for c in layer.checks if c.passed is False)
    assert layer.failed_checks[0] == expected
    assert CHECK_OBJECTS[expected]  # the object the page tells a learner to inspect


def test_a_failed_check_names_the_first_failing_item() -> None:
    # Item 1 passes every check; only item 2 scores too large to exponentiate naively.
    x = np.stack([X_2[0] * 0.01, X_2[1] * 40.0])
    layer = attention_layer(x, W_Q_3 * 40.0, W_K_3 * 40.0, W_V_3, failure_mode="naive_softmax")
    assert layer.maps[0].failed_checks == ()
    first = layer.first_incorrect
    assert first.name == "finite_weights" and first.message.startswith("Item 2: weights are not finite")


def test_mixed_items_name_the_item_and_token_read() -> None:
    layer = batch_of_two("batch_items_mixed")
    assert layer.flattened and len(layer.maps) == 1 and layer.maps[0].weights.shape == (8, 8)
    assert (layer.B, layer.T, layer.T_k) == (2, 4, 4)
    checks = {c.name: c for c in layer.checks}
    assert checks["score_scale"].message == ("scores are 8×8 over the batch flattened into one sequence; "
                                             "expected 2 maps of 4×4, one per batch item (S: B×T×T)")
    assert checks["mask"].message.startswith("softmax saw finite scores where one batch item reads another: "
                                             "item 2 token 1 reads item 1 token 1")
    assert checks["forbidden_zeros"].message.startswith("weight where one batch item reads another: item 2")
    assert layer.item_of(4) == (2, 1) and layer.item_of(3) == (1, 4)


# --- step 9: independence between batch items ---------------------------------------------------

NOT_MIXING = [m for m in FAILURE_MODES.values() if m.batch != "flattened"]


@pytest.mark.parametrize("B", [2, 3])
@pytest.mark.parametrize("mode", NOT_MIXING, ids=[m.name for m in NOT_MIXING])
def test_independence_passes_for_every_mode_that_keeps_items_apart(mode: FailureMode, B: int) -> None:
    check = next(c for c in batch_of_two(mode.name, B).checks if c.name == "batch_independence")
    assert check.passed is True
    assert check.message == (f"Changing any one of the {B} items leaves every other item's weights and "
                             "output as they were.")


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "no causal mask"])
@pytest.mark.parametrize("B", [2, 3])
def test_independence_fails_when_items_are_mixed(B: int, causal: bool) -> None:
    check = next(c for c in batch_of_two("batch_items_mixed", B, causal=causal).checks
                 if c.name == "batch_independence")
    assert check.passed is False
    assert check.message.startswith("changing item 1 moved item 2's weights")
    assert check.rows == (2,)


def item_output(layer: LayerResult, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Item ``b``'s (from 0) weights over its own keys and Y, from per-item or flattened maps."""
    T = layer.T
    if layer.flattened:
        m = layer.maps[0]
        return m.weights[b * T:(b + 1) * T], m.y[b * T:(b + 1) * T]
    return layer.maps[b].weights, layer.maps[b].y


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "no causal mask"])
def test_changing_one_item_moves_another_only_when_items_are_mixed(causal: bool) -> None:
    # The operational statement, by hand: change item 1's X and look at item 2's output.
    changed = X_2.copy()
    changed[0] = changed[0] * 3.0 + 1.0
    for mode, moves in (("correct", False), ("batch_items_mixed", True)):
        before = attention_layer(X_2, W_Q_3, W_K_3, W_V_3, W_O_3, causal=causal, failure_mode=mode)
        after = attention_layer(changed, W_Q_3, W_K_3, W_V_3, W_O_3, causal=causal, failure_mode=mode)
        _, y_before = item_output(before, 1)
        _, y_after = item_output(after, 1)
        assert (not np.array_equal(y_before, y_after)) == moves, mode
        # And the other way: changing item 2 moves item 1 only if item 1 may read it, which a causal
        # mask over the flattened batch forbids (item 1 comes first).
        back = X_2.copy()
        back[1] = back[1] * 3.0 + 1.0
        _, y_1 = item_output(attention_layer(back, W_Q_3, W_K_3, W_V_3, W_O_3, causal=causal, failure_mode=mode), 0)
        _, y_1_before = item_output(before, 0)
        assert (not np.array_equal(y_1, y_1_before)) == (moves and not causal), mode


def test_mixing_is_caught_even_where_adding_1_to_an_item_would_change_nothing() -> None:
    # W's whose columns sum to 0 map an all-ones change of X to zero; the items still mix, and
    # changing item 1 another way does move item 2.
    w = [[1.0, -1.0], [-1.0, 1.0]]
    x = np.array([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], [[0.0, 1.0], [2.0, 0.0], [1.0, 3.0]]])
    mixed = attention_layer(x, w, w, w, failure_mode="batch_items_mixed")
    assert set(mixed.failed_checks) == FAILURE_MODES["batch_items_mixed"].breaks
    other = x.copy()
    other[0] *= 3.0
    assert not np.array_equal(attention_layer(other, w, w, w, failure_mode="batch_items_mixed").output[1],
                              mixed.output[1])
    assert attention_layer(x, w, w, w).checks[-1].passed is True


def test_independence_does_not_apply_where_every_change_overflows() -> None:
    x = [[[1.2e154], [1.2e154]], [[1.2e154], [-1.2e154]]]  # q·k is 1.44e308: any larger overflows
    layer = attention_layer(x, [[1.0]], [[1.0]], [[1.0]])
    check = layer.checks[-1]
    assert check.passed is None and layer.failed_checks == ()
    assert check.message == "Changing an item overflows float64 here, so independence cannot be tested."


def test_independence_does_not_apply_to_one_item() -> None:
    layer = attention_layer(X_2[0], W_Q_3, W_K_3, W_V_3, W_O_3, failure_mode="batch_items_mixed")
    assert layer.B == 1 and not layer.flattened and layer.failed_checks == ()
    check = layer.checks[-1]
    assert check.name == "batch_independence" and check.passed is None
    assert check.message == "One batch item, so there is no other sequence to mix with."


def test_layer_of_wraps_one_sequence_with_its_checks() -> None:
    r = self_attention(X_2[0], W_Q_3, W_K_3, W_V_3, W_O_3)
    layer = LayerResult.of(r)
    assert layer.B == 1 and layer.maps == (r,) and layer.checks == r.checks
    assert layer.x.shape == (1, 4, 3) and layer.y.shape == (1, 4, 3)
    np.testing.assert_array_equal(layer.y[0], r.y)
    np.testing.assert_array_equal(layer.recompute().y, layer.y)


# --- errors name the field, the item, the token and the component ------------------------------

X1 = [[1.0, 0.0, 1.0], [0.0, 1.0, -1.0], [1.0, 1.0, 0.0]]
X2 = [[0.0, 1.0, 2.0], [1.0, -1.0, 0.0], [2.0, 0.0, 1.0]]
W = np.eye(3)[:, :2]
P = pytest.param
# overrides, field, item, (token, row, column), words in the message
ERRORS = [
    P({"x_kv": [np.ones((4, 3))] * 2}, "causal_alignment", None, (None, None, None),
      ["3 queries and 4 keys", "top_left", "bottom_right"], id="causal T_q != T_k without an alignment"),
    P({"x_kv": [np.ones((4, 3))] * 2, "causal_alignment": "diagonal"}, "causal_alignment", None,
      (None, None, None), ["unknown causal alignment 'diagonal'"], id="unknown alignment"),
    P({"causal_alignment": "diagonal"}, "causal_alignment", None, (None, None, None),
      ["unknown causal alignment"], id="unknown alignment in self-attention"),
    P({"x": [X1, X2[:2]]}, "X", 2, (None, None, None),
      ["Batch item 2 of X has 2 tokens, item 1 has 3", "pad the shorter sequence"], id="items of different lengths"),
    P({"x_kv": [np.ones((4, 3)), np.ones((3, 3))], "causal": False}, "X_kv", 2, (None, None, None),
      ["Batch item 2 of X_kv has 3 tokens, item 1 has 4"], id="X_kv items of different lengths"),
    P({"x_kv": [np.ones((4, 3))], "causal": False}, "X_kv", None, (None, None, None),
      ["X_kv has 1 batch item but X has 2"], id="X_kv with another B"),
    P({"w_o": np.ones((3, 3))}, "W_O", None, (None, 3, None),
      ["W_O has 3 rows but W_V has 2 columns (d_v = 2): row 3 is extra"], id="W_O with a row too many"),
    P({"w_o": np.ones((2, 2))}, "W_O", None, (None, None, 3),
      ["W_O has 2 columns but X has 3 (d_model = 3)"], id="W_O with a column too few"),
    P({"w_v": None, "w_o": np.ones((2, 3))}, "W_O", None, (None, None, None), ["needs W_V"], id="W_O without W_V"),
    P({"w_q": np.ones((2, 2))}, "W_Q", None, (None, 3, None), ["W_Q has 2 rows but X has 3 columns"],
      id="W_Q shared by both items names no item"),
    P({"padding_mask": [[True] * 3]}, "padding_mask", None, (None, None, None),
      ["padding_mask has 1 row for 2 batch items"], id="padding mask with too few rows"),
    P({"padding_mask": [True, False]}, "padding_mask", None, (None, None, None),
      ["padding_mask has 1 row for 2 batch items; give one row of booleans per item"],
      id="one row of as many booleans as items is one row"),
    P({"padding_mask": True}, "padding_mask", None, (None, None, None),
      ["padding_mask has 1 row for 2 batch items"], id="padding mask a bare boolean"),
    P({"padding_mask": [[True] * 3] * 3}, "padding_mask", None, (None, None, None),
      ["padding_mask has 3 rows for 2 batch items"], id="padding mask with too many rows"),
    P({"padding_mask": [[True] * 3, True]}, "padding_mask", 2, (None, None, None),
      ["Batch item 2: padding_mask must be 3 booleans"], id="padding mask item 2 a bare boolean"),
    P({"padding_mask": [[True] * 3, [True] * 2]}, "padding_mask", 2, (None, None, None),
      ["Batch item 2: padding_mask must be 3 booleans"], id="padding mask row of the wrong length"),
    P({"padding_mask": [[True] * 3, [1, 0, 1]]}, "padding_mask", 2, (None, None, None),
      ["Batch item 2: padding_mask must be 3 booleans"], id="padding mask row not booleans"),
    P({"x": [X1, [X2[0], [1.0, -1.0, math.nan], X2[2]]]}, "X", 2, (2, 2, 3),
      ["Batch item 2: X row 2 (token 2), column 3 is not a finite number: nan"], id="nan in item 2"),
    P({"x": [X1, [X2[0], X2[1], [2.0, "x", 1.0]]]}, "X", 2, (3, 3, 2),
      ["Batch item 2: X row 3 (token 3), column 2 is not a number: 'x'"], id="text in item 2"),
    P({"x_kv": [X1, [X2[0], [math.inf, 0.0, 0.0], X2[2]]], "causal": False}, "X_kv", 2, (2, 2, 1),
      ["Batch item 2: X_kv row 2 (token 2), column 1 is not a finite number: inf"], id="inf in item 2 of X_kv"),
    P({"x": [X1, X2, X1, X2]}, "X", None, (None, None, None), ["X has 4 batch items; the layer takes at most 3"],
      id="four items"),
    P({"x": [X1, (np.array(X2) * 1e160).tolist()], "w_q": W * 1e160}, "X", 2, (1, 1, None),
      ["Batch item 2: Q = X W_Q overflows float64 at token 1"], id="overflow in item 2"),
]


@pytest.mark.parametrize(("overrides", "field", "item", "where", "words"), ERRORS)
def test_bad_layer_input_is_refused_by_field_item_token_and_component(overrides, field, item, where, words) -> None:
    arguments = {"x": [X1, X2], "w_q": W, "w_k": W, "w_v": W, "w_o": None, **overrides}
    with pytest.raises(AttentionInputError) as info:
        attention_layer(arguments.pop("x"), arguments.pop("w_q"), arguments.pop("w_k"), arguments.pop("w_v"),
                        arguments.pop("w_o"), **arguments)
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.field, error.item) == (field, item)
    assert (error.token, error.row, error.column) == where
    for word in words:
        assert word in str(error), f"{word!r} not in {str(error)!r}"
    assert "np." not in str(error)


def test_a_bare_boolean_padding_mask_for_one_item_is_refused_by_field() -> None:
    with pytest.raises(AttentionInputError) as info:  # it was a TypeError from list(True)
        attention_layer(X1, W, W, padding_mask=True)
    assert info.value.field == "padding_mask" and info.value.item is None
    assert str(info.value) == "padding_mask must be 3 booleans (True = real token), got () bool"


def test_a_padding_mask_for_one_item_may_be_one_row_or_a_row_in_a_list() -> None:
    for mask in ([True, True, False], [[True, True, False]], np.array([True, True, False])):
        assert attention_layer(X1, W, W, padding_mask=mask).padding_mask.tolist() == [[True, True, False]]


def test_one_item_errors_name_no_item() -> None:
    with pytest.raises(AttentionInputError) as info:
        attention_layer([X1[0], [1.0, math.nan, 0.0]], W, W)
    assert info.value.item is None and str(info.value) == "X row 2 (token 2), column 2 is not a finite number: nan"


def test_an_unknown_mode_is_a_plain_value_error() -> None:
    with pytest.raises(ValueError, match="unknown failure mode 'mixed'"):
        attention_layer([X1, X2], W, W, failure_mode="mixed")
