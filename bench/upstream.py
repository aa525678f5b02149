"""What app/upstream.py's process-wide changes are worth, each with and without it in one run.

- **TCP_NODELAY** — the echo app of bench/baseline_app.py served twice on loopback, as the
  workbench serves it and with ``--nagle`` (Tornado's default); one Chromium types ``Query 3``
  + Enter in each page in turn and times it as bench/browser_latency.py times the floor (from
  the Enter to the frame that shows the echo). A ``bokeh.client`` session measured no
  difference: the delayed ACK that holds the server's frames is the browser's.
- **MathJax** — the JavaScript each page asks for (the files of Panel's bundle for the page's
  document, as the server renders it, summed on disk), with Panel's own MathJax check and with
  app/upstream.py's. Built in a fresh interpreter; no server, no browser.
- **Bokeh's container defaults made when first read** — one default learner page built into a
  Document and serialized (as a session's first message), in a fresh interpreter with and
  without ``make_bokeh_container_defaults_when_first_read``: the Python memory the page holds
  (tracemalloc, as bench/page_memory.py measures it) and the CPU time of building and
  serializing it, medians. The server's RSS per open page is ``classroom``'s figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import BENCH, ROOT, free_port, launch_chromium, spawn, summary, wait_listening


def _echo_server(workdir: Path, nagle: bool):
    port = free_port()
    cmd = [sys.executable, str(BENCH / "baseline_app.py"), "--port", str(port)] + (["--nagle"] if nagle else [])
    server = spawn(cmd, workdir / f"upstream-echo{'-nagle' if nagle else ''}.log", port)
    wait_listening(server)
    return server


def nagle(workdir: Path, edits: int, warmup: int = 3) -> dict:
    """Edit → echo (ms) in Chromium against the echo app with and without ``TCP_NODELAY``."""
    from browser_latency import SETUP_JS, _one_edit, _open, edited_label, page_state, query_values
    from playwright.sync_api import sync_playwright

    servers = {"nodelay": _echo_server(workdir, nagle=False), "nagle": _echo_server(workdir, nagle=True)}
    samples: dict[str, list[float]] = {name: [] for name in servers}
    ready = "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].get_model_by_name('echo-source')"
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            pages = {}
            for name, server in servers.items():
                context, page, outside, errors = _open(browser, server.url, ready)
                page.evaluate(SETUP_JS)
                pages[name] = (context, page, outside, errors)
            label = edited_label("worked_row")
            for n, text in enumerate(query_values(page_state("worked_row"), warmup + edits)):
                for name, (_, page, _, _) in pages.items():
                    ms = _one_edit(page, label, text, {"echo": text})
                    if n >= warmup:
                        samples[name].append(ms)
                time.sleep(0.15)
            problems = [x for _, _, outside, errors in pages.values() for x in outside + errors]
            for context, _, _, _ in pages.values():
                context.close()
            browser.close()
    finally:
        for server in servers.values():
            server.stop()
    if problems:
        raise RuntimeError(f"page errors or requests off the loopback: {problems}")
    return {name: {**summary(values), "samples": values} for name, values in samples.items()}


def _bundle_bytes(roots) -> tuple[int, bool]:
    """Bytes of the JavaScript files Panel's bundle for ``roots`` names, and whether MathJax is one."""
    import bokeh
    import panel
    from panel.io import resources

    bokeh_static = Path(bokeh.__file__).parent / "server" / "static"
    panel_dist = Path(panel.__file__).parent / "dist"
    total, mathjax = 0, False
    for url in resources.bundle_resources(roots, resources.Resources(mode="server")).js_files:
        path = str(url).split("?")[0]
        local = (panel_dist / path.removeprefix("static/extensions/panel/")
                 if path.startswith("static/extensions/panel/") else bokeh_static / path.removeprefix("static/"))
        total += local.stat().st_size
        mathjax = mathjax or "bokeh-mathjax" in path
    return total, mathjax


def _page_js() -> dict:
    """KiB of JavaScript each page asks for, with Panel's MathJax check and with ours (in a fresh
    process: Panel's bundle also names every extension model the process has imported)."""
    import panel as pn
    from bokeh.document import Document
    from panel.io import resources

    from app.instructor import create_instructor
    from app.learner.embed import create_embed
    from app.learner.page import create_page
    from app.store import RunStore, sqlite_url
    from app.upstream import panel_html_needs_mathjax

    panels_own = resources._panel_use_mathjax
    with tempfile.TemporaryDirectory(prefix="attention-bench-mathjax-") as tmp:
        store = RunStore(sqlite_url(Path(tmp) / "runs.db"))
        pages = {"learner": lambda: create_page(store), "embed": lambda: create_embed(store, []),
                 "instructor": lambda: create_instructor(store)}
        result = {}
        for name, make in pages.items():
            doc = Document()
            pn.state.curdoc = doc  # as while the server builds a session
            pn.panel(make()).server_doc(doc)
            row = {}
            for check, function in (("panel", panels_own), ("ours", panel_html_needs_mathjax)):
                resources._panel_use_mathjax = function
                size, loads = _bundle_bytes(doc.roots)
                row[check] = {"kib": size / 1024, "mathjax": loads}
            resources._panel_use_mathjax = panels_own
            result[name] = row
    return result


def mathjax() -> dict:
    """:func:`_page_js`, run in a fresh interpreter."""
    done = subprocess.run([sys.executable, __file__, "--page-js"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def _page_held(lazy: bool, repeats: int) -> dict:
    """KiB a default learner page holds and the CPU seconds of building and serializing it,
    medians of ``repeats`` pages (after one warm-up), with or without the container defaults
    made when first read."""
    import statistics
    import time

    if lazy:
        from app.upstream import make_bokeh_container_defaults_when_first_read

        make_bokeh_container_defaults_when_first_read()
    from page_memory import _page_figures, build_page

    from app.store import RunStore, sqlite_url

    with tempfile.TemporaryDirectory(prefix="attention-bench-defaults-") as tmp:
        store = RunStore(sqlite_url(Path(tmp) / "runs.db"))
        build_page(store)
        kib, cpu = _page_figures(store, repeats)["kib"], []
        for _ in range(repeats):  # timed apart: tracemalloc slows every allocation
            start = time.process_time()
            page, doc = build_page(store)
            doc.to_json(deferred=False)
            cpu.append(time.process_time() - start)
            del page, doc
    return {"kib": kib, "cpu_s": statistics.median(cpu)}


def container_defaults(repeats: int) -> dict:
    """:func:`_page_held` without and with the change, each in a fresh interpreter."""
    out = {}
    for name, flag in (("bokeh", "--eager"), ("ours", "--lazy")):
        done = subprocess.run([sys.executable, __file__, "--page-held", flag, str(repeats)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600, check=True)
        out[name] = json.loads(done.stdout.splitlines()[-1])
    return out


def run(workdir: Path, edits: int) -> dict:
    return {"page_js": mathjax(), "edit_ms": nagle(workdir, edits),
            "container_defaults": container_defaults(5 if edits <= 10 else 12)}


if __name__ == "__main__" and sys.argv[1:] == ["--page-js"]:
    print(json.dumps(_page_js()))
elif __name__ == "__main__" and sys.argv[1:2] == ["--page-held"]:
    print(json.dumps(_page_held(sys.argv[2] == "--lazy", int(sys.argv[3]))))
