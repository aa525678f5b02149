"""Issue 14's views in a real Chromium: the contributions of the chosen row, heat maps saved as
PNG images, and the comparison of two runs of different sizes.

One ``attention-workbench serve`` serves the module; each test has a fresh browser context (a
fresh session) and ends by checking that no page error was logged and no request left the server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from workbench_server import PageWatch, start_server

SCREENSHOTS = Path(__file__).resolve().parent.parent / "test-results" / "screenshots"

SOURCE_JS = """name => {
  const src = window.Bokeh && Bokeh.documents[0] && Bokeh.documents[0].get_model_by_name(name);
  if (!src) return null;
  const out = {};
  for (const k of Object.keys(src.data)) out[k] = Array.from(src.data[k]);
  return out;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("views")
    running = start_server(base / "runs", base / "server.log")
    yield running
    running.stop()


@pytest.fixture
def watch(server, page: Page):
    w = PageWatch(origin=server.url.rstrip("/"))
    w.attach(page)
    yield w
    w.assert_clean()


def open_workbench(page: Page, server) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(server.url)
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                           "Bokeh.documents[0].get_model_by_name('weights-source') && "
                           "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")


def source(page: Page, name: str) -> dict | None:
    return page.evaluate(SOURCE_JS, name)


def wait_for_source(page: Page, name: str, column: str, expected: list) -> None:
    """Poll until the Bokeh source ``name``'s ``column`` equals ``expected``."""
    page.wait_for_function(
        """([name, column, expected]) => {
          const src = Bokeh.documents[0].get_model_by_name(name);
          return src && JSON.stringify(Array.from(src.data[column] || [])) === JSON.stringify(expected);
        }""", arg=[name, column, expected])


def test_contributions_of_the_worked_row_side_by_side(server, page, watch):
    open_workbench(page, server)
    table = page.get_by_role("table", name="Contributions to row 2")
    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(table.locator("tfoot")).to_contain_text("17.311")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_text("key 11.0000.26910.0002.689")
    expect(rows.nth(1)).to_have_text("key 22.0000.73120.00014.621")
    expect(rows.nth(2)).to_contain_text("masked (−∞ before softmax)")
    expect(page.get_by_test_id("contributions-lesson")).to_contain_text(
        "Largest score: key 3 (masked, so softmax never saw it) · largest weight: key 2 · "
        "largest contribution (size): key 2")
    wait_for_source(page, "contributions-components-source", "contribution_label",
                    ["2.69", "14.62", "0"])
    assert source(page, "contributions-source")["weight_label"] == ["0.27", "0.73", "0"]
    charts = page.locator(".bk-Figure").filter(has=page.locator("canvas"))
    expect(charts).not_to_have_count(0)
    page.get_by_role("heading", name="Contributions to row 2").evaluate(
        "e => e.scrollIntoView({block: 'start'})")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "contributions-worked-row.png"))

    # Another row, from the Row control: the table and the bars follow.
    row = page.get_by_label("Row", exact=True)
    row.fill("3")
    row.press("Enter")
    expect(page.get_by_role("table", name="Contributions to row 3")).to_be_visible()
    wait_for_source(page, "contributions-components-source", "contribution_label",
                    ["3e-03", "0.02", "99.88"])

    # Without values the view says what contributions need, and the value bars go.
    page.get_by_label("Use values (adds output and contributions)", exact=True).uncheck()
    expect(page.get_by_test_id("contributions-need-values")).to_contain_text(
        "Contributions need values")
    wait_for_source(page, "contributions-components-source", "x", [])


def test_contributions_when_keys_are_mixed_instead_of_values(server, page, watch):
    open_workbench(page, server)
    page.get_by_label("Failure mode").select_option(label="Keys mixed instead of values")
    page.get_by_role("button", name="Load a preset that shows it: Worked row with values, keys mixed").click()
    expect(page.get_by_test_id("contributions-mixed-keys")).to_contain_text(
        "the weights mixed the keys kj, not the values")
    wait_for_source(page, "contributions-components-source", "value", [1, 2, 9])
    assert blocking_violations(page) == []


def blocking_violations(page: Page) -> list[str]:
    """axe-core's critical and serious violations on the page, one line each."""
    return [f"{v['id']} ({v['impact']}): {v['help']}"
            for v in Axe().run(page).response["violations"] if v["impact"] in {"critical", "serious"}]
