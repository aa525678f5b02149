"""Issue 24's pictures, without a browser: the heat maps' kinds of cell (causal-masked,
padding-masked, leaked) and their hover, the cells' printed numbers, the lost-mass bars of
"Mask after softmax", the no-scaling pair from the core, and the banner's exposure note.
"""

from __future__ import annotations

import re
from html import unescape

import numpy as np
import pytest
from bokeh.document import Document

from app.learner.checks import readouts_html, row_sum_html
from app.learner.matrices import LEAKED_FUTURE, LEAKED_ITEM
from app.shared.heatmap import MASKED_COLOR, HeatMap, cell_text
from app.shared.numbers import format_number
from attention_core import scaled_dot_product_attention


@pytest.fixture
def state(learner_page):
    return learner_page.state


def cells(data: dict, key: str) -> dict[tuple[int, int], str]:
    return {(int(r), int(c)): v for r, c, v in zip(data["row"], data["column"], data[key], strict=True)}


def test_no_mask_marks_the_future_cells_as_leaked_and_their_hover_says_the_mask_was_not_applied(learner_page, state):
    state.failure_mode = "no_mask"
    assert state.causal  # the box stays ticked: the mode forgets the mask
    for view in (learner_page.matrices.weights, learner_page.matrices.scores):
        kinds, hover = cells(view.source.data, "kind"), cells(view.source.data, "state")
        future = {(1, 2), (1, 3), (2, 3)}
        assert {k for k, v in kinds.items() if v == "leaked"} == future
        assert all(kinds[k] == "visible" for k in kinds if k not in future)
        assert all(hover[k] == f"leaked: {LEAKED_FUTURE}" for k in future)
        assert "the mask was not applied" in LEAKED_FUTURE and "visible" not in {hover[k] for k in future}
    weights = learner_page.matrices.weights.source.data
    assert cells(weights, "hatch")[(1, 2)] == " "  # coloured by its weight, not hatched
    assert not np.isnan(cells(weights, "value")[(1, 2)])
    legend = learner_page.matrices.legend
    assert legend.visible and "data-kind='leaked'" in legend.object and "data-kind='causal'" not in legend.object
    assert "leaked" in learner_page.matrices.weights.table.text  # the screen reader's table says it too


def test_causal_and_padding_masked_cells_are_kinds_apart_with_their_own_hover_and_legend(learner_page, state):
    state.set_padding(0, True)  # key 1 is padding
    view = learner_page.matrices.weights
    kinds, hover = cells(view.source.data, "kind"), cells(view.source.data, "state")
    assert [kinds[(r, 1)] for r in (1, 2, 3)] == ["padding"] * 3
    assert kinds[(2, 3)] == kinds[(1, 2)] == "causal" and kinds[(3, 2)] == "visible"
    assert hover[(2, 3)] == "masked" and hover[(2, 1)] == "masked (padding key)"
    assert cells(learner_page.matrices.scores.source.data, "kind")[(3, 1)] == "padding"
    legend = learner_page.matrices.legend.object
    assert "data-kind='causal'" in legend and "data-kind='padding'" in legend and "leaked" not in legend
    # Two hatch patterns, one per kind of masked cell.
    patterns = {r.view.filter.group: r.glyph.hatch_pattern for r in view.figure.renderers
                if getattr(r.glyph, "hatch_pattern", None) not in (None, "")}
    assert patterns["causal"] != patterns["padding"]


def test_a_mixed_batch_marks_the_other_items_cells_as_leaked(learner_page, state):
    state.apply_preset("batch_padded", failure_mode="batch_items_mixed")
    data = learner_page.matrices.weights.source.data
    kinds, hover = cells(data, "kind"), cells(data, "state")
    assert len(kinds) == 36
    across = [(4, c) for c in (1, 2, 3)]  # item 2's first token reads item 1's tokens
    assert [kinds[k] for k in across] == ["leaked"] * 3
    assert all(hover[k] == f"leaked: {LEAKED_ITEM}" for k in across)
    assert kinds[(1, 2)] == "causal"  # within item 1, the future is still masked


