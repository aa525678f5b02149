"""The projection-ablation panel without a browser: drive its parameters, read what it shows.

The layer is the four-token trace of Self-Attention in Matrix Form ("Extend the Four-Token
Trace": X = [[1,0],[0,1],[1,1],[-1,1]], W_Q = W_K = I, W_V = [[1,1],[1,-1]]) with W_O = I, held
by a stub with a ``layer`` parameter, as the learner state holds it. The statements are Review,
"What the Projection Ablations Establish".
"""

from __future__ import annotations

import numpy as np
import param
import pytest

from app.learner.ablation import NEEDS_MATRIX_MODE, AblationPanel, copy_label
from attention_core import scaled_dot_product_attention
from attention_core.ablation import Ablation
from attention_core.layer import LayerResult, attention_layer

X = np.array([[1, 0], [0, 1], [1, 1], [-1, 1]], dtype=float)
I2 = np.eye(2)
W_V = np.array([[1, 1], [1, -1]], dtype=float)


class LayerSource(param.Parameterized):
    """What the panel reads: an object with a ``layer`` parameter (the learner state's)."""

    layer = param.Parameter(default=None)


def trace_layer(**changes) -> LayerResult:
    args = dict(x=X, w_q=I2, w_k=I2, w_v=W_V, w_o=I2)
    args.update(changes)
    return attention_layer(args.pop("x"), args.pop("w_q"), args.pop("w_k"), args.pop("w_v"),
                           args.pop("w_o"), **args)


@pytest.fixture
def source() -> LayerSource:
    return LayerSource(layer=trace_layer())


@pytest.fixture
def saved() -> list[Ablation]:
    return []


@pytest.fixture
def panel(source, saved) -> AblationPanel:
    def save(ablation: Ablation) -> str:
        saved.append(ablation)
        return f"Saved ablation of {ablation.target} as run #{len(saved)}."

    return AblationPanel(source, on_save=save)


def outcomes(panel: AblationPanel) -> dict[str, bool | None]:
    return {s.name: s.passed for s in panel.ablation.statements}


def shown(panel: AblationPanel) -> str:
    """Everything the panel's HTML panes show, as one text."""
    return "".join(str(p.object) for p in (panel.needs_matrices, panel.alert, panel.weights_text,
                                            panel.details, panel.save_status))


def map_values(heatmap) -> list:
    return [None if np.isnan(v) else v for v in heatmap.source.data["value"]]


def test_scaling_w_v_keeps_every_weight_moves_h_and_y_and_the_statement_holds(panel):
    panel.param.update(target="W_V", change="scale", factor="2")
    a = panel.ablation
    assert (a.target, a.change, a.factor) == ("W_V", "scale", 2.0)
    assert outcomes(panel) == {"ablation_w_v": True}
    assert panel.message == ""
    text = shown(panel)
    assert "data-same='true'" in text and "every weight is exactly the same before and after" in text
    assert "<b>holds</b>: Changing W_V changes routed content without directly changing attention weights." in text
    assert "W_V after: scaled by 2" in text
    # The two maps show the same weights on the one [0, 1] scale; the outputs moved in every row.
    assert map_values(panel.before_map) == map_values(panel.after_map)
    assert (panel.before_map.mapper.low, panel.before_map.mapper.high) == (0.0, 1.0)
    assert (panel.after_map.mapper.low, panel.after_map.mapper.high) == (0.0, 1.0)
    assert text.count("<td class='moved'>H, Y</td>") == 4
    np.testing.assert_array_equal(a.after.y, 2 * a.before.y)


def test_scaling_w_q_moves_the_weights_and_its_statement_holds(panel):
    panel.param.update(target="W_Q", factor="3")
    assert outcomes(panel) == {"ablation_w_q": True}
    assert "data-same='false'" in shown(panel)
    assert map_values(panel.before_map) != map_values(panel.after_map)


def test_zeroing_w_o_leaves_the_weights_and_makes_y_zero(panel):
    panel.param.update(target="W_O", change="zero")
    assert outcomes(panel) == {"ablation_w_o": True, "ablation_w_o_zero": True}
    assert not panel.ablation.after.y.any()
    text = shown(panel)
    assert "Setting W_O = 0 makes this branch&#39;s output zero" in text
    assert "Every number of Y is exactly 0." in text
    assert text.count("<td class='moved'>Y</td>") == 4  # H stays; only Y moves


def test_a_change_that_moves_nothing_is_said_to_show_nothing(panel):
    panel.param.update(target="W_K", factor="1")
    assert outcomes(panel) == {"ablation_w_k": None}
    assert "<b>not shown by this change</b>: Changing W_K changes how each position can be matched." in shown(panel)


