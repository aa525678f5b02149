"""How the run store grows: listing, exports and the instructor page at 1,000 … 100,000 runs.

Record files are made fast: one real :class:`ExperimentRecord` is built from the seed's worked
row, then its JSON is written again and again with a new ``id`` and ``created_at`` (and a learner
name), which is exactly what a class of saved runs looks like on disk.

Each size is timed in a fresh subprocess (``list_cold``: a new ``RunStore`` over a directory that
is in the page cache; ``list_warm``: the same store listing again), so one size's cache does not
help the next. ``os.listdir`` + reading every file's bytes, the least any full listing must do,
is timed beside it as the floor. The summary listing the instructor page and the server use is
timed three ways: ``summaries_first`` with no summary index (every file parsed, the index
written), ``summaries_cold`` a new store finding that index (a server restart), and
``summaries_warm`` the same store again, made to stat every file (an open page's refresh tick
after a learner saved; a tick with the directory unchanged costs one ``stat``).

The instructor page is timed in Chromium until it shows the run count, alternately with the
floor any Panel page of its kind imposes (bench/instructor_floor.py: the same template, a 20-row
Tabulator and the count; and with ``--bare`` the count alone), and until its class picture holds
every point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import summary

from attention_core import scaled_dot_product_attention
from attention_core.records import ExperimentRecord

MEASURE = r"""
import json, os, sys, time
from attention_core.store import RunStore, export_csv, export_json
from attention_core.summaries import INDEX_NAME
directory, repeats = sys.argv[1], int(sys.argv[2])
out = {"floor_s": [], "list_cold_s": [], "list_warm_s": [], "export_json_s": [], "export_csv_s": [],
       "summaries_first_s": [], "summaries_cold_s": [], "summaries_warm_s": []}
