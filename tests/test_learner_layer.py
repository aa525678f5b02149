"""The learner state and views on the complete layer (Review, "The Complete Layer"), without a
browser: W_O, a batch with per-item X and padding, cross-attention with its own token count and
causal alignment, the cells' names in errors, the presets that expose the three new modes, the
checklist in nine steps and the shapes in B, T, d_model, d_k, d_v.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.learner.checks import readouts_html
from app.learner.inputs import grid_layout
from app.learner.projections import shape_list, shapes_html
from app.learner.runs import tick_label
from app.learner.state import EXPOSING_PRESETS, PRESETS, change_text, layer_exposure
from attention_core import attention_layer, causal_mask
from attention_core.ablation import ablate
from attention_core.checks import CHECK_NAMES
from attention_core.modes import FAILURE_MODES


@pytest.fixture
def state(learner_page):
    return learner_page.state


def test_matrix_mode_computes_the_layer_and_shows_its_one_map(state):
    state.apply_preset("four_token_trace")
    assert state.layer.B == 1 and state.result is state.layer.maps[0]
    assert tuple(c.name for c in state.layer.checks) == CHECK_NAMES
    assert state.layer.y is None  # no W_O: the layer ends at H = A V


def test_w_o_gives_y_equal_to_h_w_o_and_needs_values(state):
    state.apply_preset("four_token_trace")
    state.use_values = False
    state.use_w_o = True
    assert state.use_values  # Y = H W_O needs H
    assert "w_o" in state.active_fields() and state.shape("w_o") == (state.d_v, state.d_model)
    layer = state.layer
    np.testing.assert_allclose(layer.y[0], layer.output[0] @ layer.w_o)
    state.use_values = False
    assert not state.use_w_o and "w_o" not in state.active_fields()


def test_a_batch_computes_every_item_with_shared_ws_and_per_item_padding(state):
    state.apply_preset("batch_padded")
    layer = state.layer
    assert (layer.B, layer.T) == (2, 3) and state.input_ok
    assert layer.padding_mask.tolist() == [[True] * 3, [True, True, False]]
    expected = attention_layer([state_grid(state, "x"), state_grid(state, "x_2")], np.eye(2), np.eye(2),
                               [[1, 1], [1, -1]], padding_mask=[[True] * 3, [True, True, False]])
    for got, want in zip(layer.maps, expected.maps, strict=True):
        np.testing.assert_array_equal(got.weights, want.weights)
    assert layer.checks[-1].passed is True
    state.item = 2
    assert state.result is layer.maps[1]
    state.batch_size = 1
    assert state.item == 1 and state.layer.B == 1


def state_grid(state, field: str) -> list[list[float]]:
    rows, width = state.shape(field)
    return [[float(t) for t in row[:width]] for row in getattr(state, field)[:rows]]


def test_lowering_and_raising_the_batch_gives_back_what_was_typed(state):
    state.apply_preset("batch_padded")
    state.batch_size = 3
    state.set_token_text("x_3", 0, "7", 1)
    state.set_padding(1, True, item=3)
    state.batch_size = 1
    state.batch_size = 3
    assert state.x_3[0][1] == "7" and state.padding_3[1]
    assert state.layer.x[2, 0, 1] == 7.0 and not state.layer.padding_mask[2, 1]


def test_cells_are_named_by_item_only_with_a_batch(state):
    state.input_mode = "matrices"
    assert state.cell_name("x", 1, 0) == "X token 2, component 1"
    state.batch_size = 2
    assert state.cell_name("x", 1, 0) == "X item 1 token 2, component 1"
    assert state.cell_name("x_2", 2, 1) == "X item 2 token 3, component 2"
    state.cross_attention = True
    assert state.cell_name("x_kv_2", 3, 0) == "X_kv item 2 token 4, component 1"
    state.use_w_o = True
    assert state.cell_name("w_o", 0, 1) == "W_O row 1, column 2"


def test_a_bad_cell_of_item_2_is_named_with_its_item_token_and_component(state):
    state.apply_preset("batch_padded")
    state.set_token_text("x_2", 1, "abc", 0)
    assert not state.input_ok
    assert list(state.field_errors) == ["X item 2 token 2, component 1"]
    state.set_token_text("x_2", 1, "1", 0)
    assert state.input_ok and state.field_errors == {}


def test_a_core_refusal_is_mapped_to_the_item_and_cell_it_names(state):
    state.apply_preset("batch_padded")
    state.set_token_text("x_2", 1, "1e200", 1)  # its scores overflow float64
    assert not state.input_ok
    (label, message), = state.field_errors.items()
    assert label.startswith("X item 2 ") and "item 2" in message.lower()


def test_w_o_cells_refuse_bad_input_naming_the_cell(state):
    state.apply_preset("output_projection")
    state.set_token_text("w_o", 1, "", 0)
    assert list(state.field_errors) == ["W_O row 2, column 1"]
    assert "W_O row 2, column 1" in state.field_errors["W_O row 2, column 1"]


def test_cross_attention_uses_its_own_token_count_and_the_chosen_alignment(state):
    state.apply_preset("cross_attention")
    layer = state.layer
    assert (layer.T, layer.T_k, layer.cross) == (2, 4, True)
    assert state.key_tokens == 4 and state.shape("x_kv") == (4, 2)
    np.testing.assert_array_equal(layer.maps[0].allowed, causal_mask(2, 4, "top_left"))
    state.causal_alignment = "bottom_right"
    np.testing.assert_array_equal(state.layer.maps[0].allowed, causal_mask(2, 4, "bottom_right"))
    # Padding ticks are on the keys' sequence.
    state.set_padding(3, True)
    assert state.layer.padding_mask.tolist() == [[True, True, True, False]]
    state.kv_tokens = 2  # T_q == T_k: one causal mask, no alignment to choose
    assert state.input_ok and state.layer.causal_alignment is None


def test_the_grids_of_a_batch_in_cross_attention_each_have_their_own_widget(state):
    state.apply_preset("cross_attention")
    state.batch_size = 2
    state.use_w_o = True
    layout = grid_layout(state)
    assert layout[:4] == [["x"], ["x_2"], ["x_kv"], ["x_kv_2"]]
    assert ["w_o"] in layout and sum(map(len, layout)) == len(state.active_fields())


@pytest.mark.parametrize("mode", ["output_projection_transposed", "batch_items_mixed", "rows_and_columns_swapped"])
def test_each_new_mode_has_a_preset_that_breaks_exactly_its_checks(state, mode):
    state.failure_mode = mode
    assert layer_exposure(state.layer) is not None  # the default input cannot show it
    state.apply_preset(EXPOSING_PRESETS[mode], failure_mode=mode)
    assert layer_exposure(state.layer) is None
    assert set(state.layer.failed_checks) == set(FAILURE_MODES[mode].breaks)


def test_output_projection_transposed_keeps_ys_shape_and_names_the_first_incorrect_object(learner_page):
    state = learner_page.state
    state.apply_preset("output_projection", failure_mode="output_projection_transposed")
    assert state.layer.y.shape == (1, 3, 2)
    shown = readouts_html(state.result, True, state.layer)
    assert "First incorrect object: <b>the output Y = H W_O</b> (step 8" in shown
    assert shown.count("<li class='check-") == len(CHECK_NAMES)
    assert "Y = H W_O (3 × 2): T×d_model" in shapes_html(state.result, state.layer)


def test_the_mixed_batch_is_one_flattened_map_whose_rows_can_be_chosen(learner_page):
    state = learner_page.state
    state.apply_preset("batch_padded", failure_mode="batch_items_mixed")
    assert state.layer.flattened and state.result.T == 6 and state.shown_rows() == 6
    state.set_row(5)
    assert state.row == 5 and state.row_error == ""
    weights = learner_page.matrices.weights
    assert len(weights.source.data["row"]) == 36
    assert weights.boundaries.data["x0"] == [3.0, 0.0]
    assert not any(m.visible for m in learner_page.matrices.item_weights)
    state.failure_mode = "correct"
    assert state.row == 3  # back to one item's three rows
    assert [m.visible for m in learner_page.matrices.item_weights] == [True, True, False]


def test_a_batchs_small_multiples_share_one_score_colour_scale(learner_page):
    state = learner_page.state
    state.apply_preset("batch_padded")
    first, second = learner_page.matrices.item_scores[:2]
    assert (first.mapper.low, first.mapper.high) == (second.mapper.low, second.mapper.high)
    assert not first.color_bar.visible and second.color_bar.visible


def test_both_alignments_masks_show_only_when_they_differ(learner_page):
    state = learner_page.state
    masks = learner_page.matrices.masks
    assert not any(m.visible for m in masks.values())
    state.apply_preset("cross_attention")
    assert all(m.visible for m in masks.values())
    assert masks["top_left"].figure.title.text.endswith("(chosen)")
    assert masks["top_left"].source.data["hatch"] != masks["bottom_right"].source.data["hatch"]
    state.causal = False
    assert not any(m.visible for m in masks.values())


def test_every_intermediate_shape_is_written_in_b_t_and_the_widths(state):
    state.apply_preset("batch_padded")
    state.use_w_o = True
    shapes = {name: (symbols, sizes) for name, symbols, sizes in shape_list(state.layer)}
    assert shapes["X"] == ("B×T×d_model", (2, 3, 2))
    assert shapes["S"] == ("B×T×T", (2, 3, 3))
    assert shapes["H = A V"] == ("B×T×d_v", (2, 3, 2))
    assert shapes["Y = H W_O"] == ("B×T×d_model", (2, 3, 2))
    state.apply_preset("cross_attention")
    shapes = {name: (symbols, sizes) for name, symbols, sizes in shape_list(state.layer)}
    assert shapes["S"] == ("B×T_q×T_k", (1, 2, 4)) and shapes["X_kv"] == ("B×T_k×d_model", (1, 4, 2))


def test_save_run_saves_the_layer_and_takes_an_ablation_argument(state):
    state.apply_preset("output_projection")
    state.prediction = "Y moves with W_O"
    record = state.save_run(ablation=None)
    assert record is not None and state.last_saved is record
    state.apply_preset("reset")
    assert state.open_record(record)
    assert state.input_mode == "matrices" and state.tokens == 3 and state.use_w_o == (state.layer.w_o is not None)


def test_an_ablations_run_says_which_ablation_in_the_message_and_its_tick(state):
    # The ablation panel's save is said under Save run too: it must not read as Save run's.
    state.apply_preset("output_projection")
    state.prediction = "W_V moves the output"
    message = state.save_ablation(ablate(state.layer, "W_V", "scale", factor=2.0))
    (record,) = state.saved
    assert message == state.save_message == f"Saved run #1, the ablation W_V: scaled by 2 ({record.id})."
    assert tick_label(1, record) == "Run 1: Correct, causal · W_V: scaled by 2 · 3 tokens"
    assert state.save_run() is not None  # the plain run: a run of its own
    assert state.save_message == f"Saved run #2 ({state.saved[1].id})."
    assert "scaled" not in tick_label(2, state.saved[1])
    assert (change_text("zero"), change_text("edit"), change_text("scale", 0.5)) == (
        "set to zero", "an edited copy", "scaled by 0.5")


def test_the_ablation_panels_answer_goes_once_save_run_says_something_else(learner_page):
    page, state = learner_page, learner_page.state
    page.make_below_maps()  # as once the page has loaded; matrix mode then makes the panel
    state.apply_preset("output_projection")
    state.prediction = "W_V moves the output"
    panel = page.ablation_panel
    panel.save_button.clicks += 1
    assert panel.save_message.startswith("Saved run #1, the ablation W_V: scaled by 2 (")
    assert panel.save_message == state.save_message
    panel.save_button.clicks += 1
    assert panel.save_message.startswith("Already saved as #1: ")
    state.save_run()
    assert state.save_message.startswith("Saved run #2 (") and panel.save_message == ""
    state.prediction = ""  # the page refuses the panel's save: said under its button, in red
    panel.save_button.clicks += 1
    assert '<div class="status error" role="status">Not saved: write your prediction first' in \
        str(panel.save_status.object)


def test_the_layer_presets_set_every_input_they_depend_on(state):
    for name in ("output_projection", "batch_padded", "cross_attention"):
        state.apply_preset(name)
        first = state.layer
        state.apply_preset("reset")
        state.batch_size, state.cross_attention, state.kv_tokens = 3, True, 7
        state.apply_preset(name)
        assert state.input_ok and PRESETS[name]["label"]
        np.testing.assert_array_equal(state.layer.x, first.x)
        assert (state.layer.B, state.layer.T_k, state.layer.cross) == (first.B, first.T_k, first.cross)


def test_matrix_modes_controls_are_made_the_first_time_the_page_is_in_matrix_mode(learner_page):
    """The default page (vector mode) carries none of the layer's controls (their memory:
    bench/page_memory.py); the first switch makes them in their places, and they stay, hidden,
    after a switch back."""
    page, i = learner_page, learner_page.inputs
    assert i.layer_controls is None and page.item is None
    assert [b.name for b in i.presets] == [b.name for b in i._preset_row] and i.presets[-1].name == "Reset"
    page.state.input_mode = "matrices"
    assert [w.name for w in i._sizes] == ["Head width d_k", "Value width d_v", "Model width d_model"]
    layout = i.__panel__().objects
    assert layout.index(i.layer_controls) == layout.index(i._sizes) + 1
    assert [b.name for b in i._preset_row] == [b.name for b in i.presets]
    assert len(i.presets) == 9 and i.presets[-1].name == "Reset"
    assert i.toggles.objects[-2:] == [i.causal_alignment, i.alignment_note]
    assert page._row_controls.objects[0] is page.item
    page.state.input_mode = "vectors"
    assert not i.d_model.visible and not i.layer_controls.visible and len(i.presets) == 9


def test_the_embeds_checks_in_brief_are_numbered_by_the_same_audit_steps_as_the_full_page(state):
    """The newcomer compared the two at a batch of three, Batch items mixed: the full page said
    Step 6 and Step 9 for exact zeros and independence, the embed's list counted them 7 and 8
    (two checks share step 5, and the n/a ones were folded into one line numbered 9)."""
    import re

    from app.learner.checks import checks_html, invariants_html

    state.apply_preset("batch_padded")
    state.failure_mode = "batch_items_mixed"
    page = str(checks_html(state.layer))
    brief = str(invariants_html(state.result, state.input_ok, state.layer))
    full_steps = dict(re.findall(r"data-check='(\w+)' data-step='(\d)'", page))
    brief_steps = dict(re.findall(r"data-check='(\w+)' data-step='(\d)'", brief))
    assert brief_steps and all(full_steps[name] == step for name, step in brief_steps.items())
    # Each check that applies by its step; those that do not on one line, by theirs ("7, 8.").
    expected = list(brief_steps.values())
    idle = [step for name, step in full_steps.items() if name not in brief_steps]
    if idle:
        expected.append(", ".join(idle))
    assert re.findall(r"<span class='step'>([\d, ]+)\.</span>", brief) == expected
    assert "FAIL" in brief and "5" in expected and expected.count("5") == 2
