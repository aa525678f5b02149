"""What one default learner page holds in the server: Python bytes and Bokeh models, per view and per kind.

A diagnosis, not a budget (``classroom`` measures the budget, RSS per open page). The learner
page is built into a Bokeh ``Document`` in process, as ``layer_cost.py`` builds it, at the
default state, with the part below the maps made (at once: not served), and with Bokeh's
container defaults made when first read, as ``serve`` has them
(:func:`app.upstream.make_bokeh_container_defaults_when_first_read`). Printed:

- the whole page: Python memory the document holds (tracemalloc, allocations still alive after
  the build), its Bokeh models, and those of the first paint (before the part below the maps);
- per view: each view built alone over a state of its own into a Document of its own (so the
  bytes include its own param objects and Bokeh models); "page (the rest)" is the page less
  the sum of the views: the page's own panes and layouts;
- per kind: the held bytes by the package that allocated them, the objects a page adds by type
  (param.Parameterized instances, Panel viewables, Bokeh models), the Bokeh models by type and
  stylesheet strings held per model.

``python bench/page_memory.py [--repeats N] [--json] [--page]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path

import panel as pn
import param
from bokeh.document import Document
from bokeh.model import Model

import app.learner.page as page_module
from app.learner.checks import BannerView, ReadoutsView
from app.learner.contributions import ContributionsView
from app.learner.inputs import InputsView
from app.learner.matrices import MatricesView
from app.learner.projections import ProjectionsView
from app.learner.record import PredictionView, RecordView
from app.learner.runs import SavedRunsView
from app.learner.self_check import SelfCheckPanel
from app.learner.state import LearnerState
from app.learner.steps import RowStepsView
from app.store import RunStore, sqlite_url
from app.upstream import make_bokeh_container_defaults_when_first_read

VIEWS = {
    "inputs": InputsView, "prediction": PredictionView, "banner": BannerView,
    "matrices": MatricesView, "projections": ProjectionsView, "readouts": ReadoutsView,
    "steps": RowStepsView, "contributions": ContributionsView, "record": RecordView,
    "self_check": SelfCheckPanel, "runs": SavedRunsView,
}


def _in_document(viewable) -> Document:
    doc = Document()
    root = pn.panel(viewable).get_root(doc)
    if root not in doc.roots:
        doc.add_root(root)
    return doc


def _held(build) -> tuple[int, object]:
    """Bytes still allocated after ``build()`` and what it returned (kept alive while measured)."""
    gc.collect()
    tracemalloc.start()
    out = build()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held, out


def build_page(store: RunStore, first_paint: bool = False):
    """A default learner page over ``store`` in a fresh Document: (page, doc). With
    ``first_paint`` the part below the maps is not made (as a served page before its onload)."""
    saved = pn.state.onload
    if first_paint:
        pn.state.onload = lambda *a, **k: None
    try:
        page = page_module.LearnerPage(store=store)
    finally:
        pn.state.onload = saved
    return page, _in_document(page)


def _page_figures(store: RunStore, repeats: int) -> dict:
    sizes, models = [], 0
    for _ in range(repeats):
        held, (page, doc) = _held(lambda: build_page(store))
        sizes.append(held)
        models = len(doc.models)
        del page, doc
    _, (page, doc) = _held(lambda: build_page(store, first_paint=True))
    return {"kib": statistics.median(sizes) / 1024, "models": models, "first_paint_models": len(doc.models)}


def _view_figures(store: RunStore, repeats: int) -> dict:
    out = {}
    for name, cls in VIEWS.items():
        sizes, models = [], 0
        for _ in range(repeats):
            state = LearnerState(store=store)
            held, (view, doc) = _held(lambda cls=cls, state=state: (v := cls(state=state), _in_document(v)))
            sizes.append(held)
            models = len(doc.models)
            del view, doc, state
        out[name] = {"kib": statistics.median(sizes) / 1024, "models": models}
    return out


def _objects_by_type(store: RunStore) -> dict:
    """What one more page adds, by type: its objects counted before and after it is built."""
    def census() -> Counter:
        gc.collect()
        counts: Counter = Counter()
        for obj in gc.get_objects():
            if isinstance(obj, param.Parameterized):
                kind = "bokeh" if isinstance(obj, Model) else "param"
                counts[(kind, type(obj).__module__.split(".")[0] + "." + type(obj).__name__)] += 1
            elif isinstance(obj, Model):
                counts[("bokeh", type(obj).__name__)] += 1
        return counts
    before = census()
    page, doc = build_page(store)
    after = census()
    added = after - before
    param_added = Counter({k[1]: v for k, v in added.items() if k[0] == "param"})
    by_model = Counter(type(m).__name__ for m in doc.models)
    stylesheet_bytes = Counter()
    for m in doc.models:
        for prop in ("stylesheets",):
            if prop in m.properties():
                for sheet in getattr(m, prop) or []:
                    stylesheet_bytes[type(m).__name__] += len(sheet) if isinstance(sheet, str) else 0
    return {"param_instances": sum(param_added.values()),
            "param_by_type": dict(param_added.most_common(25)),
            "bokeh_models": len(doc.models), "bokeh_by_type": dict(by_model.most_common(30)),
            "stylesheet_string_bytes_by_model": dict(stylesheet_bytes.most_common(10)),
            "panel_panes_and_widgets": sum(v for k, v in param_added.items()
                                           if k.startswith("panel.") and not k.startswith("panel.layout"))}


def _bytes_by_package(store: RunStore) -> dict:
    gc.collect()
    tracemalloc.start(25)
    page, doc = build_page(store)
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    groups: Counter = Counter()
    for stat in snapshot.statistics("traceback"):
        files = [f.filename for f in stat.traceback]
        where = "other"
        # The innermost frame in a package that says what the bytes are for (most recent last).
        for name in reversed(files):
            if "/bokeh/core/property" in name or "/bokeh/core/has_props" in name:
                where = "bokeh properties"
            elif "/bokeh/" in name:
                where = "bokeh (other)"
            elif "/param/" in name:
                where = "param"
            elif "/panel/" in name:
                where = "panel"
            elif "/app/" in name or "/attention_core/" in name:
                where = "app"
            elif "/numpy/" in name:
                where = "numpy"
            else:
                continue
            break
        groups[where] += stat.size
    return {k: round(v / 1024) for k, v in groups.most_common()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--page", action="store_true", help="the whole page's figures only (quick)")
    args = parser.parse_args(argv)
    make_bokeh_container_defaults_when_first_read()  # as served (not on import: bench/upstream.py compares)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(sqlite_url(Path(tmp) / "runs.db"))
        build_page(store)  # warm up: imports and class-level caches are not a page's cost
        if args.page:
            p = _page_figures(store, args.repeats)
            print(f"default learner page: {p['kib']:.0f} KiB held, {p['models']} Bokeh models "
                  f"({p['first_paint_models']} in the first paint)")
            return 0
        for cls in VIEWS.values():
            _in_document(cls(state=LearnerState(store=store)))
        out = {"page": _page_figures(store, args.repeats), "views": _view_figures(store, args.repeats),
               "bytes_by_package_kib": _bytes_by_package(store), **_objects_by_type(store)}
    views = out["views"]
    views["page (the rest)"] = {"kib": out["page"]["kib"] - sum(v["kib"] for v in views.values()),
                                "models": out["page"]["models"] - sum(v["models"] for v in views.values())}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    p = out["page"]
    print(f"default learner page: {p['kib']:.0f} KiB held, {p['models']} Bokeh models "
          f"({p['first_paint_models']} in the first paint)\n")
    print(f"{'view':<20}{'KiB':>8}{'models':>8}")
    for name, v in sorted(views.items(), key=lambda kv: -kv[1]["kib"]):
        print(f"{name:<20}{v['kib']:>8.0f}{v['models']:>8}")
    print("\nheld bytes by the package that allocated them (KiB):")
    for k, v in out["bytes_by_package_kib"].items():
        print(f"  {k:<20}{v:>8}")
    print(f"\nparam.Parameterized instances a page adds (not Bokeh models): {out['param_instances']}")
    for k, v in out["param_by_type"].items():
        print(f"  {k:<40}{v:>5}")
    print(f"\nBokeh models by type ({out['bokeh_models']}):")
    for k, v in out["bokeh_by_type"].items():
        print(f"  {k:<40}{v:>5}")
    print("\nstylesheet text held per model type (bytes):")
    for k, v in out["stylesheet_string_bytes_by_model"].items():
        print(f"  {k:<40}{v:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
