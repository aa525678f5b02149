"""How the run store grows: saves, queries, exports and imports at 1,000 … 100,000 runs, on
SQLite and on PostgreSQL, each beside the least its work must cost, in the same run.

A store of ``n`` runs is filled in one transaction from one real record (Self-attention, "A worked
row") with new ids, times and learner names. Then, for each dialect and size:

- ``save``: 100 concurrent learners (threads of one process, each saving 3 runs after a common
  start, as one server's sessions do) — p50 / p95 of a save — beside the floor: the same saves
  one at a time, nobody else saving.
- ``query``: what the instructor page asks: the count and the newest 20 runs; the same with a
  learner filter, and with one no run matches; the class picture's newest 5,000 filtered runs;
  the change token it polls every second; the learners view's count per learner.
- ``export``: the JSON bundle (stored texts) and the CSV (columns, as ``export`` writes it) of
  every run, written to a file, beside the floor: ``SELECT record`` through the driver, written
  to a file as is.
- ``import``: 10,000 record files (a class's downloads) into a new store, beside the floor:
  reading and parsing the same files.

- ``instructor``: the instructor page in Chromium over each store, at each size: seconds from
  navigation start to its first text (the run count) and to its table's first page, on a first
  visit (nothing cached) and a repeat visit (the browser's cache kept, as a real instructor's
  browser keeps Panel's bundles), beside the floor in the same rounds: bench/instructor_floor.py,
  the same template with a 20-row table (and, for scale, the bare page: the count alone). The
  target is at most 1.3× the floor at 100,000 runs.

The stores grow from size to size (filled once in all). ``python bench/store_scale.py [SIZE …]``
prints the store's figures alone; ``--page`` the instructor page's alone.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import summary

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from app.store import RunFilter, RunStore, iter_csv, iter_export_json, sqlite_url  # noqa: E402
from app.store.importing import import_paths  # noqa: E402
from app.store.schema import runs as runs_table  # noqa: E402
from attention_core import scaled_dot_product_attention  # noqa: E402
from attention_core.records import ExperimentRecord  # noqa: E402

START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
LEARNERS = 100
SAVES_EACH = 3


def _template() -> dict:
    result = scaled_dot_product_attention([1, 1, 1], [1, 2, 9], [10, 20, 100])
    return ExperimentRecord.from_result(
        result, learner="learner", label="worked row", prediction="row 2 cannot read token 3",
        record_id="TEMPLATE", created_at=START).to_dict()


def records(first: int, last: int, prefix: str = "") -> list[ExperimentRecord]:
    """Runs ``first`` … ``last - 1``, one second apart."""
    template, out = _template(), []
    for i in range(first, last):
        when = START + timedelta(seconds=i)
        template.update(id=f"{prefix}{when:%Y%m%dT%H%M%S%fZ}-{i:016x}",
                        created_at=when.isoformat(timespec="microseconds"), learner=f"learner {i % 120}")
        out.append(ExperimentRecord(**json.loads(json.dumps(template))))
    return out


def fill(store: RunStore, n: int) -> float:
    """Bring ``store`` to ``n`` runs (it grows from size to size); seconds taken."""
    have = store.count()
    t = time.perf_counter()
    for start in range(have, n, 10_000):
        store.import_records(records(start, min(n, start + 10_000)))
    return time.perf_counter() - t


def _save_latencies(store: RunStore, batch: list[ExperimentRecord], learners: int) -> list[float]:
    latencies: list[float] = []
    lock, barrier = threading.Lock(), threading.Barrier(learners)
    errors: list[Exception] = []

    def learner(k: int) -> None:
        mine = batch[k::learners]
        barrier.wait()
        for record in mine:
            t = time.perf_counter()
            try:
                store.save(record)
            except Exception as error:  # reported below: a bench must not hide a failed save
                errors.append(error)
                return
            with lock:
                latencies.append(time.perf_counter() - t)

    threads = [threading.Thread(target=learner, args=(k,)) for k in range(learners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} saves failed, e.g. {errors[0]}")
    return latencies


def saves(store: RunStore, n: int) -> dict:
    batch = records(0, LEARNERS * SAVES_EACH, prefix=f"s{n}-")
    floor = []
    for record in batch[:30]:
        t = time.perf_counter()
        store.save(record)
        floor.append(time.perf_counter() - t)
    concurrent = _save_latencies(store, batch[30:], LEARNERS)
    ms = [x * 1000 for x in concurrent]
    q = statistics.quantiles(ms, n=20)
    return {"p50_ms": statistics.median(ms), "p95_ms": q[18], "saves": len(ms), "learners": LEARNERS,
            "floor_p50_ms": statistics.median(x * 1000 for x in floor)}


def _timed(fn, repeats: int) -> dict:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return summary(out)


def _write(path: Path, pieces) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for piece in pieces:
            f.write(piece)


def _floor_export(store: RunStore, path: Path) -> None:
    """The least an export costs: every stored text through the driver, written as it is."""
    from sqlalchemy import select

    with store.engine.connect() as conn, open(path, "w", encoding="utf-8") as f:
        result = conn.execution_options(stream_results=True, yield_per=1000).execute(select(runs_table.c.record))
        for (text,) in result:
            f.write(text)
            f.write(",\n")


def measure(store: RunStore, n: int, workdir: Path, repeats: int) -> dict:
    out_file = workdir / "export.out"
    row: dict = {"runs": store.count()}
    # As `attention-workbench export` reads them: each stored text checked, a run that cannot be read left out.
    row["export_json_s"] = _timed(lambda: _write(out_file, iter_export_json(store.iter_texts(left_out=[]))), repeats)
    row["export_csv_s"] = _timed(lambda: _write(out_file, iter_csv(store.iter_csv_rows(left_out=[]))), repeats)
    row["export_floor_s"] = _timed(lambda: _floor_export(store, out_file), repeats)
    out_file.unlink(missing_ok=True)
    newest = [("created_at", "desc")]
    row["page_s"] = _timed(lambda: store.query(sort=newest, limit=20), repeats * 3)
    row["page_filtered_s"] = _timed(lambda: store.query(RunFilter(learner="learner 7"), sort=newest, limit=20),
                                    repeats * 3)
    # A learner filter typed on the instructor page: the table's count and page for a text no run
    # holds (the walk cannot stop early), and the class picture's newest 5,000 of "learner 7".
    row["page_filter_none_s"] = _timed(lambda: store.query(RunFilter(learner="zzz"), sort=newest, limit=20),
                                       repeats * 3)
    row["picture_filtered_s"] = _timed(lambda: store.query(RunFilter(learner="learner 7"), sort=newest,
                                                           limit=5000, counted=False), repeats * 3)
    row["change_token_s"] = _timed(store.change_token, repeats * 10)
    row["learners_s"] = _timed(store.learner_runs, repeats)
    row["save"] = saves(store, n)
    return row


def imports(url: str, workdir: Path, files: int) -> dict:
    """``files`` record files imported into the (new) store at ``url``, beside reading them."""
    folder = workdir / f"downloads-{files}"
    if not folder.exists():
        folder.mkdir()
        for record in records(0, files, prefix="i-"):
            (folder / f"{record.id}.json").write_text(record.to_json(), encoding="utf-8")
    t = time.perf_counter()
    for path in folder.iterdir():
        json.loads(path.read_bytes())
    floor = time.perf_counter() - t
    with RunStore(url) as store:
        t = time.perf_counter()
        report = import_paths(store, [folder])
        took = time.perf_counter() - t
        if report.total("imported") != files or store.count() != files:
            raise RuntimeError(f"imported {report.total('imported')} of {files}: {report.summary()}")
    return {"files": files, "import_s": took, "floor_read_parse_s": floor, "per_file_ms": took / files * 1000}


def _postgres():
    from postgres_server import start_postgres

    try:
        return start_postgres()
    except (FileNotFoundError, RuntimeError) as error:
        print(f"bench: no PostgreSQL ({error}); SQLite only", file=sys.stderr)
        return None


def run(workdir: Path, sizes: tuple[int, ...], repeats: int, import_files: int = 10_000,
        store: bool = True, page: bool = True) -> dict:
    """The figures of the module docstring at each of ``sizes``, on SQLite and (when it can be
    started) PostgreSQL: ``store``, the saves, queries, exports and imports; ``page``, the
    instructor page."""
    pg = _postgres()
    dialects = {"sqlite": sqlite_url(workdir / "store-runs" / "runs.db")}
    (workdir / "store-runs").mkdir(exist_ok=True)
    if pg is not None:
        dialects["postgresql"] = pg.new_database()
    result: dict = {"by_dialect": {name: {} for name in dialects}, "import": {}}
    stores = {name: RunStore(url) for name, url in dialects.items()}
    try:
        for n in sorted(sizes):  # each store grows from size to size: filled once in all
            for name, opened in stores.items():
                made = fill(opened, n)
                reps = repeats if n <= 10_000 else max(1, repeats // 2)
                row = {"fill_s": made}
                if store:
                    row.update(measure(opened, n, workdir, reps))
                result["by_dialect"][name][str(n)] = row
                print(f"bench: store {name} {n:,} runs measured", file=sys.stderr, flush=True)
            if page:
                # as many rounds at every size: the page reads one page of runs, whatever their number
                ready = instructor_ready(dialects, {name: s.count() for name, s in stores.items()}, workdir,
                                         1 + repeats)
                for name, timed in ready.items():
                    result["by_dialect"][name][str(n)]["instructor"] = timed
                print(f"bench: instructor page at {n:,} runs timed", file=sys.stderr, flush=True)
        for name in dialects:
            if store and import_files:
                target = sqlite_url(workdir / "import.db") if name == "sqlite" else pg.new_database()
                result["import"][name] = imports(target, workdir, import_files)
    finally:
        for opened in stores.values():
            opened.close()
        if pg is not None:
            pg.stop()
    checks = {}
    for name, rows in result["by_dialect"].items():
        big = rows.get("100000", {})
        if "export_json_s" in big:
            checks[f"{name}_export_100k"] = {
                "json_s": big["export_json_s"]["median"], "csv_s": big["export_csv_s"]["median"],
                "pass": big["export_json_s"]["median"] <= 5 and big["export_csv_s"]["median"] <= 5}
        if "instructor" in big:
            ratios = big["instructor"]["ratio"]
            checks[f"{name}_instructor_100k"] = {**ratios, "pass": all(r <= PAGE_TARGET for r in ratios.values())}
    result["checks"] = checks
    result["target"] = (f"export JSON and CSV at 100,000 runs <= 5 s, linear in runs; instructor page ready "
                        f"(first text, table's first page; first and repeat visit) <= {PAGE_TARGET}x the floor "
                        "at 100,000 runs")
    result["pass"] = all(c["pass"] for c in checks.values()) if checks else None
    return result


PAGE_TARGET = 1.3
# In the page: the first element matching a selector, looking into shadow roots (Panel's
# components draw in them), and the time since the navigation began when a condition holds.
_FIND_JS = """
  function deepAll(root, sel, out) {
    out.push(...root.querySelectorAll(sel));
    for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) deepAll(el.shadowRoot, sel, out); }
    return out;
  }
