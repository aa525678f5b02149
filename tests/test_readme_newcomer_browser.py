"""What a newcomer found trying the learner page from the README alone, each in a real Chromium
at 1280×720: the presets list and the failure-mode hint's button load a preset alike, the
lost-connection notice hides no control, a typed number shows whole in its cell, and the
contribution chart's labels stay readable."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from workbench_server import open_learner_page

from app.learner.state import PRESETS


def steps(page: Page):
    return page.locator("ol.row-steps")


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
        expect(steps(page)).to_contain_text("Correct, for comparison: scores divided by √d_k = √4 = 2.000")
        shown.append(steps(page).inner_text())
    assert shown[0] == shown[1]
    # In Correct it is the wide head computed correctly, scores divided by √4.
    mode.select_option(label="Correct")
    page.get_by_role("button", name=wide, exact=True).click()
    expect(mode).to_have_value("Correct")
    expect(page.locator(".check-fail")).to_have_count(0)
    expect(steps(page)).not_to_contain_text("Correct, for comparison")