@pytest.mark.parametrize("typed", ["inf", "nan", "", "1,5", "two"])
def test_a_bad_factor_is_named_and_the_last_valid_ablation_stays(panel, typed):
    panel.factor = "3"
    last = panel.ablation
    panel.factor = typed
    assert panel.message.startswith("Factor: ")
    assert panel.ablation is last
    assert panel.alert.visible
    assert "role='alert'" in str(panel.alert.object)
    assert "still show the last valid ablation" in str(panel.alert.object)
    panel.factor = "0.5"
    assert panel.message == "" and not panel.alert.visible and panel.ablation.factor == 0.5


def test_typed_text_is_shown_escaped(panel):
    panel.factor = "<b>2</b>"
    assert "<b>2</b>" not in str(panel.alert.object)
    assert "&lt;b&gt;2&lt;/b&gt;" in str(panel.alert.object)


def test_editing_a_copy_names_a_bad_cell_and_takes_a_good_copy(panel):
    panel.param.update(target="W_V", change="edit")
    assert panel.grid.visible
    assert panel.copy == [["1", "1"], ["1", "-1"]]  # a copy of W_V, exactly
    assert panel.grid.labels[1][0] == copy_label("W_V", 1, 0) == "W_V copy row 2, column 1"
    last = panel.ablation
    panel.copy = [["1", "1"], ["x", "-1"]]
    assert panel.message.startswith("W_V copy row 2, column 1: 'x' is not a number")
    assert panel.ablation is last
    assert set(panel.grid.errors) == {"W_V copy row 2, column 1"}
    panel.copy = [["2", "1"], ["1", "-1"]]
    assert panel.message == "" and panel.grid.errors == {}
    a = panel.ablation
    assert (a.target, a.change, a.factor) == ("W_V", "edit", None)
    np.testing.assert_array_equal(a.matrix, [[2, 1], [1, -1]])
    assert outcomes(panel) == {"ablation_w_v": True}


def test_edits_arrive_from_the_grid(panel):
    panel.change = "edit"
    panel.grid.value = [["0", "0"], ["0", "0"]]
    assert panel.copy == [["0", "0"], ["0", "0"]]
    assert not panel.ablation.after.output.any()


def test_the_copy_follows_the_target_and_its_matrix_but_keeps_edits_when_another_input_changes(panel, source):
    panel.param.update(target="W_V", change="edit")
    panel.copy = [["3", "1"], ["1", "-1"]]
    source.layer = trace_layer(x=X * 2)  # X changed, W_V did not: the edit stays
    assert panel.copy == [["3", "1"], ["1", "-1"]]
    np.testing.assert_array_equal(panel.ablation.before.x[0], X * 2)
    source.layer = trace_layer(w_v=W_V * 0.5)  # W_V itself changed: a fresh copy of it
    assert panel.copy == [["0.5", "0.5"], ["0.5", "-0.5"]]
    panel.target = "W_Q"
    assert panel.copy == [["1", "0"], ["0", "1"]]
    assert panel.grid.labels[0][0] == "W_Q copy row 1, column 1"


def test_it_recomputes_when_the_layer_changes_and_offers_only_the_layers_matrices(panel, source):
    panel.target = "W_O"
    source.layer = trace_layer(w_o=None)
    assert panel.param.target.objects == ["W_Q", "W_K", "W_V"]
    assert panel.target == "W_V"
    assert panel.ablation.before is source.layer
    source.layer = trace_layer(w_v=None, w_o=None)
    assert panel.param.target.objects == ["W_Q", "W_K"]
    assert panel.ablation.target == "W_Q"
    assert "no values, so there is no H or Y" in shown(panel)


def test_panels_of_two_sessions_do_not_share_their_choices():
    one = AblationPanel(LayerSource(layer=trace_layer(w_o=None)))
    two = AblationPanel(LayerSource(layer=trace_layer()))
    assert one.param.target.objects == ["W_Q", "W_K", "W_V"]
    assert two.param.target.objects == ["W_Q", "W_K", "W_V", "W_O"]


def test_without_matrices_it_says_ablations_need_matrix_mode(panel, source):
    source.layer = LayerResult.of(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100]))
    assert NEEDS_MATRIX_MODE in str(panel.needs_matrices.object)
    assert panel.needs_matrices.visible and not panel.body.visible
    assert panel.ablation is None
    source.layer = None
    assert "No valid input yet." in str(panel.needs_matrices.object)
    source.layer = trace_layer()
    assert not panel.needs_matrices.visible and panel.body.visible
    assert outcomes(panel) == {"ablation_w_v": True}


def test_save_hands_the_ablation_to_the_callback_and_shows_its_answer(panel, saved):
    panel.param.update(target="W_O", change="zero")
    panel.save_button.clicks += 1
    assert len(saved) == 1 and isinstance(saved[0], Ablation)
    assert (saved[0].target, saved[0].change) == ("W_O", "zero")
    assert saved[0] is panel.ablation
    assert panel.save_message == "Saved ablation of W_O as run #1."
    assert '<div class="status ok" role="status">Saved ablation' in str(panel.save_status.object)


