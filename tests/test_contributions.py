"""The contributions view without a browser: its table and chart sources over a LearnerState.

Numbers are Self-attention, "A worked row" (row 2: weights 0.269, 0.731, 0; values 10, 20, 100 →
contributions 2.69, 14.62 (a bar says 14.6), 0; output 17.31) and Self-Attention in Matrix Form,
"Extend the Four-Token Trace" (row 4).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from store_helpers import sqlite_store

from app.learner.checks import readouts_html
from app.learner.contributions import (
    LABEL_CHAR_PX,
    LEGEND_PX,
    PLOT_PX,
    ContributionsView,
    bar_label,
    bar_range,
    contributions_html,
    readable_labels,
)
from app.learner.page import LearnerPage
from app.learner.state import LearnerState
from attention_core import scaled_dot_product_attention

X = np.array([[1, 0], [0, 1], [1, 1], [-1, 1]], dtype=float)
W_V = np.array([[1, 1], [1, -1]], dtype=float)


@pytest.fixture
def state(tmp_path) -> LearnerState:
    return LearnerState(store=sqlite_store(tmp_path / "runs"))


def cells(html_text: str, row_header: str) -> list[str]:
    """The <td> texts of the table row whose header is ``row_header``."""
    match = re.search(rf"<th scope='row'>{re.escape(row_header)}</th>(.*?)</tr>", html_text)
    assert match, f"no row {row_header!r}"
    return re.findall(r"<td>(.*?)</td>", match.group(1))


def test_worked_row_shows_score_weight_value_and_contribution_per_source(state):
    state.apply_preset("worked_row")
    view = ContributionsView(state=state)
    assert state.row == 2
    text = view.text.object
    assert "Contributions to row 2" in text
    assert cells(text, "key 1") == ["1.000", "0.269", "10.000", "2.689"]
    assert cells(text, "key 2") == ["2.000", "0.731", "20.000", "14.621"]
    assert cells(text, "key 3") == ["9.000 masked (−∞ before softmax)", "0", "100.000", "0"]
    assert "data-testid='contributions-output'>17.311<" in text
    # The lesson in this row's words: key 3 has the largest score but no weight.
    assert re.search(r"Largest score: <b>key 3</b> \(masked.*largest weight: <b>key 2</b>.*"
                     r"largest contribution \(size\): <b>key 2</b>", text)
    # The charts' sources hold the core's numbers, unrounded.
    data, parts = view.source.data, view.component_source.data
    r = state.result
    assert data["score"] == r.scores[1].tolist()
    assert data["weight"] == r.weights[1].tolist()
    assert data["score_label"] == ["1", "2", "masked"]
    assert data["weight_label"] == ["0.27", "0.73", "0"]
    assert parts["value"] == [10.0, 20.0, 100.0]
    assert parts["contribution"] == r.contributions[1].tolist()
    assert parts["contribution_label"] == ["2.69", "14.6", "0"]
    assert view.value_pane.visible
    assert not any(legend.visible for legend in view.legends)  # scalar values: one colour
    assert view.contribution_figure.title.text == "Contribution A_2j · v_j"


def test_the_view_follows_the_row_and_the_inputs(state):
    state.apply_preset("worked_row")
    view = ContributionsView(state=state)
    state.row = 3
    assert "Contributions to row 3" in view.text.object
    assert view.source.data["weight"] == state.result.weights[2].tolist()
    assert view.score_figure.title.text == "Score S_3j"
    state.set_token_text("values", 0, "-40")
    assert view.component_source.data["value"][0] == -40.0
    assert view.component_source.data["contribution_baseline"][0] == "top"  # label under the bar
    state.tokens = 2  # the row follows the token count
    assert state.row == 2 and len(view.source.data["x"]) == 2
    assert view.x_range.end == 2.5 and view.ticker.ticks == [1, 2]


def test_without_values_it_says_contributions_need_values(state):
    state.apply_preset("worked_row")
    state.use_values = False
    view = ContributionsView(state=state)
    text = view.text.object
    assert "data-testid='contributions-need-values'" in text
    assert "Use values (adds output and contributions)" in text
    assert cells(text, "key 2") == ["2.000", "0.731"]  # scores and weights still shown
    assert view.component_source.data["x"] == []
    assert not view.value_pane.visible


def test_keys_mixed_instead_of_values_says_what_was_mixed(state):
    state.apply_preset("keys_as_values")
    view = ContributionsView(state=state)
    text = view.text.object
    assert "data-testid='contributions-mixed-keys'" in text
    assert "key k<sub>j</sub> (mixed instead of the value)" in text
    r = state.result
    assert cells(text, "key 2")[2] == "2.000"  # the key, not the value 20
    assert view.component_source.data["value"] == r.keys.tolist()
    assert view.component_source.data["contribution"] == r.contributions[1].tolist()
    assert view.value_figure.title.text.startswith("Key k_j")


def test_mask_after_softmax_names_the_zeroed_weight(state):
    state.apply_preset("worked_row", failure_mode="mask_after_softmax")
    view = ContributionsView(state=state)
    text = view.text.object
    assert cells(text, "key 3")[:2] == ["9.000", "0 zeroed after softmax"]
    assert "its weight zeroed after softmax" in text
    assert view.source.data["weight_label"][2] == "0 zeroed"


def test_vector_values_four_token_trace_row_4(state):
    # The four-token trace: Q = K = X, V = X W_V; row 4's output h_4 ≈ [0.592, -1.279].
    state.tokens = 4
    state.result = scaled_dot_product_attention(X, X, X @ W_V)
    state.row = 4
    view = ContributionsView(state=state)
    text = view.text.object
    assert "Contributions to row 4" in text
    assert cells(text, "key 4") == ["1.414", "0.539", "[0, −2.000]", "[0, −1.078]"]
    assert "data-testid='contributions-output'>[0.592, −1.279]<" in text
    parts = view.component_source.data
    assert parts["component"] == ["1", "2"] * 4
    assert parts["contribution"] == state.result.contributions[3].reshape(-1).tolist()
    assert len(set(parts["contribution_color"])) == 2
    assert all(legend.visible for legend in view.legends)
    assert view.value_figure.title.text == "Value v_j by component"
    # A source's components sit side by side around it, within its slot.
    assert parts["x"][0] < 1 < parts["x"][1] < 1.4


def test_four_components_at_eight_tokens_are_not_labelled_but_are_in_the_table(state):
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(8, 4)) for _ in range(3))
    state.tokens = 8
    state.result = scaled_dot_product_attention(q, k, v)
    state.row = 8
    view = ContributionsView(state=state)
    parts = view.component_source.data
    assert len(parts["x"]) == 32 and set(parts["contribution_label"]) == {""}
    assert len(set(parts["contribution_color"])) == 4
    assert cells(view.text.object, "key 8")[3].count(",") == 3


def test_naive_softmax_overflow_shows_undefined_not_nan(state):
    state.apply_preset("large_scores", failure_mode="naive_softmax")
    state.use_values = True
    view = ContributionsView(state=state)
    assert "undefined" in view.text.object and "nan" not in view.text.object.lower()
    assert not any(np.isnan(view.component_source.data["contribution"]))


def test_bar_label():
    assert [bar_label(x) for x in (14.621, 0.2689, 100.0, 0.0, 1e-5, np.nan)] == [
        "14.6", "0.27", "100", "0", "1e−05", "undefined"]  # as a narrow heat-map cell


def test_readouts_no_longer_hide_a_contributions_table(state):
    state.apply_preset("worked_row")
    assert "Contributions weight × value" not in readouts_html(state.result, True)


def test_the_page_mounts_the_view_after_the_row_steps(tmp_path):
    page = LearnerPage(store=sqlite_store(tmp_path / "runs"))
    objects = list(page.main.objects)  # Panel lays a Viewer out as what its __panel__ returns
    assert objects.index(page.contributions.__panel__()) == objects.index(page.steps.pane) + 1
    assert contributions_html(None, 1).startswith("<h3>Contributions</h3>")


def test_bar_range_is_bokehs_data_range_of_bars_from_zero_and_set_without_values():
    # DataRange1d(range_padding=0.4) over bars 0..100 on the page: -20 to 120.
    assert bar_range([100.0, 20.0]) == (-20.0, 120.0)
    assert bar_range([-5.0, float("nan")]) == (-6.0, 1.0)
    assert bar_range([]) == (-1.0, 1.0) and bar_range([0.0, 0.0]) == (-1.0, 1.0)


def test_small_bars_side_by_side_keep_one_label_and_the_table_keeps_every_number(state):
    # The four-token trace's row 4: key 1 contributes [0.065, 0.065], two short bars side by side
    # whose labels "0.06" overlapped; the larger bars' labels all stay.
    state.apply_preset("four_token_trace")
    view = ContributionsView(state=state)
    parts = view.component_source.data
    assert parts["contribution_label"] == ["0.06", "", "0.27", "−0.27", "0.26", "0", "0", "−1.08"]
    assert parts["value_label"] == ["1", "1", "1", "−1", "2", "0", "0", "−2"]
    assert cells(view.text.object, "key 1")[3] == "[0.065, 0.065]"


def test_no_two_kept_labels_overlap_and_none_covers_another_bar():
    rng = np.random.default_rng(3)
    for T, d in ((3, 4), (4, 2), (8, 1), (6, 2)):
        width = 0.6 / d
        xs = [j + 1 - 0.3 + width * (c + 0.5) for j in range(T) for c in range(d)]
        tops = (rng.normal(size=T * d) * rng.choice([0.01, 1, 100], size=T * d)).tolist()
        labels = [bar_label(t) for t in tops]
        y_range = bar_range(tops)
        kept = readable_labels(xs, [width] * len(xs), tops, labels, y_range, T, legend=d > 1)
        x_px = (PLOT_PX[0] - (LEGEND_PX if d > 1 else 0)) / T
        y_px = PLOT_PX[1] / (y_range[1] - y_range[0])
        boxes = []
        for x, t, text in zip(xs, tops, kept, strict=True):
            if text:
                end = y_px * t + (3 if t >= 0 else -3)
                boxes.append((x_px * x - len(text) * LABEL_CHAR_PX / 2, x_px * x + len(text) * LABEL_CHAR_PX / 2,
                              end if t >= 0 else end - 12, end + 12 if t >= 0 else end))
        for n, a in enumerate(boxes):
            for b in boxes[n + 1:]:
                assert not (a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]), (T, d, a, b)
        # The tallest bar always keeps its label.
        tallest = int(np.argmax(np.abs(tops)))
        assert kept[tallest] == labels[tallest]
