"""Where one edit's server work goes, at the three pages ``browser_latency.py`` times.

A diagnosis, not a budget (``latency`` and ``latency_layer`` measure the budgets). A learner
page is built into a Bokeh ``Document`` in process, with the part below the maps made (as the
browser's first paint makes it), and put on each size the way ``browser_latency.py`` puts it:

- ``worked_row``: the default page (worked-row preset, 3 tokens, d_k = 1); edit ``Query 3``;
- ``largest``: 8 tokens, d_k = d_v = 4 with values; edit ``Query 3, component 1``;
- ``layer``: issue 23's page (four-token preset, 8 tokens, d_model = d_k = d_v = 4, Batch size
  3, W_O; the projection-ablation panel made); edit ``X item 1 token 3, component 1``.

Each edit arrives as the browser sends it: one cell's label and text to the input grid's
``_handle_msg``, which sets the state, whose watchers update every view. Printed, as JSON, per
page: the edit's wall time from that message until every view has updated its models (median,
min, p95 over ``--edits`` edits, after two warm-up edits) and the process's CPU time in it (on a
shared machine the steadier figure; the page is frozen out of full collections, as ``serve``
freezes it), the edit's ``PATCH-DOC`` message in
bytes (the document's change events of that edit, what Panel then sends) and the bytes per
model name; and with ``--profile`` the functions taking most of the time over all edits
(cProfile, cumulative ms per edit, the heaviest ``--top``).
``python bench/edit_cost.py [--edits N] [--profile] [--top N] [--only worked_row largest layer]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bokeh.document import Document
from bokeh.protocol import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_latency import LAYER, SIZES, edited_label, page_state, query_values  # noqa: E402
from common import patch_bytes, patch_bytes_by_model  # noqa: E402

from app.learner.page import LearnerPage  # noqa: E402
from app.store import RunStore, sqlite_url  # noqa: E402

PAGES = tuple(SIZES)


def build(tmp: Path, size: str) -> tuple[LearnerPage, Document]:
    """A learner page at ``size`` in a fresh Document, everything below the maps made."""
    page = LearnerPage(store=RunStore(sqlite_url(tmp / "runs.db")))
    doc = Document()
    root = page.__panel__().get_root(doc)
    if root not in doc.roots:
        doc.add_root(root)
    page.make_below_maps()
    target = page_state(size)
    s = page.state
    s.apply_preset("four_token_trace" if size in LAYER else "worked_row")
    s.param.update(**{k: getattr(target, k) for k in
                      ("tokens", "d_k", "d_v", "d_model", "batch_size", "use_w_o", "use_values")})
    # As `serve` does once a page is built (app/server.py): a full collection would walk it all.
    gc.collect()
    gc.freeze()
    return page, doc


def _grid_of(page: LearnerPage, label: str):
    return next(g for g in page.inputs.grids if g.visible and any(label in row for row in g.labels))


def measure(tmp: Path, size: str, edits: int, profile: cProfile.Profile | None) -> dict:
    page, doc = build(tmp, size)
    label = edited_label(size)
    grid = _grid_of(page, label)
    events: list = []
    doc.on_change(events.append)
    protocol = Protocol()
    times, cpu, sizes, by_name = [], [], [], Counter()
    for n, text in enumerate(query_values(page_state(size), edits + 2)):
        events.clear()
        msg = {"seq": grid.acked + 1, "label": label, "text": text}
        if profile is not None and n >= 2:
            profile.enable()
        t, c = time.perf_counter(), time.process_time()
        grid._handle_msg(msg)
        elapsed, used = time.perf_counter() - t, time.process_time() - c
        if profile is not None:
            profile.disable()
        changes = [e for e in events if hasattr(e, "to_serializable")]
        if n < 2:
            continue
        times.append(elapsed * 1e3)
        cpu.append(used * 1e3)
        sizes.append(patch_bytes(protocol, changes))
        if n == 2:
            by_name.update(patch_bytes_by_model(protocol, changes))
    gc.unfreeze()
    times.sort()
    return {"page": size, "edited": label, "edits": len(times),
            "edit_ms": {"median": round(statistics.median(times), 2), "min": round(times[0], 2),
                        "p95": round(times[max(0, round(0.95 * len(times)) - 1)], 2)},
            "edit_cpu_ms": {"median": round(statistics.median(cpu), 2), "min": round(min(cpu), 2)},
            "patch_bytes": int(statistics.median(sizes)), "change_events": len(changes),
            "patch_bytes_by_model": dict(by_name.most_common(12))}


def top_functions(profile: cProfile.Profile, edits: int, top: int) -> list[str]:
    """The ``top`` functions by cumulative time, in ms per edit, as ``ms  file:line(name)``."""
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)[:top]
    out = []
    for (file, line, name), (_cc, _nc, tt, ct, _callers) in rows:
        where = "/".join(Path(file).parts[-3:]) if file != "~" else ""
        out.append(f"{ct / edits * 1e3:7.2f} cum {tt / edits * 1e3:6.2f} own  {where}:{line}({name})")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--only", nargs="+", choices=PAGES, default=list(PAGES))
    args = parser.parse_args(argv)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.only:
            profile = cProfile.Profile() if args.profile else None
            row = measure(Path(tmp) / size if Path(tmp, size).mkdir() is None else None,
                          size, args.edits, profile)
            if profile is not None:
                row["profile_ms_per_edit"] = top_functions(profile, args.edits, args.top)
            out.append(row)
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
