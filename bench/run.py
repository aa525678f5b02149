"""``make bench``: every benchmark beside its baseline, a table, and bench/results.json.

Usage: ``python bench/run.py [--quick] [--only NAME ...] [--largest] [--output PATH]``. ``--quick`` is a
smoke run (about two minutes: fewer repetitions, 10 learners, no 100,000-run store, 1,000 files imported, no wait for
the server's session cleanup); the default is the honest run (under ten minutes on 2 cores).
``latency_layer`` and ``classroom_layer`` are issue 23's budgets at its largest page (a batch of 3,
8 tokens, d_model = d_k = d_v = 4, W_O): edit → update p95 against the echo floor with the same
fields, and server memory per open page (about 5 minutes of a full run, 2.5 of them waiting for
the server's session cleanup; under 2 with ``--quick``). ``--only latency_layer_without_ablation
classroom_layer_without_ablation`` (not in the default run) measures the same page without its
projection-ablation panel, to say what the panel costs. ``--only class_nginx`` (not in the default
run: about half an hour) is issue 25's class of 100 … 300 sessions on 2 processes behind nginx
against 1 process direct, on PostgreSQL and on SQLite (``--quick``: 10 and 20 sessions).
``mode_switch`` (about 2 minutes) times a failure-mode switch at that page as shipped (one layout
per message, app/shared/one_layout.js) against the same page with BokehJS's own layouts.
``--only gc_freeze`` (not in the default run: about 3 minutes) is what ``serve``'s ``gc.freeze()``
after each page saves in full garbage collections (bench/gc_freeze.py).
Servers bind 127.0.0.1 and pages abort any request that would leave them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import browser_latency  # noqa: E402
import class_nginx  # noqa: E402
import classroom  # noqa: E402
import cold_start  # noqa: E402
import core  # noqa: E402
import gc_freeze  # noqa: E402
import grid_cost  # noqa: E402
import mode_switch  # noqa: E402
import store_scale  # noqa: E402
import upstream  # noqa: E402
from common import BENCH, machine  # noqa: E402

NAMES = ("core", "store", "cold_start", "grid", "latency", "classroom", "latency_layer", "classroom_layer",
         "mode_switch", "upstream")
# Diagnoses, run only when named in --only: the layer page without its ablation panel.
EXTRA = ("latency_layer_without_ablation", "classroom_layer_without_ablation", "class_nginx", "gc_freeze")


def _mark(ok) -> str:
    return "n/a" if ok is None else ("pass" if ok else "MISS")


def _f(x, fmt="{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def _store_rows(where: str, n: int, row: dict, passed: bool | None) -> list[tuple]:
    """The store's rows at ``n`` runs: saves, exports against their floor, queries."""
    rows, big = [], n == 100_000
    save = row["save"]
    ratio = save["p50_ms"] / save["floor_p50_ms"]
    rows.append((f"{where}: save p50 / p95 under {save['learners']} learners (ms)",
                 f"{save['p50_ms']:.1f} / {save['p95_ms']:.1f}",
                 f"one saver alone p50 {save['floor_p50_ms']:.1f} (×{ratio:.1f})",
                 "", ""))
    floor = row["export_floor_s"]["median"]
    rows.append((f"{where}: export JSON / CSV (s)",
                 f"{row['export_json_s']['median']:.2f} / {row['export_csv_s']['median']:.2f}",
                 f"SELECT record, written: {floor:.2f} (×{row['export_json_s']['median'] / floor:.1f} / "
                 f"×{row['export_csv_s']['median'] / floor:.1f}); per run "
                 f"{row['export_json_s']['median'] / n * 1e6:.0f} / "
                 f"{row['export_csv_s']['median'] / n * 1e6:.0f} µs",
                 "≤ 5 s, linear" if big else "",
                 _mark(passed) if big else ""))
    rows.append((f"{where}: newest 20 + count / filtered / change token (ms)",
                 f"{row['page_s']['median'] * 1000:.1f} / {row['page_filtered_s']['median'] * 1000:.1f}"
                 f" / {row['change_token_s']['median'] * 1000:.2f}", "", "", ""))
    if "picture_filtered_s" in row:
        rows.append((f"{where}: learner filter: table page, no run matches / class picture's 5,000 (ms)",
                     f"{row['page_filter_none_s']['median'] * 1000:.1f} / "
                     f"{row['picture_filtered_s']['median'] * 1000:.1f}", "", "", ""))
    if "learners_s" in row:
        rows.append((f"{where}: learners view, checkpoints per learner (ms)",
                     f"{row['learners_s']['median'] * 1000:.0f}", "", "", ""))
    return rows


