"""Proves the browser setup works: Chromium launches and renders a page."""

from playwright.sync_api import Page, expect


def test_chromium_renders_a_heading(page: Page) -> None:
    page.goto("data:text/html,<h1>hi</h1>")
    expect(page.get_by_role("heading", level=1)).to_have_text("hi")