def test_mask_after_softmax_zeroes_without_calling_it_leaked(learner_page, state):
    state.failure_mode = "mask_after_softmax"
    kinds = cells(learner_page.matrices.weights.source.data, "kind")
    assert kinds[(1, 2)] == "causal" and "leaked" not in kinds.values()
    assert "zeroed after softmax" in learner_page.matrices.legend.object


@pytest.mark.parametrize(("x", "text"), [
    (0.004, "0.004"), (0.00125, "0.001"), (0.0003, "0.0003"), (-0.004, "−0.004"), (-0.0003, "−3e−04"),
    (0.00003, "3e−05"), (0.27, "0.27"), (0.0, "0"),
])
def test_a_narrow_cell_prints_fixed_decimals_where_they_fit(x, text):
    assert cell_text(x, "narrow") == text and len(text) <= 6


def test_eight_tokens_d_k_4_cells_print_fixed_decimals_and_masked_labels_sit_on_a_patch(learner_page, state):
    state.tokens, state.d_k = 8, 4
    state.set_token_text("queries", 7, "1.5", 0)  # row 8: weights of 0.001 to 0.005 beside its largest
    for view in (learner_page.matrices.weights, learner_page.matrices.scores):
        data = view.source.data
        assert len(data["row"]) == 64 and all(len(t) <= 6 for t in data["text"])
        small = [(v, t) for v, t in zip(data["value"], data["text"], strict=True)
                 if np.isfinite(v) and 1e-4 <= abs(v) < 0.01]
        assert all("e" not in t for v, t in small if v > 0), small
        if view is learner_page.matrices.weights:
            assert len(small) >= 3
        masked = [n for n, k in enumerate(data["kind"]) if k in ("causal", "padding")]
        assert masked and all(data["text_color"][n] == "masked" for n in masked)
        patch = [t for t in view._texts if t.background_fill_color == MASKED_COLOR]
        assert len(patch) == 1  # the masked cells' text glyph: its own plain background
    weights = learner_page.matrices.weights.source.data
    r = state.result
    n = next(n for n in range(64) if 0 < r.weights.flat[n] < 0.01)
    assert weights["weight_text"][n] == format_number(r.weights.flat[n])  # the hover keeps its digits


def readout_sums(html_text: str) -> list[str]:
    rows = re.findall(r"<tr><th scope='row'>\d+</th><td>(.*?)</td>", html_text)
    return [unescape(re.sub(r" \(no visible key.*", "", row)) for row in rows]


def test_the_lost_mass_bars_show_the_row_sums_the_readouts_print(learner_page, state):
    assert learner_page.matrices.lost_mass is None  # made only once its mode shows
    state.failure_mode = "mask_after_softmax"
    r = state.result
    bars = learner_page.matrices.lost_mass
    assert bars.visible and learner_page.matrices.pictures.visible
    kept = [unescape(k) for k in re.findall(r"<b class='kept'>(.*?)</b>", bars.object)]
    lost = [unescape(k) for k in re.findall(r"<b class='lost'>(.*?)</b>", bars.object)]
    assert kept == [row_sum_html(x) for x in r.row_sums] == readout_sums(str(readouts_html(r, True)))
    assert lost == [format_number(1 - x) for x in r.row_sums]
    widths = [float(w) for w in re.findall(r"width: ([\d.]+)%; background: #2c4f8a", bars.object)]
    assert widths == pytest.approx([100 * x for x in r.row_sums], abs=0.01)
    assert any("not 1" in k for k in kept)
    made = bars
    state.failure_mode = "correct"
    assert not learner_page.matrices.pictures.visible
    state.failure_mode = "mask_after_softmax"
    assert learner_page.matrices.lost_mass is made  # updated, not made again


