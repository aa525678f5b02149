"""What ``serve``'s ``gc.freeze()`` after each page (app/server.py) is worth: full collections.

Two fresh interpreters, one after the other, each build ``pages`` learner pages into Bokeh
documents in process (as ``layer_cost.py`` builds one) over one SQLite store, then edit
``Query 3`` of every page ``edits`` times; one calls ``app.server._out_of_full_collections``
after each page, as ``serve`` does once a page has loaded, the other does not. ``gc.callbacks``
times every full (generation 2) collection Python starts on its own meanwhile: each one stops
every session of a served process. At the end one explicit ``gc.collect()`` is timed: what
the collection of closed pages costs with that many pages open (``serve`` unfreezes before it,
once closed pages number a quarter of the open ones; this says what the pages cost a full
collection).

``python bench/gc_freeze.py [--pages N] [--edits N]``; ``make bench ARGS='--only gc_freeze'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _child(pages: int, edits: int, freeze: bool) -> dict:
    import gc

    from bokeh.document import Document

    from app.learner.page import LearnerPage
    from app.server import _out_of_full_collections
    from app.store import RunStore, sqlite_url

    pauses: list[float] = []
    started = [0.0]

    def timed(phase: str, info: dict) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                pauses.append(time.perf_counter() - started[0])

    gc.callbacks.append(timed)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(sqlite_url(Path(tmp) / "runs.db"))
        built = []
        t = time.perf_counter()
        for _ in range(pages):
            page, doc = LearnerPage(store=store), Document()
            root = page.__panel__().get_root(doc)
            if root not in doc.roots:
                doc.add_root(root)
            built.append((page, doc))
            if freeze:
                _out_of_full_collections()
        build_s = time.perf_counter() - t
        during_build, pauses[:] = list(pauses), []
        t = time.perf_counter()
        for k in range(edits):
            for page, _doc in built:
                page.state.set_token_text("queries", 2, f"{1 + 0.1 * (k + 1):.1f}")
        edit_s = time.perf_counter() - t
        during_edits = list(pauses)
        gc.callbacks.remove(timed)
        t = time.perf_counter()
        gc.collect()
        collect_s = time.perf_counter() - t
        store.close()
    return {"freeze": freeze, "pages": pages, "edits_per_page": edits, "build_s": build_s, "edit_s": edit_s,
            "full_collections_building": len(during_build), "full_collection_s_building": sum(during_build),
            "longest_full_collection_s_building": max(during_build, default=0.0),
            "full_collections_editing": len(during_edits), "full_collection_s_editing": sum(during_edits),
            "explicit_collect_s": collect_s, "load": os.getloadavg()}


def run(pages: int = 30, edits: int = 5) -> dict:
    """Both arms in fresh interpreters, without the freeze first."""
    result: dict = {"pages": pages, "edits_per_page": edits}
    for freeze in (False, True):
        out = subprocess.run([sys.executable, __file__, "--child", "--pages", str(pages), "--edits", str(edits)]
                             + (["--freeze"] if freeze else []), cwd=ROOT, capture_output=True, text=True,
                             check=True, timeout=1800)
        result["with_freeze" if freeze else "without"] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def table_rows(r: dict) -> list[tuple[str, str, str, str, str]]:
    w, o = r["with_freeze"], r["without"]
    return [
        (f"gc_freeze: full collections while {r['pages']} pages are built (count, total s, longest s)",
         f"{w['full_collections_building']}, {w['full_collection_s_building']:.2f}, "
         f"{w['longest_full_collection_s_building']:.2f}",
         f"without the freeze: {o['full_collections_building']}, {o['full_collection_s_building']:.2f}, "
         f"{o['longest_full_collection_s_building']:.2f}", "", ""),
        (f"gc_freeze: build {r['pages']} pages / edit each {r['edits_per_page']}× (s)",
         f"{w['build_s']:.1f} / {w['edit_s']:.1f}", f"without: {o['build_s']:.1f} / {o['edit_s']:.1f}", "", ""),
        ("gc_freeze: one explicit full gc.collect() with the pages open (ms)",
         f"{w['explicit_collect_s'] * 1e3:.0f}", f"without: {o['explicit_collect_s'] * 1e3:.0f}", "", ""),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--freeze", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.pages, args.edits, args.freeze)))
    else:
        print(json.dumps(run(args.pages, args.edits), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