for _ in range(repeats):
    t = time.perf_counter()
    for name in os.listdir(directory):
        if name.startswith("."):  # the summary index
            continue
        with open(os.path.join(directory, name), "rb") as f:
            f.read()
    out["floor_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
    store = RunStore(directory, create=False)
    listing = store.list()
    out["list_cold_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
    listing = store.list()
    out["list_warm_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
    export_json(listing.records, listing.problems)
    out["export_json_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
    export_csv(listing.records)
    out["export_csv_s"].append(time.perf_counter() - t)
    runs, problems = len(listing.records), len(listing.problems)
    del listing, store  # a server holds no full listing: its objects would slow the GC below
    try:
        os.unlink(os.path.join(directory, INDEX_NAME))
    except FileNotFoundError:
        pass
    t = time.perf_counter()
    RunStore(directory, create=False).list_summaries()
    out["summaries_first_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
    store = RunStore(directory, create=False)
    summaries = store.list_summaries()
    out["summaries_cold_s"].append(time.perf_counter() - t)
    store._last_summaries = None  # as on the first tick after a save: stat every file again
    t = time.perf_counter()
    summaries = store.list_summaries()
    out["summaries_warm_s"].append(time.perf_counter() - t)
out["runs"] = runs
out["problems"] = problems
out["summary_runs"] = len(summaries.records)
print(json.dumps(out))
"""


def write_runs(directory: Path, n: int) -> None:
    """``n`` record files in ``directory`` (adds to what is there), about 20 µs each."""
    directory.mkdir(parents=True, exist_ok=True)
    have = sum(1 for e in os.scandir(directory) if not e.name.startswith("."))
    result = scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100])
    start = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    template = ExperimentRecord.from_result(
        result, learner="learner", label="worked row", prediction="row 2 cannot read token 3",
        record_id="TEMPLATE", created_at=start).to_dict()
    for i in range(have, n):
        when = start + timedelta(seconds=i)
        run_id = f"{when:%Y%m%dT%H%M%S%fZ}-{i:016x}"
        template.update(id=run_id, created_at=when.isoformat(timespec="microseconds"),
                        learner=f"learner {i % 120}")
        (directory / f"{run_id}.json").write_text(
            json.dumps(template, allow_nan=False, ensure_ascii=False), encoding="utf-8")


def measure(directory: Path, repeats: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(directory), str(repeats)],
                          capture_output=True, text=True, check=True)
    raw = json.loads(proc.stdout)
    row = {k: summary(v) for k, v in raw.items() if k.endswith("_s")}
    row["runs"], row["problems"] = raw["runs"], raw["problems"]
    if raw["summary_runs"] != raw["runs"]:
        raise RuntimeError(f"summary listing found {raw['summary_runs']} runs, full {raw['runs']}")
    return row


READY_JS = """(n) => {
  function deepFind(root, sel) {
    const hit = root.querySelector(sel);
    if (hit) return hit;
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) { const f = deepFind(el.shadowRoot, sel); if (f) return f; }
    }
    return null;
  }
  const total = deepFind(document, "[data-testid='runs-total']");
  return total !== null && total.textContent === String(n);
}"""


CHART_JS = """(n) => {
  const doc = window.Bokeh && Bokeh.documents.length && Bokeh.documents[0];
  const src = doc && doc.get_model_by_name('class-source');
  return !!src && src.data.x.length === n;
}"""


def _start_floor(n: int, log: Path, bare: bool = False):
    """bench/instructor_floor.py showing ``n`` as its run count, served like the workbench
    (``bare``: the count alone, with no template and no table)."""
    from common import BENCH, free_port, spawn, wait_listening

    port = free_port()
    server = spawn([sys.executable, str(BENCH / "instructor_floor.py"), "--port", str(port),
                    "--runs", str(n), *(["--bare"] if bare else [])], log, port)
    wait_listening(server)
    return server


def instructor_ready(directory: Path, workdir: Path, n: int, loads: int) -> dict | str:
    """Seconds from opening ``/instructor`` until it shows ``n`` runs: first page after the server
    started (the store is listed cold), then ``loads - 1`` more pages (the shared cache is warm).

    Every page is a new browser context (nothing cached: every script is fetched and compiled
    again). Beside it, alternately, the floor: bench/instructor_floor.py, the same template with a
    20-row Tabulator and the run count, timed the same way, and its ``--bare`` page, the count
    alone in a ``pn.Column`` (``bare_*``): the least any Panel page costs here. ``chart_s`` is when the page's class
    picture holds all ``n`` points (it is drawn after the first paint); each page is closed only
    then, so no page's work spills into the next one's time.
    """
    try:
        import app.instructor  # noqa: F401
    except ImportError:
        return "not yet measurable (no app/instructor.py)"
    from common import launch_chromium, loopback_only, start_workbench
    from playwright.sync_api import sync_playwright

    server = start_workbench(directory, workdir / f"instructor-{n}.log")
    floor = _start_floor(n, workdir / f"instructor-floor-{n}.log")
    bare = _start_floor(n, workdir / f"instructor-bare-{n}.log", bare=True)
    times, charts, floors, bares = [], [], [], []
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            for _ in range(loads):
                for target, out in ((server, times), (floor, floors), (bare, bares)):
                    context = browser.new_context()
                    loopback_only(context, target.url.rstrip("/"))
                    page = context.new_page()
                    t = time.monotonic()
                    page.goto(target.url + "instructor")
                    page.wait_for_function(READY_JS, arg=n, timeout=300_000, polling=50)
                    out.append(time.monotonic() - t)
                    if target is server:
                        page.wait_for_function(CHART_JS, arg=n, timeout=300_000, polling=50)
                        charts.append(time.monotonic() - t)
                    context.close()
            browser.close()
    finally:
        server.stop()
        floor.stop()
        bare.stop()
    return {"first_s": times[0], "later_s": summary(times[1:]), "chart_first_s": charts[0],
            "chart_later_s": summary(charts[1:]), "floor_first_s": floors[0],
            "floor_later_s": summary(floors[1:]), "bare_first_s": bares[0],
            "bare_later_s": summary(bares[1:])}


def run(workdir: Path, sizes: tuple[int, ...], repeats: int, instructor_max: int = 10_000) -> dict:
    directory = workdir / "store-runs"
    rows = {}
    for n in sorted(sizes):
        t = time.perf_counter()
        write_runs(directory, n)
        made = time.perf_counter() - t
        reps = repeats if n <= 10_000 else max(1, repeats // 3)
        rows[str(n)] = {**measure(directory, reps), "generate_s": made}
        if n <= instructor_max:
            rows[str(n)]["instructor"] = instructor_ready(directory, workdir, n, 1 + repeats)
        else:
            rows[str(n)]["instructor"] = f"not measured above {instructor_max:,} runs (time budget)"
    ten_k = rows.get("10000")
    # The page lists summaries: a cold summary listing (index present, as after a restart) is
    # what stands between a request and the page; a full listing is for the CLI export.
    ready = ten_k["summaries_cold_s"]["p95"] if ten_k else None
    page = ten_k.get("instructor") if ten_k else None
    page_ok = page["first_s"] <= 1.0 if isinstance(page, dict) else None
    return {"by_runs": rows,
            "target": "10,000 runs: summary listing (cold) <= 1 s; instructor page ready <= 1 s",
            "pass": ready is not None and ready <= 1.0, "instructor_pass": page_ok}