def test_no_scaling_shows_the_chosen_row_with_and_without_the_division_from_the_core(learner_page, state):
    state.failure_mode = "no_scaling"  # d_k = 1: one distribution, so no picture (the banner says why)
    assert learner_page.matrices.scaling is None and not learner_page.matrices.pictures.visible
    state.apply_preset("wide_head", failure_mode="no_scaling")
    state.row = 2
    r = state.result
    pair = learner_page.matrices.scaling
    correct = scaled_dot_product_attention(r.queries, r.keys, r.values, causal=r.causal,
                                           padding_mask=r.key_is_real, failure_mode="correct")
    scaled, unscaled = (s.data["weight"] for s in pair.sources)
    assert scaled == correct.weights[1].tolist() and unscaled == r.weights[1].tolist()
    assert max(unscaled) > max(scaled)  # sharper
    assert [f.title.text for f in pair.figures] == ["Row 2 with ÷√d_k", "Row 2 without"]
    assert pair.figures[0].y_range is pair.figures[1].y_range
    figures = list(pair.figures)
    state.row = 3
    assert pair.figures == figures and pair.figures[0].title.text == "Row 3 with ÷√d_k"
    assert pair.sources[1].data["weight"] == state.result.weights[2].tolist()
    assert format_number(correct.weights[2][0]) in pair.text.object  # the numbers, as text
    state.failure_mode = "correct"
    assert not pair.layout.visible


def test_a_mode_this_input_cannot_show_says_so_over_the_maps_with_its_preset(learner_page, state):
    banner = learner_page.banner
    state.failure_mode = "no_scaling"  # scalar tokens: d_k = 1
    assert banner.exposure_note.visible and "d_k = 1" in banner.exposure_note.object
    assert banner.expose.visible and banner.expose.label == "Load a preset that shows it: Wide head, d_k = 4"
    assert "exposure-note" not in str(learner_page.inputs._layout)  # not in the sidebar any more
    banner.expose.clicks += 1
    assert state.failure_mode == "no_scaling" and state.d_k == 4 and not banner.exposure_note.visible
    state.apply_preset("reset")
    state.set_tokens(1)
    state.failure_mode = "mask_after_softmax"  # one token: nothing to mask
    assert banner.exposure_note.visible and banner.expose.label.endswith("Reset (the starting input)")
    banner.expose.clicks += 1
    assert state.tokens == 3 and state.failure_mode == "mask_after_softmax" and state.result.failed_checks


def _causal_map(size: int, T: int, label_masked: bool = True) -> HeatMap:
    heatmap = HeatMap("Scores", "fit", kind="scores", size=size, label_masked=label_masked)
    values = np.round(np.random.default_rng(0).normal(size=(T, T)), 3)
    masked = np.triu(np.ones((T, T), bool), 1)
    values[masked] = -np.inf
    heatmap.update(values, masked, masked_label="masked")
    return heatmap


@pytest.mark.parametrize("size", [150, 160])  # a batch's small multiples; the embed's maps
def test_in_a_small_map_no_label_or_masked_patch_crosses_its_cells_border(size):
    heatmap = _causal_map(size, 8, label_masked=False)
    # The figure's frame is what BokehJS leaves of its height: 75 px at 150, 85 at 160.
    row_height = (size - 75) / 8
    font = float(heatmap._texts[0].text_font_size.removesuffix("px"))
    data = heatmap.source.data
    masked = [n for n, c in enumerate(data["text_color"]) if c == "masked"]
    # A masked label would need a line and its patch (1 px each side), a pixel clear of the border.
    assert font * 1.2 + 2 > row_height - 1
    assert masked and all(data["label"][n] == "" for n in masked)
    assert all(data["text"][n].startswith("−∞") for n in masked)  # still in the table and hover
    assert heatmap.table.text.count("masked") >= len(masked)
    cell_width = (size + 100 - 110) / 8
    for text, label in zip(data["text"], data["label"], strict=True):
        assert label in ("", text)
        if label:  # drawn: a glyph-high line no wider than its cell (at least 0.55 em a character)
            assert font <= row_height and 0.55 * font * len(label.replace(".", "")) <= cell_width, label


