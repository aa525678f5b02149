"""The floor Panel itself imposes: the workbench's inputs, a callback that only echoes.

Same widgets as the learner page (``Query 1`` … ``Value 8`` TextInputs, a ``Tokens`` IntInput),
one Bokeh figure whose ``ColumnDataSource`` named ``echo-source`` receives the typed text, and
nothing else: no attention, no heat-map formatting, no readouts. Served by ``pn.serve`` with the
options app/server.py uses, so the edit-to-update latency of the workbench can be read against it.
"""

from __future__ import annotations

import argparse

import panel as pn
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from app.shared.transport import answer_without_nagle_delay

FIELDS = ("Query", "Key", "Value")
TOKENS = 8


def create_baseline() -> pn.viewable.Viewable:
    source = ColumnDataSource({"field": [""], "value": [""]}, name="echo-source")
    fig = figure(width=300, height=200, toolbar_location=None, tools="", x_range=(0, 1),
                 y_range=(0, 1), name="echo-figure")
    fig.text(x=0.5, y=0.5, text="value", source=source)

    def echo(event) -> None:
        with pn.io.unlocked():
            source.data = {"field": [event.obj.name], "value": [event.new]}

    columns = []
    for word in FIELDS:
        widgets = [pn.widgets.TextInput(name=f"{word} {i}", value="1", width=90)
                   for i in range(1, TOKENS + 1)]
        for w in widgets:
            w.param.watch(echo, "value")
        columns.append(pn.Column(*widgets))
    return pn.Row(pn.Column(pn.widgets.IntInput(name="Tokens", value=3, width=120), pn.Row(*columns)),
                  pn.pane.Bokeh(fig))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    answer_without_nagle_delay()  # as app/server.py serves
    pn.serve({"/": create_baseline}, port=args.port, address="127.0.0.1", show=False,
             websocket_origin=[f"127.0.0.1:{args.port}", f"localhost:{args.port}"],
             check_unused_sessions=10_000, unused_session_lifetime=60_000, threaded=False,
             title="baseline")


if __name__ == "__main__":
    main()
