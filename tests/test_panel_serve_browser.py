"""``panel serve`` of the page modules, as the README offers it beside ``make serve``: from a
checkout, ``panel serve app/learner/page.py`` (or ``app/instructor/page.py``) serves that page
over the default store, ``runs.db`` in the working directory, as ``attention-workbench serve``
opens it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from store_helpers import sqlite_store, stored
from workbench_server import ROOT, PageWatch, free_port, open_learner_page, stop_process

WEIGHTS_JS = "() => Array.from(Bokeh.documents[0].get_model_by_name('weights-source').data.value)"


@contextmanager
def panel_serve(module: str, cwd: Path) -> Iterator[str]:
    """Run ``panel serve ROOT/module`` on a free loopback port from ``cwd``; yields the page's URL
    and stops the server after."""
    port = free_port()
    log = cwd / "panel-serve.log"
    env = {k: v for k, v in os.environ.items() if k != "ATTENTION_WORKBENCH_STORE"}  # the default store
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "panel", "serve", str(ROOT / module), "--port", str(port),
             "--address", "127.0.0.1", "--allow-websocket-origin", f"127.0.0.1:{port}"],
            cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "Bokeh app running at" not in log.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"panel serve {module} did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/page"
    finally:
        stop_process(process)


def test_panel_serve_of_the_learner_page_computes_the_worked_row_and_saves_to_the_default_store(
        tmp_path, page: Page):
    with panel_serve("app/learner/page.py", tmp_path) as url:
        watch = PageWatch(origin=re.match(r"http://[^/]+", url).group(0))
        watch.attach(page)
        open_learner_page(page, url)
        assert page.evaluate("() => Bokeh.documents[0].get_model_by_name('weights-figure').title.text") == "Weights"
        expect(page.locator(".bk-Figure canvas").first).to_be_visible()
        page.get_by_role("button", name="Worked row (seed 003)").click()
        page.wait_for_function(f"() => Math.abs(({WEIGHTS_JS})()[4] - 0.731) < 1e-3")
        np.testing.assert_allclose(page.evaluate(WEIGHTS_JS)[3:5], [0.269, 0.731], atol=1e-3)
        page.get_by_label("Prediction").fill("row 2 never reads key 3")
        page.get_by_role("button", name="Save run").click()
        expect(page.get_by_role("status").filter(has_text="Saved run")).to_be_visible()
        watch.assert_clean()
    with sqlite_store(tmp_path) as store:
        [record] = stored(store)
    assert record["prediction"] == "row 2 never reads key 3"


def test_panel_serve_of_the_instructor_page_shows_the_default_stores_runs(tmp_path, page: Page):
    sqlite_store(tmp_path).close()  # runs.db in the working directory, empty
    with panel_serve("app/instructor/page.py", tmp_path) as url:
        watch = PageWatch(origin=re.match(r"http://[^/]+", url).group(0))
        watch.attach(page)
        page.goto(url)
        expect(page.get_by_test_id("runs-total")).to_have_text("0", timeout=30_000)
        expect(page).to_have_title("Self-attention workbench · Instructor")  # its template's, as under serve
        watch.assert_clean()