def _small_batch_map(colour_bar: bool) -> HeatMap:
    """A batch item's 8×8 scores map (150 px high) of −1, 0 and 1, causal, as at 640 px or 1280 px."""
    heatmap = HeatMap("Scores, item 1", "fit", kind="scores", size=150, label_masked=False)
    heatmap.color_bar.visible = colour_bar
    values = np.zeros((8, 8))
    values[0, 0] = values[2, 0] = values[2, 2] = values[3, 3] = 1.0
    values[3, 0] = values[3, 2] = -1.0
    masked = np.triu(np.ones((8, 8), bool), 1)
    values[masked] = -np.inf
    heatmap.update(values, masked, value_range=(-1.0, 1.0))
    return heatmap


def test_a_small_map_labels_every_number_that_fits_its_cell_negative_ones_too():
    data = _small_batch_map(colour_bar=False).source.data
    shown = [n for n, c in enumerate(data["text_color"]) if c != "masked"]
    # "−1.00" is 21.5 px wide at 7 px in the browser's font, and the cell leaves 21.75 px.
    assert {data["text"][n] for n in shown} == {"−1.00", "0", "1.00"}
    assert [data["label"][n] for n in shown] == [data["text"][n] for n in shown]


def test_a_map_too_narrow_for_some_of_its_numbers_draws_none_of_them():
    heatmap = _small_batch_map(colour_bar=True)  # the last item's map: its colour bar takes 50 px
    data = heatmap.source.data
    assert set(data["label"]) == {""}
    assert "<td>−1.00</td>" in unescape(heatmap.table.text)  # the table still tells every number


def test_the_figure_hides_the_canvas_edge_bokehjs_never_clears():
    heatmap = _small_batch_map(colour_bar=False)
    assert any("clip-path: inset(1px 0 0 1px)" in css for css in heatmap.figure.stylesheets)


def test_a_map_of_usual_size_labels_every_cell_as_before():
    eight = _causal_map(300, 8)  # the main maps at 8 tokens: cells about 28 px high
    assert {t.text_font_size for t in eight._texts} == {"9px"}
    assert eight.source.data["label"] == eight.source.data["text"]
    three = _causal_map(300, 3)
    assert {t.text_font_size for t in three._texts} == {"12px"}
    assert three.source.data["label"] == three.source.data["text"]
    assert "−∞\nmasked" in three.source.data["label"]


def test_a_cross_attention_batchs_small_multiples_draw_no_masked_patch_at_eight_tokens(learner_page, state):
    state.tokens, state.d_k = 8, 4
    state.input_mode = "matrices"
    state.batch_size, state.cross_attention, state.use_w_o = 3, True, True
    layer = state.layer
    assert layer.B == 3 and layer.cross and not layer.flattened
    for heatmap in learner_page.matrices.item_scores + learner_page.matrices.item_weights:
        data = heatmap.source.data
        masked = [n for n, c in enumerate(data["text_color"]) if c == "masked"]
        assert masked and all(data["label"][n] == "" for n in masked)
        assert all(data["text"][n] for n in masked)


def _document_walks(monkeypatch, doc: Document) -> list[int]:
    """Count each time Bokeh walks every model of ``doc`` again (``doc.models.recompute``): in a
    served page, after each change that adds or moves a model, and the whole page's worth each time."""
    walks: list[int] = []
    recompute = doc.models.recompute
    monkeypatch.setattr(doc.models, "recompute", lambda: (walks.append(1), recompute())[1])
    return walks


