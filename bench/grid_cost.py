"""What the input grid buys: 96 numbers as MatrixGrids against 96 Panel TextInputs.

The largest learner page (8 tokens, d_k = d_v = 4, values on) shows 8 × (4 + 4 + 4) = 96
numbers. Each variant is built into a fresh Bokeh document the way a served session builds it
(``get_root``), ``REPEATS`` times; the figures are the Python memory each document holds
(tracemalloc, allocations still alive after the build), its Bokeh model count and the size of
its first document message (``doc.to_json``). Run: ``.venv/bin/python bench/grid_cost.py``.
"""

from __future__ import annotations

import gc
import json
import statistics
import tracemalloc

import panel as pn
from bokeh.document import Document
from bokeh.protocol import Protocol

from app.learner.inputs import grid_view
from app.learner.state import LearnerState
from app.shared.grid import MatrixGrid

REPEATS = 5


def as_grids() -> pn.viewable.Viewable:
    """The page's way: the 96 numbers in the page's two grids (queries and keys, then values)."""
    state = LearnerState(tokens=8, d_k=4, d_v=4, use_values=True)
    return pn.Column(*(MatrixGrid(**grid_view(state, fields))
                       for fields in (["queries", "keys"], ["values"])))


def as_text_inputs() -> pn.viewable.Viewable:
    """One Panel TextInput per number, labelled as the page labels its cells."""
    words = ("Query", "Key", "Value")
    return pn.Column(*(pn.Row(*(pn.widgets.TextInput(name=f"{w} {i}, component {c}", value="0", width=45)
                                for w in words for c in range(1, 5)))
                       for i in range(1, 9)))


def measure(build) -> dict:
    sizes, models, message = [], 0, 0
    for _ in range(REPEATS):
        gc.collect()
        tracemalloc.start()
        doc = Document()
        root = build().get_root(doc)
        doc.add_root(root)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        sizes.append(held / 1024)
        models = len(doc.models)
        message = len(Protocol().create("PULL-DOC-REPLY", "0", doc).content_json)
    return {"kib_per_page": round(statistics.median(sizes), 1), "bokeh_models": models,
            "document_json_kib": round(message / 1024, 1)}


def run() -> dict:
    measure(as_grids)  # warm up: imports and class-level caches are not a page's cost
    measure(as_text_inputs)
    grids, inputs = measure(as_grids), measure(as_text_inputs)
    return {"numbers": 96, "matrix_grids": grids, "text_inputs": inputs,
            "kib_saved_per_page": round(inputs["kib_per_page"] - grids["kib_per_page"], 1)}


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