def _instructor_rows(where: str, page: dict, big: bool, passed: bool | None) -> list[tuple]:
    """The instructor page's rows: first text and table's first page, first and repeat visit,
    against the floor (the same template with a 20-row table), the ratio beside the target."""
    rows = []
    for visit, what in (("first", "first visit"), ("repeat", "repeat visit, cached")):
        mine, floor, bare = page["page"][visit], page["floor"][visit], page["bare"][visit]
        text, table_ = page["ratio"][f"{visit}_text"], page["ratio"][f"{visit}_table"]
        rows.append((f"instructor page {where}, {what}: first text / table's first page (s)",
                     f"{mine['text_s']['median']:.2f} / {mine['table_s']['median']:.2f}",
                     f"template + 20-row table {floor['text_s']['median']:.2f} / {floor['table_s']['median']:.2f} "
                     f"(×{text:.2f} / ×{table_:.2f}); bare page {bare['text_s']['median']:.2f}",
                     "≤ 1.3× floor" if big else "", _mark(passed) if big else ""))
    return rows


def _size_note(r: dict) -> str:
    """`` at the layer size (B 3, T 8, d 4, W_O)`` for issue 23's page; nothing for the others."""
    size = r.get("size")
    name = size.get("name") if isinstance(size, dict) else size
    without = "" if r.get("ablation_panel", True) else ", without the ablation panel"
    return f" at the layer size (B 3, T 8, d 4, W_O{without})" if name == "layer" else (
        " at the largest size" if name == "largest" else "")


def _latency_row(r: dict) -> tuple:
    w, b = r["workbench_ms"], r["baseline_ms"]
    fields = r["text_fields"]["all"]
    return (f"browser edit→update{_size_note(r)}: median / p95 (ms)",
            f"{w['median']:.0f} / {w['p95']:.0f}",
            f"echo app, {fields} fields: {b['median']:.0f} / {b['p95']:.0f} (p95 ×{r['p95_ratio']:.2f})",
            "p95 ≤ 1.15× baseline", _mark(r["pass"]))


def _classroom_rows(r: dict) -> list[tuple]:
    rows, note = [], _size_note(r)
    floor = r.get("client_floor_echo_ms", {})
    top = max(r["levels"], key=int)
    for level, row in r["levels"].items():
        ok = r["checks"]["p95_edit_ms_at_top"]["pass"] if level == top else None
        errors = f", {len(row['errors'])} learners failed: {row['errors'][0]}" if row["errors"] else ""
        rows.append((f"classroom{note} {level} sessions: edit median / p95 (ms)",
                     f"{_f(row['edit_ms']['median'], '{:.0f}')} / {_f(row['edit_ms']['p95'], '{:.0f}')} "
                     f"({row['edits_per_s']:.1f} edits/s, server CPU "
                     f"{row['server_cpu_share']:.0%}{errors})",
                     f"echo app, 1 session: {_f(floor.get('median'), '{:.0f}')} / "
                     f"{_f(floor.get('p95'), '{:.0f}')}",
                     "p95 ≤ 250 ms at 100" if level == top and ok is not None else "",
                     _mark(ok) if level == top and ok is not None else ""))
    rss = r["checks"]["rss_per_session_mib"]
    for level, row in r["levels"].items():
        rows.append((f"classroom{note} {level} sessions: RSS, per session (MiB)",
                     f"{row['rss_mib']:.0f}, {row['rss_per_session_mib']:.2f}",
                     f"{r['rss_baseline_mib']:.0f} (idle {r['rss_idle_mib']:.0f})",
                     f"≤ {rss['target']:g} MiB/session at {top}" if level == top else "",
                     _mark(rss["pass"]) if level == top else ""))
    after = r.get("rss_after_close_mib")
    rows.append((f"classroom{note}: RSS after all closed + cleanup (MiB)",
                 _f(after, "{:.0f}") + ("" if after is None else
                                        f" (×{after / r['rss_baseline_mib']:.2f})"),
                 f"{r['rss_baseline_mib']:.0f}", "", ""))
    second = r.get("second_class")
    if second:
        rows.append((f"classroom{note}: peak RSS of a second class of {second['sessions']} after the first "
                     f"closed (MiB)", f"{second['peak_rss_mib']:.0f} (×{second['peak_ratio']:.2f})",
                     f"first class's peak {r['peak_rss_first_class_mib']:.0f}", "≤ 1.10× first",
                     _mark(r["checks"]["second_class_peak_ratio"]["pass"])))
    return rows


