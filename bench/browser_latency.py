"""Edit → update latency in a real Chromium: the learner page against a bare Panel app.

A page types a new ``Query 3`` (a cell of the page's input grid; ``Query 3, component 1`` on the
largest page) and presses Enter. The clock runs in the
page: it starts in a capturing ``keydown`` listener for that Enter and stops at the first
animation frame (or DOM mutation of the readouts) where the ``scores-source`` and
``weights-source`` Bokeh data *and* the readouts show the new result: row 3's output in the
readouts table (``table.readouts``, inside the shadow root of the page's readouts HTML pane).
The floor page (bench/baseline_app.py) has the same text fields and gets the same keystrokes;
its clock stops when its echo source holds the typed text. Both pages' text fields are counted
(all, and those shown) and must agree. The two pages are driven alternately in one browser,
so both see the same machine noise.

The learner page is put on the "Worked row (seed 003)" preset first, so that a new query 3
changes weights row 3 *and* a readout (row 3's output); with the default inputs (no values) a
causal row-3 edit would leave every readout unchanged. ``size="largest"`` then sets 8 tokens and
d_k = d_v = 4 (issue 14's largest page: 96 numbers), and the floor gets those 96 fields too.

``size="layer"`` is issue 23's largest page: matrix mode with a batch of 3 items, 8 tokens,
d_model = d_k = d_v = 4, values and W_O (160 numbers: each item's X, W_Q, W_K, W_V, W_O). The
page is set up as a learner would: the "Four-token trace (seed 000)" preset (matrix mode,
values on), then Tokens, d_k, d_v, d_model, Batch size and the Output projection W_O tick. The
edit is ``X item 1 token 3, component 1`` (item 1's query, key and value 3); the clock stops when
item 1's small-multiple maps (``scores-item-1-source``, ``weights-item-1-source``) and the
readouts (item 1's rows) show the new result. The floor gets the same cell names and the
ablation panel's ``Factor`` field.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from common import launch_chromium, loopback_only, start_baseline, start_workbench, summary

from app.learner.state import LearnerState
from app.shared.numbers import format_number

SIZES = {"worked_row": (3, 1), "largest": (8, 4), "layer": (8, 4)}  # tokens, d_k = d_v
LAYER = {"layer": {"batch": 3, "d_model": 4}}  # the sizes in matrix mode, with W_O

# Shared helpers installed once per page. Shadow roots are searched once, at setup, and the one
# holding the readouts table is kept: Panel re-renders the table inside the same root.
SETUP_JS = """() => {
  function deepFind(root, sel) {
    const hit = root.querySelector(sel);
    if (hit) return [root, hit];
    for (const n of root.querySelectorAll('*')) {
      if (n.shadowRoot) { const f = deepFind(n.shadowRoot, sel); if (f) return f; }
    }
    return null;
  }
  const found = deepFind(document, 'table.readouts');
  window.__bench = {readouts: found ? found[0] : null, t0: null, t1: null, check: null};
  window.addEventListener('keydown', e => {
    if (e.key === 'Enter' && window.__bench.t0 === null) window.__bench.t0 = performance.now();
  }, true);
  return found !== null;
}"""

# Text fields in the page (all, and those laid out with a size), through every shadow root.
FIELDS_JS = """() => {
  function textFields(root, acc) {
    for (const n of root.querySelectorAll('input[type=text], textarea')) {
      const box = n.getBoundingClientRect();
      acc.all += 1;
      if (box.width > 0 && box.height > 0) acc.shown += 1;
    }
    for (const n of root.querySelectorAll('*')) if (n.shadowRoot) textFields(n.shadowRoot, acc);
    return acc;
  }
  return textFields(document, {all: 0, shown: 0});
}"""


def _same_fields(app_page, base_page, timeout_s: float = 30.0) -> dict:
    """The text fields both pages show, once laid out (a loaded machine lays the lower part of
    the page out late); raises if they still differ after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        app, base = app_page.evaluate(FIELDS_JS), base_page.evaluate(FIELDS_JS)
        if app == base:
            return app
        if time.monotonic() > deadline:
            raise RuntimeError(f"the floor's text fields {base} are not the page's {app}")
        time.sleep(0.5)

