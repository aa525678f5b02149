"""Which Chromium the browser tests launch (tests/find_browser.py): the headless shell first for
headless runs, the whole browser for a window, a benchmark or a screenshot."""

from __future__ import annotations

import find_browser
import pytest


@pytest.fixture
def machine(monkeypatch):
    """A machine whose browsers are the dict's values (None: not installed)."""
    found = {"shell": None, "system": None, "playwright": None}
    monkeypatch.setattr(find_browser, "find_headless_shell", lambda: found["shell"])
    monkeypatch.setattr(find_browser, "system_chromium", lambda: found["system"])
    monkeypatch.setattr(find_browser, "playwright_chromium", lambda: found["playwright"])
    return found


def test_headless_runs_take_the_headless_shell_and_a_window_the_whole_browser(machine):
    machine.update(shell="/usr/bin/chromium-headless-shell", system="/usr/bin/chromium")
    assert find_browser.find_chromium() == "/usr/bin/chromium-headless-shell"
    assert find_browser.find_chromium(headless_shell=False) == "/usr/bin/chromium"


def test_without_the_shell_the_system_chromium_then_playwrights(machine):
    machine.update(system="/usr/bin/chromium", playwright="/root/.cache/ms-playwright/chrome")
    assert find_browser.find_chromium() == "/usr/bin/chromium"
    machine.update(system=None)
    assert find_browser.find_chromium() == "/root/.cache/ms-playwright/chrome"
    machine.update(playwright=None)
    assert find_browser.find_chromium() is None


def test_the_shell_alone_serves_no_window(machine):
    machine.update(shell="/usr/bin/chromium-headless-shell")
    assert find_browser.find_chromium(headless_shell=False) is None