@pytest.mark.parametrize("tappable", [False, True])
def test_a_maps_first_leaked_cell_adds_its_outline_in_one_change_under_the_cell_text(monkeypatch, tappable):
    heatmap = HeatMap("Weights", "walks", kind="weights", size=300,
                      on_row_tap=(lambda row: None) if tappable else None)
    doc = Document()
    doc.add_root(heatmap.model)
    walks = _document_walks(monkeypatch, doc)
    leaked = np.full((3, 3), "", dtype=object)
    leaked[0, 1] = "the mask was not applied"
    heatmap.update(np.full((3, 3), 1 / 3), np.zeros((3, 3), bool), leaked=leaked)
    # Six walks a mark when it was made with fig.rect and then changed glyph by glyph.
    assert len(walks) == 1
    mark = heatmap._marks["leaked"]
    renderers = heatmap.figure.renderers
    texts = [n for n, r in enumerate(renderers) if r.glyph in heatmap._texts]
    assert mark.document is doc and renderers.index(mark) < min(texts)  # drawn under the numbers
    assert mark.view.filter.group == "leaked" and mark.glyph.line_dash == "dashed"
    assert mark.data_source is heatmap.source and mark.muted_glyph == "auto"
    chosen = mark.glyph if tappable else "auto"  # a tapped row is not drawn as selected
    assert mark.selection_glyph == chosen and mark.nonselection_glyph == chosen


def test_the_first_no_mask_at_a_batch_of_three_walks_the_page_once_per_map_it_marks(learner_page, monkeypatch):
    """The reflow test's third walk: at 8 tokens, d_model = d_k = d_v = 4 and a batch of three, the
    first No mask outlines the leaked cells of six maps. It walked the page's ~800 models 36
    times (2.7 s of one core; 11-19 s on a loaded 2-core machine, while the page kept the
    previous mode's description beside the select's No mask)."""
    doc = Document()
    doc.add_root(learner_page.__panel__().get_root(doc))
    state = learner_page.state
    state.param.update(use_values=True, tokens=8, d_k=4, d_v=4)
    state.param.update(input_mode="matrices", batch_size=3, d_model=4)
    walks = _document_walks(monkeypatch, doc)
    learner_page.inputs.failure_mode.value = "no_mask"
    matrices = learner_page.matrices
    marked = [m for m in (*matrices.item_scores, *matrices.item_weights) if "leaked" in m._marks]
    assert len(marked) == 6 and all("leaked" in m.source.data["kind"] for m in marked)
    assert len(walks) <= len(marked)


def test_an_edit_changes_no_bokeh_markup_which_would_lay_the_whole_page_out_again(learner_page):
    """Bokeh's own Markup widgets (Div, Paragraph, PreText) re-render on any change, and in the
    browser each re-render lays the whole page out again, both maps measured: the maps' screen
    reader tables were Divs, and their new text on each edit was most of the edit's time in
    Chromium (bench/README.md). They are Panel's HTML model, which replaces only its inner HTML."""
    from bokeh.models.widgets import Markup

    doc = Document()
    doc.add_root(learner_page.__panel__().get_root(doc))
    learner_page.make_below_maps()
    state = learner_page.state
    changed: list = []
    doc.on_change(lambda event: changed.append(getattr(event, "model", None)))

    def edit(field: str, text: str) -> None:
        changed.clear()
        state.set_token_text(field, 2, text)
        bokeh_markup = [type(m).__name__ for m in changed
                        if isinstance(m, Markup) and type(m).__module__.startswith("bokeh.")]
        assert changed and bokeh_markup == [], f"{field} {text}: {bokeh_markup}"

    state.apply_preset("worked_row")
    edit("queries", "0.5")
    state.param.update(use_values=True, tokens=8, d_k=4, d_v=4)
    edit("queries", "0.25")
    state.param.update(input_mode="matrices", batch_size=3, d_model=4, use_w_o=True)
    edit("x", "0.75")