# Arms the stop condition before the keystroke, so an update that lands before Playwright's
# next round trip is still timed at the frame it became visible.
ARM_JS = """(exp) => {
  const b = window.__bench;
  const doc = Bokeh.documents[0];
  const cell = (name, r, c) => {
    const d = doc.get_model_by_name(name).data;
    for (let i = 0; i < d.row.length; i++) if (d.row[i] === r && d.column[i] === c) return d.value[i];
    return undefined;
  };
  let done;
  if (exp.echo !== undefined) {
    done = () => doc.get_model_by_name('echo-source').data.value[0] === exp.echo;
  } else {
    done = () => {
      if (Math.abs(cell(exp.scores, '3', '3') - exp.score) > 1e-9) return false;
      if (Math.abs(cell(exp.weights, '3', '3') - exp.weight) > 1e-9) return false;
      const out = b.readouts.querySelector('table.readouts tbody tr:nth-child(3) > :nth-child(4)');
      return out !== null && out.textContent === exp.output;
    };
  }
  if (done()) return false;  // the new value must not already be shown
  b.t0 = null; b.t1 = null;
  const finish = () => {
    if (b.t1 !== null || b.t0 === null || !done()) return;
    b.t1 = performance.now();
    mo.disconnect();
  };
  const mo = new MutationObserver(finish);
  if (b.readouts) mo.observe(b.readouts, {subtree: true, childList: true, characterData: true});
  const started = performance.now();
  const frame = () => {
    finish();
    if (b.t1 === null && performance.now() - started < 20000) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  return true;
}"""


def page_state(size: str) -> LearnerState:
    """The page's inputs in ``size``, computed by the page's own state (no browser)."""
    tokens, width = SIZES[size]
    state = LearnerState()
    if size in LAYER:
        state.apply_preset("four_token_trace")
        state.param.update(tokens=tokens, d_k=width, d_v=width, d_model=LAYER[size]["d_model"],
                           batch_size=LAYER[size]["batch"], use_w_o=True)
    else:
        state.apply_preset("worked_row")
        state.param.update(tokens=tokens, d_k=width, d_v=width)
    return state


def edited_label(size: str) -> str:
    if size in LAYER:
        return "X item 1 token 3, component 1"
    return "Query 3" if SIZES[size][1] == 1 else "Query 3, component 1"


def expected_app(state: LearnerState, q3: str) -> dict:
    """What the page shows once the edited cell (query 3's first component, or X's in matrix
    mode) is ``q3``: the shown map's cell (3, 3) in its two sources, and row 3's output."""
    state.set_token_text("x" if state.matrices else "queries", 2, q3)
    r = state.result
    item = "-item-1" if state.batched else ""
    return {"score": float(r.scores[2, 2]), "weight": float(r.weights[2, 2]),
            "scores": f"scores{item}-source", "weights": f"weights{item}-source",
            "output": ", ".join(format_number(x) for x in np.atleast_1d(r.output[2]))}


def query_values(state: LearnerState, n: int) -> list[str]:
    """``n`` query-3 texts, each changing the shown output of row 3 from the previous one."""
    out, last, q = [], None, 0.05
    start = expected_app(state, "1")["output"]
    while len(out) < n:
        q = round(q + 0.037, 3)
        if q > 1.5:
            q = 0.051
        text = f"{q:g}"
        shown = expected_app(state, text)["output"]
        if shown != last and shown != start:
            out.append(text)
            last = shown
    return out


