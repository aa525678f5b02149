"""A failure-mode switch at issue 23's largest page, in a real Chromium: the page as shipped (one
layout per message from the server, app/shared/one_layout.js) against the same page with
BokehJS's own ``invalidate_layout`` put back (a layout of the whole page each time a part is
shown, hidden or resized).

Both pages are the layer page (a batch of 3, 8 tokens, d_model = d_k = d_v = 4, W_O, set up as
browser_latency.py sets it up) on one server, driven alternately so both see the same machine
noise. Each round walks the ``Failure mode`` list through every mode. The clock runs in the page:
it starts at the select's ``input`` event and stops at the first animation frame where the mode's
description shows the new mode (the layouts of that message are done by then: they run in the
same task, BokehJS's inline and one_layout.js's in a microtask after it). Also counted: the page's
layouts per switch (``compute_layout`` of a root view).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from browser_latency import _open, _set_size
from common import launch_chromium, start_workbench, summary

from attention_core.modes import FAILURE_MODES

# The description pane's shadow root, found once (Panel replaces its inner HTML, not the root);
# the clock; the layout count; and, for the floor page, BokehJS's own invalidate_layout back.
SETUP_JS = """(own) => {
  function deepFind(root, sel) {
    if (root.querySelector(sel)) return root
    for (const n of root.querySelectorAll('*')) {
      if (n.shadowRoot) { const f = deepFind(n.shadowRoot, sel); if (f) return f }
    }
    return null
  }
  let proto = null
  for (const view of Object.values(Bokeh.index)) {
    for (let p = Object.getPrototypeOf(view); p !== null; p = Object.getPrototypeOf(p))
      if (Object.hasOwn(p, 'invalidate_layout') && Object.hasOwn(p, 'compute_layout')) { proto = p; break }
    if (proto !== null) break
  }
  const shipped = proto.invalidate_layout.bokeh_invalidate_layout
  if (shipped === undefined) return 'one_layout.js is not on the page'
  if (own) proto.invalidate_layout = shipped
  const root = deepFind(document, '[data-testid=mode-description]')
  const b = window.__bench = {root, t0: null, t1: null, layouts: 0}
  const compute = proto.compute_layout
  proto.compute_layout = function () {
    if (!(this.parent instanceof proto.constructor)) b.layouts += 1
    return compute.call(this)
  }
  window.addEventListener('input', () => { if (b.t0 === null) b.t0 = performance.now() }, true)
  return b.root === null ? 'no mode description' : 'ok'
}"""

ARM_JS = """(text) => {
  const b = window.__bench
  b.t0 = null; b.t1 = null; b.layouts = 0
  const shown = () => {
    const el = b.root.querySelector('[data-testid=mode-description]')
    return el !== null && el.textContent.trim() === text
  }
  const started = performance.now()
  const frame = () => {
    if (b.t0 !== null && shown()) { b.t1 = performance.now(); return }
    if (performance.now() - started < 30000) requestAnimationFrame(frame)
  }
  requestAnimationFrame(frame)
}"""


def _switch(page, title: str, description: str) -> tuple[float, int]:
    page.evaluate(ARM_JS, description)
    page.get_by_label("Failure mode").select_option(label=title)
    page.wait_for_function("() => window.__bench.t1 !== null", timeout=30_000, polling=20)
    page.wait_for_timeout(300)  # a late layout (a resize) is counted with its switch
    return page.evaluate("() => [window.__bench.t1 - window.__bench.t0, window.__bench.layouts]")


def run(workdir: Path, rounds: int) -> dict:
    """Time ``rounds`` walks through every failure mode on the shipped page and on the same page
    with BokehJS's own layouts, alternately."""
    from playwright.sync_api import sync_playwright

    app = start_workbench(workdir / "switch-runs", workdir / "switch-app.log")
    modes = [FAILURE_MODES[name] for name in (*list(FAILURE_MODES)[1:], next(iter(FAILURE_MODES)))]
    ms: dict[str, list[float]] = {"shipped": [], "bokeh": []}
    layouts: dict[str, list[int]] = {"shipped": [], "bokeh": []}
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            pages = {}
            for kind in ms:
                ctx, page, _out, errors = _open(browser, app.url, "() => window.Bokeh && Bokeh.documents.length > 0")
                page.get_by_role("button", name="Four-token trace (seed 000)").click()
                page.get_by_label("W_V row 2, column 2", exact=True).wait_for(timeout=30_000)
                _set_size(page, "layer")
                status = page.evaluate(SETUP_JS, kind == "bokeh")
                if status != "ok":
                    raise RuntimeError(f"{kind} page: {status}")
                pages[kind] = (ctx, page, errors)
            for n in range(rounds + 1):  # the first round draws each mode's parts for the first time
                for mode in modes:
                    for kind, (_ctx, page, _e) in pages.items():
                        t, count = _switch(page, mode.title, mode.description)
                        if n:
                            ms[kind].append(t)
                            layouts[kind].append(count)
            errors = [e for _c, _p, errs in pages.values() for e in errs]
            browser.close()
    finally:
        app.stop()
    shipped, own = summary(ms["shipped"]), summary(ms["bokeh"])
    ratio = shipped["p95"] / own["p95"]
    return {
        "size": {"name": "layer", "tokens": 8, "d_k": 4, "d_v": 4, "batch": 3, "d_model": 4},
        "switches": len(ms["shipped"]), "shipped_ms": shipped, "bokeh_layouts_ms": own,
        "p95_ratio": ratio, "median_ratio": shipped["median"] / own["median"],
        "layouts_per_switch": {k: {"mean": float(np.mean(v)), "max": int(max(v))} for k, v in layouts.items()},
        "target": "p95 <= 0.8 x the same page with BokehJS's own layouts", "pass": ratio <= 0.8,
        "samples_ms": ms, "page_errors": errors,
    }


def table_rows(r: dict) -> list[tuple[str, str, str, str, str]]:
    """``make bench``'s row for :func:`run`'s result: the shipped page beside BokehJS's own."""
    shipped, own, per = r["shipped_ms"], r["bokeh_layouts_ms"], r["layouts_per_switch"]
    return [("failure-mode switch at the layer size (B 3, T 8, d 4, W_O): median / p95 (ms), layouts",
             f"{shipped['median']:.0f} / {shipped['p95']:.0f}, "
             f"{per['shipped']['mean']:.1f} (max {per['shipped']['max']})",
             f"BokehJS's own layouts: {own['median']:.0f} / {own['p95']:.0f}, {per['bokeh']['mean']:.1f} "
             f"(max {per['bokeh']['max']}) (p95 ×{r['p95_ratio']:.2f})",
             "p95 ≤ 0.8× BokehJS's own", "pass" if r["pass"] else "MISS")]
