"""The floor of the instructor page's readiness: the same template, a 20-row Tabulator, a count.

``BootstrapTemplate`` with the instructor page's title and header colour (no busy indicator), a
``Tabulator`` showing 20 rows of the table's columns, and the ``runs-total`` text the benchmark
waits for, holding ``--runs``. No store, no filters, no chart: what any Panel page of this shape
costs a fresh browser to show. Served by ``pn.serve`` with the options app/server.py uses.

With ``--bare`` the page is only the count, in one HTML pane in a ``pn.Column``: no template,
no table. That is what the emptiest Panel page costs a fresh browser on this machine (BokehJS
and Panel's bundles fetched and compiled, the document pulled over the websocket and drawn).
"""

from __future__ import annotations

import argparse

import pandas as pd
import panel as pn

from app.upstream import answer_without_nagle_delay


def create_floor(runs: int) -> pn.template.BootstrapTemplate:
    rows = 20
    frame = pd.DataFrame({
        "created (local)": ["2025-01-06 09:00:00"] * rows, "created (UTC)": ["2025-01-06 09:00:00"] * rows,
        "learner": [f"learner {n}" for n in range(rows)], "label": ["worked row"] * rows,
        "causal": [True] * rows, "mask after softmax": [False] * rows, "mode": ["correct, causal"] * rows,
        "tokens": [3] * rows, "total future-token weight": [0.0] * rows, "smallest row sum": [1.0] * rows,
        "failed checks": ["none"] * rows, "prediction": ["row 2 cannot read token 3"] * rows,
        "explanation": [""] * rows})
    table = pn.widgets.Tabulator(frame, show_index=False, disabled=True, sizing_mode="stretch_width",
                                 layout="fit_data_table")
    count = pn.pane.HTML(f"<p><span data-testid='runs-total'>{runs}</span> runs</p>")
    template = pn.template.BootstrapTemplate(
        title="Self-attention workbench · Instructor", header_background="#37474f", busy_indicator=None)
    template.main.append(pn.Column(count, table, sizing_mode="stretch_width"))
    return template


def create_bare(runs: int) -> pn.Column:
    return pn.Column(pn.pane.HTML(f"<p><span data-testid='runs-total'>{runs}</span> runs</p>"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--bare", action="store_true", help="only the count: no template, no table")
    args = parser.parse_args()
    from panel.io.resources import LOCAL_DIST

    def build():
        pn.state.curdoc.template_variables["dist_url"] = LOCAL_DIST
        return create_bare(args.runs) if args.bare else create_floor(args.runs)
    answer_without_nagle_delay()  # as app/server.py serves
    pn.serve({"/instructor": build}, port=args.port, address="127.0.0.1", show=False,
             websocket_origin=[f"127.0.0.1:{args.port}", f"localhost:{args.port}"],
             check_unused_sessions_milliseconds=10_000, unused_session_lifetime_milliseconds=60_000,
             threaded=False, title="floor")


if __name__ == "__main__":
    main()