def test_save_refuses_while_the_controls_give_no_ablation(panel, saved):
    panel.factor = "inf"
    panel.save_button.clicks += 1
    assert saved == []
    assert panel.save_message.startswith("Not saved: fix the ablation first (Factor: ")
    # In Save run's error colour, as plain to see as a refusal under Save run (a newcomer missed it).
    assert '<div class="status error" role="status">Not saved' in str(panel.save_status.object)


def test_without_a_save_callback_there_is_no_save_button(source):
    assert not AblationPanel(source).save_button.visible


def test_a_batch_shows_the_chosen_items_weights():
    x = np.stack([X, X[::-1]])
    panel = AblationPanel(LayerSource(layer=trace_layer(x=x)))
    assert panel.item_select.visible and panel.item_select.options == [1, 2]
    first = map_values(panel.before_map)
    panel.item = 2
    second = map_values(panel.before_map)
    assert first != second
    item_2 = panel.ablation.before.maps[1]
    masked_as_nan = np.where(item_2.allowed, item_2.weights, np.nan)  # masked cells are drawn apart
    np.testing.assert_array_equal(np.array(second, dtype=float).reshape(4, 4), masked_as_nan)
    assert "Weights of batch item 2" in shown(panel)


def test_a_sources_own_batch_item_is_followed_and_no_second_control_shown():
    class WithItem(LayerSource):
        item = param.Integer(default=1, bounds=(1, 3))

    x = np.stack([X, X[::-1]])
    source = WithItem(layer=trace_layer(x=x), item=2)
    panel = AblationPanel(source)
    assert panel.item == 2 and not panel.item_select.visible
    source.item = 1
    assert panel.item == 1 and "Weights of batch item 1" in shown(panel)


def test_cross_attention_weights_are_shown_as_tables():
    layer = trace_layer(x=X[:2], x_kv=X, causal_alignment="bottom_right")  # 2 × 4: not square
    panel = AblationPanel(LayerSource(layer=layer))
    assert not panel.before_map.visible and not panel.after_map.visible
    text = shown(panel)
    assert "data-testid='ablation-weights-before'" in text and "data-testid='ablation-weights-after'" in text
    assert outcomes(panel) == {"ablation_w_v": True}


def test_a_layer_the_core_refuses_is_said_and_the_last_valid_ablation_stays():
    # X near 1e200 and W_K near 1e-200 are fine; W_Q scaled by 1e200 makes Q overflow float64.
    panel = AblationPanel(LayerSource(layer=trace_layer(x=X * 1e200, w_k=I2 * 1e-200)))
    panel.target = "W_Q"
    last = panel.ablation
    panel.factor = "1e200"
    assert panel.message.startswith("The ablated layer cannot be computed: Q = X W_Q overflows float64")
    assert panel.ablation is last


def test_the_vector_mode_page_says_the_panel_needs_matrix_mode_as_html_not_escaped_text(learner_page):
    """Before the panel is made, its heading and lead are markup: not "&lt;h3&gt;" shown as text
    (they begin the introduction's pane until the panel is made in matrix mode)."""
    assert learner_page.ablation is None
    text = str(learner_page.intro.object)
    assert "<h3>Projection ablations</h3>" in text and "&lt;" not in text and NEEDS_MATRIX_MODE in text
    learner_page.state.input_mode = "matrices"  # the panel, made, goes just before the introduction
    main = learner_page.main.objects
    assert main.index(learner_page.ablation) == main.index(learner_page.intro) - 1
    assert "Projection ablations" not in str(learner_page.intro.object)


def test_an_inactive_panel_leaves_a_new_layer_for_when_it_is_active_again(panel, source):
    """Hidden (``active`` false, as the learner page's panel is until a prediction is written), a
    new layer is not ablated; it is once the panel is active again."""
    last = panel.ablation
    panel.active = False
    source.layer = trace_layer(w_v=W_V * 3)
    assert panel.ablation is last
    panel.active = True
    assert panel.ablation is not last and panel.ablation.before is source.layer
    assert "W_V before" in shown(panel) and panel.message == ""


def test_the_weights_summary_says_row_for_one_moved_row_and_rows_for_several():
    from app.learner.ablation import weights_summary_html
    from attention_core.ablation import ablate

    # Causal over two tokens: row 1 reads only token 1, so only row 2's weights can move.
    one = ablate(trace_layer(x=X[:2], causal=True), "W_Q", "scale", factor=2.0)
    several = ablate(trace_layer(causal=True), "W_Q", "scale", factor=2.0)
    assert "<b>the weights moved in row 2.</b>" in str(weights_summary_html(one, 1))
    assert "<b>the weights moved in rows 2, 3, 4.</b>" in str(weights_summary_html(several, 1))
