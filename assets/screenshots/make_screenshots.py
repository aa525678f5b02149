"""Make the README's screenshots from the page as it is: ``make screenshots``.

Starts ``attention-workbench serve`` on a free loopback port over a store of its own (a
temporary directory, removed after), opens the learner page in Chromium at 1280×720 through
Playwright, sets up each state the pictures show and writes them beside this file:

- ``workbench-correct.png``: the worked row of seed 003 (preset *Worked row (seed 003)*), causal;
- ``workbench-broken.png``: the same row with *Failure mode* set to *Mask after softmax (broken)*;
- ``workbench-compare.png``: both saved, ticked, and the comparison in view.

The server is stopped however the script ends. Chromium is found as the tests find it
(``tests/find_browser.py``; ``make screenshots`` installs one first when there is none).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from find_browser import HOW_TO_FIX, find_chromium  # noqa: E402  (tests/ is not a package)

SIZE = {"width": 1280, "height": 720}
WEIGHTS_READY = ("() => window.Bokeh && Bokeh.documents.length > 0 && "
                 "Bokeh.documents[0].get_model_by_name('weights-source') && "
                 "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(directory: Path) -> tuple[subprocess.Popen, str]:
    """``attention-workbench serve`` over ``directory/runs.db`` on 127.0.0.1; its process and URL
    once it listens. Raises ``RuntimeError`` with the server's output if it does not start."""
    port = free_port()
    log = directory / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--store", f"sqlite:///{directory / 'runs.db'}",
             "--address", "127.0.0.1", "--port", str(port)],
            cwd=directory, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, f"http://127.0.0.1:{port}/"
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the server did not listen within 60 s:\n{log.read_text()}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def save_run(page: Page, label: str, prediction: str) -> None:
    page.get_by_label("Prediction").fill(prediction)
    page.get_by_label("Label", exact=True).fill(label)
    page.get_by_label("Label", exact=True).press("Tab")
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_text(f"Saved run “{label}”")).to_be_visible()


def take(page: Page, name: str) -> None:
    # Fonts loaded and two frames painted: Bokeh draws its canvases on the frame after an update.
    page.evaluate("() => document.fonts.ready.then(() => new Promise(done => "
                  "requestAnimationFrame(() => requestAnimationFrame(done))))")
    page.screenshot(path=str(HERE / name))
    print(f"wrote {HERE / name}")


def make_screenshots(page: Page, url: str) -> None:
    page.set_viewport_size(SIZE)
    page.goto(url)
    expect(page.get_by_label("Failure mode", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_function(WEIGHTS_READY)

    page.get_by_role("button", name="Worked row (seed 003)").click()
    expect(page.locator("table.readouts")).to_contain_text("17.311")
    take(page, "workbench-correct.png")

    save_run(page, "correct", "Row 2 cannot read key 3, so its weights are 0.269 and 0.731.")
    page.get_by_label("Failure mode", exact=True).select_option("Mask after softmax (broken)")
    expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_visible()
    page.evaluate("() => document.scrollingElement.scrollTo(0, 0)")
    take(page, "workbench-broken.png")

    save_run(page, "mask after softmax", "Masking after softmax leaves rows summing to less than 1.")
    for n in (1, 2):
        box = page.get_by_role("checkbox", name=re.compile(rf"^Run {n}\b"))
        box.click()
        expect(box).to_be_checked()
    expect(page.get_by_text("Comparing run 1 (A) with run 2 (B).")).to_be_visible()
    page.get_by_role("heading", name="Comparison").evaluate("el => el.scrollIntoView({block: 'start'})")
    take(page, "workbench-compare.png")


def main() -> int:
    chromium = find_chromium(headless_shell=False)  # what a learner's browser shows
    if chromium is None:
        print(f"make_screenshots: no Chromium found. {HOW_TO_FIX}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="workbench-screenshots-") as directory:
        process, url = start_server(Path(directory))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium,
                                                     args=["--no-sandbox", "--disable-gpu"])
                try:
                    make_screenshots(browser.new_page(viewport=SIZE), url)
                finally:
                    browser.close()
        finally:
            stop(process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
