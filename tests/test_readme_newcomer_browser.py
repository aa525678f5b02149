"""What a newcomer found trying the learner page from the README alone, each in a real Chromium
at 1280×720: the presets list and the failure-mode hint's button load a preset alike, the
lost-connection notice hides no control, a typed number shows whole in its cell, and the
contribution chart's labels stay readable."""

from __future__ import annotations

import re

from playwright.sync_api import expect
from workbench_server import open_learner_page, row_steps, screenshot, start_server, type_number

from app.learner.state import PRESETS


def test_the_wide_head_preset_keeps_the_chosen_failure_mode_from_the_list_as_from_the_hint(server, page, watch):
    # README: "No sqrt(d_k) scaling (preset Wide head, d_k = 4: sharper rows)". The list's button
    # reset the mode to Correct, so the sharper rows never showed; the hint's button kept it.
    open_learner_page(page, server.url, at_1280=True)
    wide = PRESETS["wide_head"]["label"]
    mode = page.get_by_label("Failure mode")
    shown = []
    for button in (page.get_by_role("button", name=wide, exact=True),
                   page.get_by_role("button", name=f"Load a preset that shows it: {wide}")):
        page.get_by_role("button", name="Reset", exact=True).click()
        expect(page.get_by_label("Query 1", exact=True)).to_have_value("1")
        mode.select_option(label="No sqrt(d_k) scaling")
        expect(page.get_by_role("button", name=f"Load a preset that shows it: {wide}")).to_be_visible()
        button.click()
        expect(page.get_by_label("Head width d_k")).to_have_value("4")
        expect(mode).to_have_value("No sqrt(d_k) scaling")
        expect(page.locator("[data-check='score_scale']")).to_contain_text("FAIL")
        expect(row_steps(page)).to_contain_text("Correct, for comparison: scores divided by √d_k = √4 = 2.000")
        shown.append(row_steps(page).inner_text())
    assert shown[0] == shown[1]
    # In Correct it is the wide head computed correctly, scores divided by √4.
    mode.select_option(label="Correct")
    page.get_by_role("button", name=wide, exact=True).click()
    expect(mode).to_have_value("Correct")
    expect(page.locator(".check-fail")).to_have_count(0)
    expect(row_steps(page)).not_to_contain_text("Correct, for comparison")


def overlaps(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def test_the_lost_connection_notice_sits_in_the_header_bar_and_hides_no_saved_run(tmp_path, page):
    # In Panel's corner (bottom right, 300 × 180 px) it covered the Saved runs' Open links.
    own = start_server(tmp_path / "runs", tmp_path / "server.log")
    try:
        open_learner_page(page, own.url, at_1280=True)
        page.get_by_label("Prediction").fill("p")
        page.get_by_label("Prediction").press("Tab")
        for n in range(1, 5):
            type_number(page, "Query 1", str(n))
            page.get_by_role("button", name="Save run").click()
            expect(page.get_by_role("status").filter(has_text=f"Saved run #{n}")).to_be_visible()
        opens = page.get_by_role("link", name=re.compile(r"^Open run \d in the workbench$"))
        expect(opens).to_have_count(4)
        own.process.kill()
        own.process.wait(timeout=30)
        notice = page.locator(".notyf__toast").filter(has_text="Connection to the workbench server lost")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("your saved runs are kept")
        # At the top of the page it lies inside the header bar, which holds no control.
        page.evaluate("window.scrollTo(0, 0)")
        notice.evaluate("el => Promise.all(el.getAnimations({subtree: true}).map((a) => a.finished))")
        # The bar is the header pane's host (Panel draws the pane's HTML in its shadow root).
        header = page.locator("header").evaluate(
            "el => { const r = el.getRootNode().host.getBoundingClientRect(); "
            "return {x: r.x, y: r.y, width: r.width, height: r.height} }")
        expect(notice).to_be_in_viewport(ratio=1)
        box = notice.bounding_box()
        assert header["y"] <= box["y"] and box["y"] + box["height"] <= header["y"] + header["height"], (box, header)
        screenshot(page, "lost-connection-1280x720.png", full_page=False)
        # Read down to the Saved runs: every Open link and tick box in view is clear of it.
        page.get_by_role("table", name="Saved runs").evaluate("el => el.scrollIntoView({block: 'end'})")
        box = notice.bounding_box()
        controls = [opens.nth(i) for i in range(4)] + [
            page.get_by_label(re.compile(rf"^Run {i}\b")) for i in range(1, 5)]
        for control in controls:
            assert not overlaps(control.bounding_box(), box), control
        screenshot(page, "lost-connection-saved-runs-1280x720.png", full_page=False)
    finally:
        own.stop()


# Whether a cell shows its whole text, and lies whole inside its grid's visible part and the
# sidebar (no sideways scrolling needed to read it).
SHOWN_WHOLE_JS = """el => {
  const wrap = el.closest('.grid-wrap'), r = el.getBoundingClientRect(), w = wrap.getBoundingClientRect()
  return el.scrollWidth <= el.clientWidth && wrap.scrollWidth <= wrap.clientWidth
    && w.left <= r.left && r.right <= w.right && r.right <= 408 }"""


def test_a_long_number_shows_whole_in_its_cell_at_the_largest_size(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    type_number(page, "Tokens", "8")
    page.get_by_label("Head width d_k").select_option("4")
    page.get_by_label("Use values (adds output and contributions)").check()
    page.get_by_label("Value width d_v").select_option("4")
    typed = {"Key 8, component 4": "9.999", "Value 8, component 4": "-0.00125"}
    for label, text in typed.items():
        type_number(page, label, text)
    page.get_by_label("Input mode").select_option(label="X and projections (W_Q, W_K, W_V)")
    page.get_by_label("Model width d_model").select_option("4")
    matrix = {"X token 8, component 4": "9.999", "W_Q row 1, column 1": "9.999",
              "W_K row 4, column 4": "-0.00125", "W_V row 2, column 4": "123456.75"}
    for label, text in matrix.items():
        type_number(page, label, text)
    for label, text in matrix.items():
        cell = page.get_by_label(label, exact=True)
        expect(cell).to_have_value(text)
        page.wait_for_function(SHOWN_WHOLE_JS, arg=cell.element_handle())
    page.get_by_label("Input mode").select_option(label="Numbers or vectors (Q, K, V)")
    for label, text in typed.items():
        cell = page.get_by_label(label, exact=True)
        expect(cell).to_have_value(text)
        page.wait_for_function(SHOWN_WHOLE_JS, arg=cell.element_handle())
    screenshot(page, "long-numbers-1280x720.png", full_page=False)
