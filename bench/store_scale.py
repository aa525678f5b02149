"""How the run store grows: saves, queries, exports and imports at 1,000 … 100,000 runs, on
SQLite and on PostgreSQL, each beside the least its work must cost, in the same run.

A store of ``n`` runs is filled in one transaction from one real record (seed 003's worked row)
with new ids, times and learner names. Then, for each dialect and size:

- ``save``: 100 concurrent learners (threads of one process, each saving 3 runs after a common
  start, as one server's sessions do) — p50 / p95 of a save — beside the floor: the same saves
  one at a time, nobody else saving.
- ``query``: what the instructor page asks: the count and the newest 20 runs; the same with a
  learner filter; the change token it polls every 2 s; the learners view's count per learner.
- ``export``: the JSON bundle (stored texts) and the CSV (columns, as ``export`` writes it) of
  every run, written to a file, beside the floor: ``SELECT record`` through the driver, written
  to a file as is.
- ``import``: 10,000 record files (a class's downloads) into a new store, beside the floor:
  reading and parsing the same files.

The instructor page in Chromium (ready, and the class picture) is timed at 10,000 runs on SQLite
beside bench/instructor_floor.py, as before the database.
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
    row["export_json_s"] = _timed(lambda: _write(out_file, iter_export_json(store.iter_texts())), repeats)
    row["export_csv_s"] = _timed(lambda: _write(out_file, iter_csv(store.iter_csv_rows())), repeats)
    row["export_floor_s"] = _timed(lambda: _floor_export(store, out_file), repeats)
    out_file.unlink(missing_ok=True)
    newest = [("created_at", "desc")]
    row["page_s"] = _timed(lambda: store.query(sort=newest, limit=20), repeats * 3)
    row["page_filtered_s"] = _timed(lambda: store.query(RunFilter(learner="learner 7"), sort=newest, limit=20),
                                    repeats * 3)
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
        instructor_at: int | None = 10_000) -> dict:
    pg = _postgres()
    dialects = {"sqlite": sqlite_url(workdir / "store-runs" / "runs.db")}
    (workdir / "store-runs").mkdir(exist_ok=True)
    if pg is not None:
        dialects["postgresql"] = pg.new_database()
    result: dict = {"by_dialect": {}, "import": {}}
    try:
        for name, url in dialects.items():
            rows = {}
            with RunStore(url) as store:
                for n in sorted(sizes):
                    made = fill(store, n)
                    reps = repeats if n <= 10_000 else max(1, repeats // 2)
                    rows[str(n)] = {**measure(store, n, workdir, reps), "fill_s": made}
                    print(f"bench: store {name} {n:,} runs measured", file=sys.stderr, flush=True)
                    if name == "sqlite" and n == instructor_at:
                        rows[str(n)]["instructor"] = instructor_ready(workdir / "store-runs", workdir,
                                                                      store.count(), 1 + repeats)
            result["by_dialect"][name] = rows
            target = sqlite_url(workdir / "import.db") if name == "sqlite" else pg.new_database()
            result["import"][name] = imports(target, workdir, import_files)
    finally:
        if pg is not None:
            pg.stop()
    checks = {}
    for name, rows in result["by_dialect"].items():
        big = rows.get("100000")
        if big:
            checks[f"{name}_export_100k"] = {
                "json_s": big["export_json_s"]["median"], "csv_s": big["export_csv_s"]["median"],
                "pass": big["export_json_s"]["median"] <= 5 and big["export_csv_s"]["median"] <= 5}
    result["checks"] = checks
    result["target"] = "export JSON and CSV at 100,000 runs <= 5 s, linear in runs"
    result["pass"] = all(c["pass"] for c in checks.values()) if checks else None
    return result


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


def instructor_ready(directory: Path, workdir: Path, n: int, loads: int) -> dict:
    """Seconds from opening ``/instructor`` until it shows ``n`` runs: the first page after the
    server started, then ``loads - 1`` more pages, each in a new browser context (nothing
    cached). Beside it, alternately, the floor: bench/instructor_floor.py (the same template with
    a 20-row Tabulator and the count) and its ``--bare`` page (the count alone). ``chart_s`` is
    when the class picture holds all ``n`` points; each page is closed only then.
    """
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


if __name__ == "__main__":  # python bench/store_scale.py [SIZE ...]: this bench alone, printed as JSON
    import tempfile

    chosen = tuple(int(a) for a in sys.argv[1:]) or (1_000, 10_000)
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        print(json.dumps(run(Path(tmp), chosen, 3, import_files=min(10_000, max(chosen)), instructor_at=None),
                         indent=1))