def table(results: dict) -> list[tuple[str, str, str, str, str]]:
    """(figure, measured, baseline, target, pass/miss) rows."""
    rows = []
    r = results.get("core")
    if r:
        for T, row in r["by_T"].items():
            rows.append((f"core T={T}: median / p95 (µs)",
                         f"{row['core_us']['median']:.1f} / {row['core_us']['p95']:.1f}",
                         f"{row['floor_us']['median']:.1f} / {row['floor_us']['p95']:.1f} "
                         f"(×{row['median_ratio']:.2f})",
                         "", ""))
    r = results.get("grid")
    if r:
        g, t = r["matrix_grids"], r["text_inputs"]
        rows.append((f"{r['numbers']} input numbers as grids: KiB per page / Bokeh models",
                     f"{g['kib_per_page']:.0f} / {g['bokeh_models']}",
                     f"{t['kib_per_page']:.0f} / {t['bokeh_models']} as TextInputs", "", ""))
    for key in ("latency", "latency_layer", "latency_layer_without_ablation"):
        r = results.get(key)
        if r:
            rows.append(_latency_row(r))
    for key in ("classroom", "classroom_layer", "classroom_layer_without_ablation"):
        r = results.get(key)
        if r:
            rows.extend(_classroom_rows(r))
    if results.get("mode_switch"):
        rows.extend(mode_switch.table_rows(results["mode_switch"]))
    r = results.get("store")
    if r:
        for dialect, by_runs in r["by_dialect"].items():
            for n, row in by_runs.items():
                where = f"store {dialect} {int(n):,} runs"
                checks = {name.removeprefix(f"{dialect}_"): c.get("pass") for name, c in r["checks"].items()
                          if name.startswith(f"{dialect}_")}
                if "save" in row:  # the store's own figures (absent when only the page was timed)
                    rows.extend(_store_rows(where, int(n), row, checks.get("export_100k")))
                if "instructor" in row:
                    rows.extend(_instructor_rows(where, row["instructor"], n == "100000",
                                                 checks.get("instructor_100k")))
        for dialect, imp in r["import"].items():
            rows.append((f"import {imp['files']:,} record files into {dialect} (s)", f"{imp['import_s']:.1f}",
                         f"read + parse the files {imp['floor_read_parse_s']:.2f} (×"
                         f"{imp['import_s'] / imp['floor_read_parse_s']:.0f}); {imp['per_file_ms']:.2f} ms a file",
                         "", ""))
    if results.get("class_nginx"):
        rows.extend(class_nginx.table_rows(results["class_nginx"]))
    if results.get("gc_freeze"):
        rows.extend(gc_freeze.table_rows(results["gc_freeze"]))
    r = results.get("cold_start")
    if r:
        w, b = r["workbench_s"], r["baseline_s"]
        rows.append(("cold start → usable page: median / p95 (s)",
                     f"{w['usable']['median']:.2f} / {w['usable']['p95']:.2f} "
                     f"(HTTP 200 {w['http_200']['median']:.2f})",
                     f"{b['usable']['median']:.2f} / {b['usable']['p95']:.2f}"
                     + (f" (import panel {r['import_panel_s']['median']:.2f})"
                        if "import_panel_s" in r else ""),
                     "≤ 3 s", _mark(r["pass"])))
    r = results.get("upstream")
    if r:
        on, off = r["edit_ms"]["nodelay"], r["edit_ms"]["nagle"]
        rows.append(("echo app in Chromium, edit → echo, websocket with TCP_NODELAY: median / p95 (ms)",
                     f"{on['median']:.0f} / {on['p95']:.0f}",
                     f"without (Tornado's default): {off['median']:.0f} / {off['p95']:.0f}", "", ""))
        for page, row in r["page_js"].items():
            ours, panels = row["ours"], row["panel"]
            rows.append((f"{page} page: JavaScript asked for, MathJax only for TeX (KiB)",
                         f"{ours['kib']:,.0f}" + (" (MathJax)" if ours["mathjax"] else ""),
                         f"Panel's own check: {panels['kib']:,.0f}" + (" (MathJax)" if panels["mathjax"] else ""),
                         "", ""))
        if "container_defaults" in r:
            ours, bokehs = r["container_defaults"]["ours"], r["container_defaults"]["bokeh"]
            rows.append(("learner page in process, Bokeh's container defaults made when first read: "
                         "KiB held / CPU to build and serialize (s)",
                         f"{ours['kib']:,.0f} / {ours['cpu_s']:.2f}",
                         f"all made at once (Bokeh's own): {bokehs['kib']:,.0f} / {bokehs['cpu_s']:.2f}", "", ""))
    return rows


