"""What one page and one edit cost at issue 23's layer size, with and without the ablation panel.

A diagnosis, not a budget: ``latency_layer`` and ``classroom_layer`` measure the budgets; this
says where they go. The learner page is built into a Bokeh ``Document`` in process (as
``grid_cost.py`` builds its pages), set to the layer size the way ``browser_latency.py`` sets it
(four-token preset, 8 tokens, d_model = d_k = d_v = 4, Batch size 3, W_O), and then:

- **memory**: Python memory the document holds (tracemalloc) and its Bokeh models;
- **an edit**: ``X item 1 token 3, component 1`` set on the state, timed until every view has
  updated its models (the server's work before Panel sends the patch), and the patch itself:
  the document's change events of that edit as one ``PATCH-DOC`` message, its bytes in total and
  per model name (what BokehJS then has to apply and draw).

"Without" builds the same page with the ablation panel replaced by an empty column (this
script's stand-in; the app is not changed), so the difference is what the panel costs.
``python bench/layer_cost.py [--edits N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from unittest import mock

import panel as pn
from bokeh.document import Document
from bokeh.protocol import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_latency import page_state, query_values  # noqa: E402
from common import patch_bytes, patch_bytes_by_model  # noqa: E402

import app.learner.page as page_module  # noqa: E402
from app.store import RunStore, sqlite_url  # noqa: E402


def _build(tmp: Path, ablation: bool):
    """A learner page at the layer size in a fresh Document; returns (page, doc, root)."""
    with mock.patch.object(page_module, "AblationPanel",
                           page_module.AblationPanel if ablation else (lambda *a, **k: pn.Column())):
        page = page_module.LearnerPage(store=RunStore(sqlite_url(tmp / "runs.db")))
    doc = Document()
    root = page.__panel__().get_root(doc)
    if root not in doc.roots:
        doc.add_root(root)
    target = page_state("layer")
    with pn.io.hold(doc):
        page.state.apply_preset("four_token_trace")
        page.state.param.update(**{k: getattr(target, k) for k in
                                   ("tokens", "d_k", "d_v", "d_model", "batch_size", "use_w_o")})
    return page, doc, root


def measure(tmp: Path, ablation: bool, edits: int) -> dict:
    tracemalloc.start()
    page, doc, root = _build(tmp, ablation)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    events: list = []
    doc.on_change(lambda event: events.append(event))
    texts = query_values(page_state("layer"), edits + 2)
    times, sizes, by_name = [], [], Counter()
    protocol = Protocol()
    for n, text in enumerate(texts):
        events.clear()
        t = time.perf_counter()
        page.state.set_token_text("x", 2, text)
        elapsed = time.perf_counter() - t
        changes = [e for e in events if hasattr(e, "to_serializable")]
        if n >= 2:
            times.append(elapsed * 1e3)
            sizes.append(patch_bytes(protocol, changes))
            if n == 2:
                by_name.update(patch_bytes_by_model(protocol, changes))
    return {"ablation_panel": ablation, "python_kib": held / 1024, "bokeh_models": len(doc.models),
            "edit_ms": {"median": statistics.median(times), "min": min(times)},
            "patch_kib": statistics.median(sizes) / 1024,
            "patch_kib_by_model": {k: round(v / 1024, 1) for k, v in by_name.most_common(12)}}


def main(argv=None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        # Alternating, so both see the same machine.
        out = [measure(Path(tmp), ablation, args.edits) for ablation in (True, False, True, False)]
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