"""
# First text: the run count, the page's first line about the runs (the floor shows it too).
TEXT_JS = "(n) => {" + _FIND_JS + """
  const total = deepAll(document, "[data-testid='runs-total']", [])[0];
  return total !== undefined && total.textContent.replace(/\\D/g, '') === String(n) && performance.now();
}"""
# The table's first page: a Tabulator row with text in it.
TABLE_JS = "() => {" + _FIND_JS + """
  return deepAll(document, ".tabulator-row", []).some(r => r.textContent.trim() !== '') && performance.now();
}"""
# The workbench page has finished building (the learners table comes last): closed only then,
# so its leftover work does not fall on the next page timed.
SETTLED_JS = "() => {" + _FIND_JS + """
  return deepAll(document, "table.learners", []).length > 0;
}"""
# Where a visit's time went, from navigation start: the page's HTML began to arrive (the server
# had built the session's document by then) and every script in its head had run.
PHASES_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return {html_s: nav.responseStart / 1000, scripts_s: nav.domContentLoadedEventEnd / 1000};
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


def _visit(context, url: str, n: int, table: bool, settled: bool) -> dict:
    """One page load in ``context``: seconds from navigation start to the first text (and the
    table's first page), and to the phases of ``PHASES_JS``, read in the page; the page is
    closed after."""
    page = context.new_page()
    page.goto(url, wait_until="commit")
    seen = {"text_s": page.wait_for_function(TEXT_JS, arg=n, timeout=300_000, polling=25).json_value() / 1000}
    if table:
        seen["table_s"] = page.wait_for_function(TABLE_JS, timeout=300_000, polling=25).json_value() / 1000
    seen.update(page.evaluate(PHASES_JS))
    if settled:
        page.wait_for_function(SETTLED_JS, timeout=300_000, polling=100)
    page.close()
    return seen


def _wait_idle(servers, timeout: float = 20.0) -> None:
    """Until no server of ``servers`` has used CPU for 0.2 s (a closed page's clean-up done), so
    the next visit is not charged for the last one's leftovers; at most ``timeout`` seconds."""
    from common import cpu_seconds

    deadline = time.monotonic() + timeout
    used = [cpu_seconds(s.pid) for s in servers]
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = [cpu_seconds(s.pid) for s in servers]
        if now == used:
            return
        used = now


def _visits(samples: list[dict]) -> dict:
    """Medians and p95s of a target's visits: ``first`` (an empty cache) and ``repeat`` (the cache
    the first one filled)."""
    return {visit: {key: summary([s[visit][key] for s in samples]) for key in samples[0][visit]}
            for visit in ("first", "repeat")}


def instructor_ready(urls: dict[str, str], counts: dict[str, int], workdir: Path, loads: int) -> dict:
    """The instructor page ready, on each store of ``urls`` (dialect → store URL, holding
    ``counts[dialect]`` runs), against its floor, in the same minutes.

    Each of ``loads`` rounds visits, in turn (each round starting with the next one), the
    workbench on each store, the floor (bench/instructor_floor.py: the same template, a 20-row
    Tabulator, the count) and the bare page (the count alone): in a new browser context (nothing
    cached), then again in the same context (Panel's and Bokeh's bundles cached, as in a real
    instructor's browser); every server idle before each visit. Each visit
    gives seconds from navigation start to the first text (the run count) and to the table's
    first page. ``ratio``: the workbench's medians over the floor's.
    """
    from common import launch_chromium, loopback_only, start_workbench
    from playwright.sync_api import sync_playwright

    n_floor = max(counts.values())
    started: list = []  # stopped whatever happens, even while the next one starts
    samples: dict[str, list[dict]] = {}
    try:
        for name, url in urls.items():
            started.append(start_workbench(workdir / "instructor-store", workdir / f"instructor-{name}-{n_floor}.log",
                                           store=url))
        started.append(_start_floor(n_floor, workdir / f"instructor-floor-{n_floor}.log"))
        started.append(_start_floor(n_floor, workdir / f"instructor-bare-{n_floor}.log", bare=True))
        pages = zip(urls, started[:len(urls)], strict=True)
        targets = [(name, server, counts[name], True, True) for name, server in pages]
        targets += [("floor", started[-2], n_floor, True, False), ("bare", started[-1], n_floor, False, False)]
        samples = {name: [] for name, *_ in targets}
        with sync_playwright() as p:
            browser = launch_chromium(p)
            for round_ in range(loads):
                k = round_ % len(targets)  # each target first in turn: none always follows the same one
                for name, server, n, table, settled in targets[k:] + targets[:k]:
                    context = browser.new_context()
                    loopback_only(context, server.url.rstrip("/"))
                    url = server.url + "instructor"
                    _wait_idle(started)
                    first = _visit(context, url, n, table, settled)
                    _wait_idle(started)
                    samples[name].append({"first": first, "repeat": _visit(context, url, n, table, settled)})
                    context.close()
            browser.close()
    finally:
        for server in started:
            server.stop()
    floor_visits, bare_visits = _visits(samples["floor"]), _visits(samples["bare"])
    out = {}
    for name in urls:
        page = _visits(samples[name])
        ratio = {f"{visit}_{key.removesuffix('_s')}": page[visit][key]["median"] / floor_visits[visit][key]["median"]
                 for visit in ("first", "repeat") for key in ("text_s", "table_s")}
        out[name] = {"runs": counts[name], "loads": loads, "page": page, "floor": floor_visits,
                     "bare": bare_visits, "ratio": ratio}
    return out


if __name__ == "__main__":  # python bench/store_scale.py [--page] [SIZE ...]: this bench alone, as JSON
    import tempfile

    page_only = "--page" in sys.argv  # the instructor page alone (stores filled, no other figure)
    chosen = tuple(int(a) for a in sys.argv[1:] if a != "--page") or (1_000, 10_000)
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        print(json.dumps(run(Path(tmp), chosen, 3, import_files=min(10_000, max(chosen)), store=not page_only,
                             page=page_only), indent=1))
