"""Heat maps saved as PNG and the comparison of two runs of different sizes, without a browser.

The PNG itself is drawn by BokehJS in the browser (tests/test_views_browser.py); here: each
heat map has a named save button wired to its figure's SaveTool, and the file name says what
the map shows.
"""

from __future__ import annotations

import re

import numpy as np
from store_helpers import sqlite_store

from app.instructor.state import InstructorState
from app.instructor.table import RunsTableView, open_link, runs_frame
from app.learner.matrices import png_name
from app.shared.compare import ComparisonView, size_difference
from app.shared.heatmap import HeatMap, file_name
from attention_core import scaled_dot_product_attention
from attention_core.projection import self_attention
from attention_core.records import ExperimentRecord

X = [[1, 0], [0, 1], [1, 1], [-1, 1]]
I2 = [[1, 0], [0, 1]]
W_V = [[1, 1], [1, -1]]


def record(result, label: str) -> ExperimentRecord:
    return ExperimentRecord.from_result(result, label=label, prediction="p")


def test_file_name_keeps_letters_digits_and_single_hyphens():
    assert file_name("weights", "mask_after_softmax", "causal", "T3", None, "") == \
        "weights-mask-after-softmax-causal-T3"
    assert file_name("Weights of run A", "x/../y", "T 3") == "Weights-of-run-A-x-y-T-3"


def test_each_learner_heat_map_has_a_named_save_button_and_a_file_name_saying_what_it_shows(learner_page):
    s = learner_page.state
    maps = learner_page.matrices
    assert maps.scores.save_tool.filename == "scores-correct-causal-T3-dk1"
    assert maps.weights.save_tool.filename == "weights-correct-causal-T3-dk1"
    s.apply_preset("worked_row", failure_mode="mask_after_softmax")
    assert maps.weights.save_tool.filename == "weights-mask-after-softmax-causal-T3-dk1"
    s.causal = False
    s.set_padding(0, True)
    s.tokens = 4
    assert maps.scores.save_tool.filename == "scores-mask-after-softmax-bidirectional-T4-dk1-padded"
    for heat_map, title in ((maps.scores, "Scores"), (maps.weights, "Weights")):
        assert heat_map.save_button.label == f"Save {title} as PNG"
        assert heat_map.model.children[:2] == [heat_map.figure, heat_map.save_button]


def test_the_save_button_runs_the_figures_own_save_tool():
    heat_map = HeatMap("Weights", "w")
    (link,) = heat_map.save_button.js_event_callbacks["button_click"]
    assert link.args == {"tool": heat_map.save_tool}
    assert 'doit("save")' in link.code
    assert heat_map.save_tool in heat_map.figure.tools and heat_map.figure.toolbar_location is None
    heat_map.visible = False
    assert not heat_map.model.visible  # the Bokeh layout the browser draws


def test_png_name_of_a_vector_run():
    r = scaled_dot_product_attention(np.eye(4), np.eye(4), failure_mode="no_scaling")
    assert png_name("weights", r) == "weights-no-scaling-causal-T4-dk4"


def test_comparison_of_runs_with_different_token_counts_shows_each_run_and_says_why_no_difference():
    a = record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9]), "three")
    b = record(scaled_dot_product_attention([1, 1, 1, 1], [1, 2, 9, 0], failure_mode="mask_after_softmax"),
               "four")
    view = ComparisonView()
    view.show([a, b])
    assert not view.difference.visible and not view.difference.model.visible
    summary = view.summary.object
    assert "run A has 3 tokens and run B 4" in summary and "3×3 (3 tokens) and 4×4 (4 tokens)" in summary
    assert "different token counts" in summary
    # Each run's own numbers are still shown, the shorter run's missing row said in words.
    assert len(view.first.source.data["value"]) == 9 and len(view.second.source.data["value"]) == 16
    rows = re.findall(r"<tr><th scope='row'>(.*?)</tr>", summary)
    assert len(rows) == 2 and rows[0].count("<td>") == rows[1].count("<td>") == 2 + 2 + 4
    assert "<td>no row</td>" in rows[0] and "no row" not in rows[1]
    assert view.first.save_tool.filename == f"weights-run-A-correct-causal-T3-dk1-{a.id}"
    assert view.second.save_tool.filename == f"weights-run-B-mask-after-softmax-causal-T4-dk1-{b.id}"
    # The same pair in the same size again: the difference map comes back.
    view.show([a, a])
    assert view.difference.visible and view.difference.model.visible
    assert "comparison-sizes" not in view.summary.object
    assert view.difference.save_tool.filename.startswith("weights-A-minus-B-correct-vs-correct-T3-dk1-")


def test_comparison_of_runs_with_different_head_widths_says_why_no_difference():
    rng = np.random.default_rng(1)
    q2, k2 = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    a = record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9]), "scalar")
    b = record(scaled_dot_product_attention(q2, k2, rng.normal(size=(3, 3))), "vectors")
    assert "d_k = 1, run B's d_k = 2" in size_difference(a, b)
    view = ComparisonView()
    view.show([a, b])
    assert not view.difference.visible
    assert "different head widths" in view.summary.object
    shown = np.array(view.second.source.data["value"], dtype=float).reshape(3, 3)
    allowed = np.array(b.results["mask"], dtype=bool)
    np.testing.assert_allclose(shown[allowed], np.array(b.results["weights"], dtype=float)[allowed])


def test_comparison_of_two_matrix_mode_runs_diffs_them():
    good = self_attention(X, I2, I2, W_V)
    broken = self_attention(X, I2, I2, W_V, failure_mode="no_scaling")
    a, b = record(good, "four-token trace"), record(broken, "four-token trace unscaled")
    view = ComparisonView()
    view.show([a, b])
    assert view.difference.visible
    diff = np.array(view.difference.source.data["value"], dtype=float).reshape(4, 4)
    np.testing.assert_allclose(diff, good.weights - broken.weights, atol=1e-12)
    assert "<td>4 tokens</td><td>2</td>" in view.summary.object  # the size and d_k of each run


def test_every_instructor_row_links_to_the_learner_page_opening_that_run(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    plain = record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9]), "")
    hostile = record(scaled_dot_product_attention([1, 1], [1, 2]), '<b>"x"</b> & y')
    for r in (plain, hostile):
        store.save(r)
    state = InstructorState(store=store)
    frame = runs_frame(state.page_runs, state)
    links = dict(zip(frame["id"], frame["open"], strict=True))
    assert links[plain.id] == (
        f'<a href="./?run={plain.id}" target="_blank" rel="noopener" '
        f'aria-label="Open run {plain.id} in the workbench">Open run</a>')
    assert "<b>" not in links[hostile.id]
    assert "aria-label=\"Open run " + hostile.id + " “&lt;b&gt;&#34;x&#34;&lt;/b&gt; &amp; y” in" in links[hostile.id]
    view = RunsTableView(state=state)
    assert view.table.formatters["open"] == {"type": "html"} and "open" not in view.table.hidden_columns


def test_the_open_link_url_encodes_the_id():
    class Run:
        id, label = "a b/?&c", None

    assert 'href="./?run=a%20b%2F%3F%26c"' in open_link(Run())