def _open(browser, url: str, ready_js: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside = loopback_only(context, url.rstrip("/"))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    page.get_by_label("Tokens", exact=True).wait_for(timeout=60_000)
    page.wait_for_function(ready_js, timeout=60_000)
    return context, page, outside, errors


def _one_edit(page, label: str, text: str, expectation: dict) -> float:
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    if not page.evaluate(ARM_JS, expectation):
        raise RuntimeError(f"{text!r}: the page already shows {expectation}")
    box.press("Enter")
    page.wait_for_function("() => window.__bench.t1 !== null", timeout=20_000, polling=20)
    return page.evaluate("() => window.__bench.t1 - window.__bench.t0")


def _set_size(page, size: str) -> None:
    """Put the page on ``size`` the way a learner would: token count, then d_k and d_v (and in
    matrix mode d_model, the batch size and W_O)."""
    tokens, width = SIZES[size]
    if size == "worked_row":
        return
    page.get_by_label("Tokens", exact=True).fill(str(tokens))
    page.get_by_label("Tokens", exact=True).press("Enter")
    page.get_by_label("Head width d_k").select_option(str(width))
    page.get_by_label("Value width d_v").select_option(str(width))
    source, last = "weights-source", f"Value {tokens}, component {width}"
    if size in LAYER:
        layer = LAYER[size]
        page.get_by_label("Model width d_model").select_option(str(layer["d_model"]))
        page.get_by_label("Batch size").select_option(str(layer["batch"]))
        page.get_by_label("Output projection W_O", exact=True).check()
        source = f"weights-item-{layer['batch']}-source"
        last = f"W_O row {width}, column {layer['d_model']}"
    page.get_by_label(last, exact=True).wait_for(timeout=30_000)
    page.wait_for_function(f"() => Bokeh.documents[0].get_model_by_name('{source}')"
                           f".data.row.length === {tokens * tokens}", timeout=30_000)


def run(workdir: Path, repeats: int, warmup: int = 3, size: str = "worked_row", ablation: bool = True) -> dict:
    """Time ``repeats`` edits (after ``warmup``) of the page at ``size`` against its echo floor;
    without the projection-ablation panel (bench/serve_without_ablation.py) if not ``ablation``."""
    from playwright.sync_api import sync_playwright

    app = start_workbench(workdir / "latency-runs", workdir / "latency-app.log", ablation=ablation)
    base = start_baseline(workdir / "latency-baseline.log", *SIZES[size], **LAYER.get(size, {}))
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            app_ctx, app_page, app_out, app_err = _open(
                browser, app.url, "() => window.Bokeh && Bokeh.documents.length > 0 && "
                "Bokeh.documents[0].get_model_by_name('weights-source') && "
                "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")
            if size in LAYER:  # matrix mode, values on
                app_page.get_by_role("button", name="Four-token trace (seed 000)").click()
                app_page.get_by_label("W_V row 2, column 2", exact=True).wait_for(timeout=30_000)
            else:
                app_page.get_by_role("button", name="Worked row (seed 003)").click()
                app_page.locator("table.readouts").filter(has_text="17.311").wait_for(timeout=30_000)
            _set_size(app_page, size)
            if not app_page.evaluate(SETUP_JS):
                raise RuntimeError("readouts table not found on the workbench page")
            base_ctx, base_page, base_out, base_err = _open(
                browser, base.url, "() => window.Bokeh && Bokeh.documents.length > 0 && "
                "Bokeh.documents[0].get_model_by_name('echo-source')")
            base_page.evaluate(SETUP_JS)
            fields = _same_fields(app_page, base_page)

            state, label = page_state(size), edited_label(size)
            texts = query_values(state, warmup + repeats)
            app_ms, base_ms = [], []
            for n, text in enumerate(texts):
                a = _one_edit(app_page, label, text, expected_app(state, text))
                b = _one_edit(base_page, label, text, {"echo": text})
                if n >= warmup:
                    app_ms.append(a)
                    base_ms.append(b)
                time.sleep(0.15)  # a learner does not type a new query every frame
            for ctx in (app_ctx, base_ctx):
                ctx.close()
            browser.close()
    finally:
        app.stop()
        base.stop()
    a, b = summary(app_ms), summary(base_ms)
    ratio = a["p95"] / b["p95"]
    return {
        "size": {"name": size, "tokens": SIZES[size][0], "d_k": SIZES[size][1], "d_v": SIZES[size][1],
                 **LAYER.get(size, {})},
        "ablation_panel": ablation,
        "workbench_ms": a, "baseline_ms": b, "p95_ratio": ratio,
        "median_ratio": a["median"] / b["median"], "target": "p95 <= 1.15 x baseline p95",
        "pass": ratio <= 1.15, "samples_workbench_ms": app_ms, "samples_baseline_ms": base_ms,
        "text_fields": fields,
        "page_errors": app_err + base_err, "requests_blocked": app_out + base_out,
        "spread_ms": {"workbench_min": float(np.min(app_ms)), "baseline_min": float(np.min(base_ms))},
    }
