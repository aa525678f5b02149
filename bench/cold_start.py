"""Cold start: from spawning ``attention-workbench serve`` to a page a learner can use.

Three clocks per start, all from the moment the process is spawned: the port accepts a
connection, ``GET /`` answers 200, and an already-running Chromium shows a visible ``Query 1``
field with the weight heat map's data in the Bokeh document. The bare Panel app of
bench/baseline_app.py is started the same way, alternately, as the floor. ``import_panel_s`` is
how long a fresh interpreter takes to ``import panel`` and nothing else, the part of every
start no Panel app can skip.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from common import (
    CLI,
    ROOT,
    free_port,
    launch_chromium,
    loopback_only,
    spawn,
    summary,
    wait_listening,
)

BASELINE_READY = ("() => window.Bokeh && Bokeh.documents.length > 0 && "
                  "Bokeh.documents[0].get_model_by_name('echo-source') !== null")
WORKBENCH_READY = ("() => window.Bokeh && Bokeh.documents.length > 0 && "
                   "Bokeh.documents[0].get_model_by_name('weights-source') && "
                   "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")


def _http_200(url: str, started: float, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                if response.status == 200:
                    response.read()
                    return time.monotonic() - started
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{url} never answered 200")


def _one(browser, cmd: list[str], port: int, log: Path, ready_js: str) -> dict:
    server = spawn(cmd, log, port)
    try:
        listening = wait_listening(server)
        http = _http_200(server.url, server.started)
        context = browser.new_context()
        loopback_only(context, server.url.rstrip("/"))
        page = context.new_page()
        page.goto(server.url)
        page.get_by_label("Query 1", exact=True).wait_for(state="visible", timeout=60_000)
        page.wait_for_function(ready_js, timeout=60_000, polling=10)
        usable = time.monotonic() - server.started
        context.close()
    finally:
        server.stop()
    return {"listening": listening, "http_200": http, "usable": usable}


def run(workdir: Path, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    # An installed workbench's start: its modules' bytecode written, as `make serve` and pip
    # leave it (a shell with PYTHONDONTWRITEBYTECODE would otherwise compile every module each start).
    subprocess.run([sys.executable, "-m", "compileall", "-q", "app", "attention_core"], cwd=ROOT, check=True)
    app, base, imports = [], [], []
    for _ in range(repeats):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import panel"], check=True)
        imports.append(time.monotonic() - started)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for n in range(repeats):
            port = free_port()
            app.append(_one(browser, [str(CLI), "serve", "--runs-dir", str(workdir / "cold-runs"),
                                      "--port", str(port), "--address", "127.0.0.1"],
                            port, workdir / f"cold-app-{n}.log", WORKBENCH_READY))
            port = free_port()
            base.append(_one(browser, [str(CLI.parent / "python"), "bench/baseline_app.py",
                                       "--port", str(port)],
                             port, workdir / f"cold-base-{n}.log", BASELINE_READY))
        browser.close()

    def table(rows):
        return {k: summary([r[k] for r in rows]) for k in ("listening", "http_200", "usable")}

    a, b = table(app), table(base)
    return {"workbench_s": a, "baseline_s": b, "import_panel_s": summary(imports),
            "target": "usable page p95 <= 3 s",
            "pass": a["usable"]["p95"] <= 3.0}