def markdown(rows) -> str:
    head = "| figure | measured | baseline (same run) | target | result |\n|---|---|---|---|---|\n"
    return head + "".join(f"| {' | '.join(row)} |\n" for row in rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, about two minutes")
    parser.add_argument("--only", nargs="+", choices=NAMES + EXTRA, help="run only these benchmarks")
    parser.add_argument("--output", type=Path, default=BENCH / "results.json")
    parser.add_argument("--largest", action="store_true",
                        help="latency and classroom on the largest page: 8 tokens, d_k = d_v = 4")
    args = parser.parse_args(argv)
    quick, chosen = args.quick, args.only or NAMES
    results: dict = {"machine": machine(), "quick": quick}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="attention-bench-") as tmp:
        work = Path(tmp)
        steps = {
            "core": lambda: core.run(repeats=10 if quick else 100, number=100),
            "store": lambda: store_scale.run(
                work, (1_000, 10_000) if quick else (1_000, 10_000, 100_000), 2 if quick else 3,
                import_files=1_000 if quick else 10_000),
            "cold_start": lambda: cold_start.run(work, 2 if quick else 5),
            "grid": grid_cost.run,
            "latency": lambda: browser_latency.run(
                work, 10 if quick else 40, size="largest" if args.largest else "worked_row"),
            "classroom": lambda: classroom.run(
                work, (10,) if quick else (10, 50, 100), 8.0 if quick else 20.0,
                wait_cleanup=not quick, size="largest" if args.largest else "default"),
            # Issue 23's budgets at its largest page; fewer sessions than the class above (the
            # budget is memory per open page, and each of these pages is the largest there is).
            "latency_layer": lambda: browser_latency.run(work, 10 if quick else 30, size="layer"),
            "latency_layer_without_ablation": lambda: browser_latency.run(
                work, 10 if quick else 30, size="layer", ablation=False),
            "classroom_layer": lambda: classroom.run(
                work, (10,) if quick else (10, 30), 8.0 if quick else 15.0, wait_cleanup=not quick, size="layer"),
            "classroom_layer_without_ablation": lambda: classroom.run(
                work, (10,) if quick else (10, 30), 8.0 if quick else 15.0, wait_cleanup=not quick, size="layer",
                ablation=False),
            "mode_switch": lambda: mode_switch.run(work, 1 if quick else 3),
            "upstream": lambda: upstream.run(work, 10 if quick else 30),
            "gc_freeze": lambda: gc_freeze.run(10 if quick else 30),
            "class_nginx": lambda: class_nginx.run(work, (10, 20) if quick else class_nginx.LEVELS,
                                                   25.0 if quick else 20.0),
        }
        for name in NAMES + EXTRA:
            if name not in chosen:
                continue
            t = time.monotonic()
            print(f"bench: {name} …", file=sys.stderr, flush=True)
            results[name] = steps[name]()
            results[name]["bench_seconds"] = round(time.monotonic() - t, 1)
    results["total_seconds"] = round(time.monotonic() - started, 1)
    # Written before the table too: a figure the table cannot show must not cost the whole run.
    args.output.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    rows = table(results)
    results["table_markdown"] = markdown(rows)
    args.output.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    m = results["machine"]
    print(f"\n{m['date']} · {m['nproc']} cores {m['cpu_model']} · Python {m['python']}, "
          f"Panel {m['panel']}, Bokeh {m['bokeh']} · {results['total_seconds']:.0f} s"
          + (" · --quick" if quick else ""))
    print(results["table_markdown"])
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
