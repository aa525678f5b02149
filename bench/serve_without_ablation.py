"""``attention-workbench serve`` with the learner page's projection-ablation panel left out.

A diagnosis for issue 23's budgets (``run.py --only latency_layer_without_ablation``): the panel
recomputes the ablated layer and redraws its two heat maps on every edit, so the same page
without it, in the same run, says what it costs. Its one text field (``Factor``) stays, as a
bare TextInput, so the page's text fields are still the echo floor's. The app is not changed:
this script swaps the panel in ``app.learner.page`` before serving.
``python bench/serve_without_ablation.py --store URL --port N``.
"""

from __future__ import annotations

import argparse

import panel as pn

import app.learner.page as page_module
from app import server


def _stand_in(*_args, **_kwargs) -> pn.viewable.Viewable:
    return pn.widgets.TextInput(name="Factor", value="2", width=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    page_module.AblationPanel = _stand_in
    server.serve(store=args.store, port=args.port, address="127.0.0.1")


if __name__ == "__main__":
    main()
