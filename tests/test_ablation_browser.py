"""The projection-ablation panel alone in a real Chromium: a learner scales W_V by 2 and sees
identical weights before and after, a moved output, and the chapter's statement hold (Review,
"What the Projection Ablations Establish").

The panel is served on its own (``pn.serve`` in a thread of this process, on a free loopback
port, stopped after the module) over a stub layer source, so the test needs nothing of the page.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import panel as pn
import param
import pytest
from playwright.sync_api import Page, expect
from workbench_server import blocking_violations, free_port, listening, screenshot, source, type_number, wait_until

from app.learner.ablation import AblationPanel
from attention_core.layer import attention_layer

# Self-Attention in Matrix Form, "Extend the Four-Token Trace", with W_O = I.
X = np.array([[1, 0], [0, 1], [1, 1], [-1, 1]], dtype=float)
W_V = np.array([[1, 1], [1, -1]], dtype=float)


class LayerSource(param.Parameterized):
    layer = param.Parameter(default=None)


@dataclass
class PanelServer:
    url: str
    saved: list  # what the save callback got, across sessions


@pytest.fixture(scope="module")
def server():
    """The panel alone, served at ``url`` until the module's tests end (the name is the one
    conftest's ``watch`` reads)."""
    saved = []

    def app():
        def save(ablation):
            saved.append(ablation)
            return f"Saved the ablation of {ablation.target}."

        layer = attention_layer(X, np.eye(2), np.eye(2), W_V, np.eye(2))
        # Starts on another target and factor, so the test's choices are what change the view.
        return pn.Column(AblationPanel(LayerSource(layer=layer), on_save=save, target="W_Q", factor="1"))

    port = free_port()
    running = pn.serve(app, port=port, address="127.0.0.1", websocket_origin=[f"127.0.0.1:{port}"],
                       show=False, threaded=True, start=True)
    try:
        wait_until(lambda: listening(port), "the panel's server listens", timeout=60)
        yield PanelServer(f"http://127.0.0.1:{port}/", saved)
    finally:
        running.stop()


def weights(page: Page, when: str) -> list:
    return source(page, f"ablation-weights-{when}-source")["value"]


def test_scaling_w_v_by_2_keeps_the_weights_moves_the_output_and_the_statement_holds(server, page, watch):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(server.url)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                           "Bokeh.documents[0].get_model_by_name('ablation-weights-after-source') && "
                           "Bokeh.documents[0].get_model_by_name('ablation-weights-after-source').data.row.length > 0")
    statement = page.locator("li[data-statement='ablation_w_q']")
    expect(statement).to_contain_text("not shown by this change")  # W_Q scaled by 1 moves nothing

    page.get_by_label("Ablation target").select_option("W_V")
    page.get_by_label("Change").select_option(label="Scale by a factor")
    type_number(page, "Factor", "2")

    statement = page.locator("li[data-statement='ablation_w_v']")
    expect(statement).to_contain_text("holds")
    expect(statement).to_contain_text(
        "Changing W_V changes routed content without directly changing attention weights.")
    expect(page.get_by_test_id("ablation-weights")).to_contain_text("every weight is exactly the same before and after")
    expect(page.get_by_test_id("ablation-matrix-after")).to_contain_text("W_V after: scaled by 2")
    before = weights(page, "before")
    assert len(before) == 16 and before == weights(page, "after")
    # The output moved: every row's H (and Y = H W_O) doubled.
    outputs = page.get_by_role("table", name="H and Y before and after")
    expect(outputs.locator("tbody td.moved")).to_have_count(4)
    expect(outputs.locator("tbody tr").nth(3)).to_contain_text("[0.592, −1.279][1.184, −2.557]")

    page.get_by_role("button", name="Save ablation as a run").click()
    expect(page.get_by_role("status")).to_have_text("Saved the ablation of W_V.")
    saved = server.saved[-1]
    assert (saved.target, saved.change, saved.factor) == ("W_V", "scale", 2.0)
    assert blocking_violations(page) == []
    screenshot(page, "ablation-w-v-scaled-by-2.png")
