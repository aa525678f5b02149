"""The floor Panel itself imposes: the learner page's text fields, a callback that only echoes.

The same text fields as the learner page at the "Worked row (seed 003)" preset (counted in the
served page): ``Query i``, ``Key i``, ``Value i`` Panel TextInputs for i = 1 … 8, one row per
token with rows 4–8 hidden as at 3 tokens; the ``Tokens`` and ``Row`` IntInputs; the
``Prediction`` and ``Explanation`` TextAreaInputs and the ``Learner`` and ``Label`` TextInputs.
One Bokeh figure whose ``ColumnDataSource`` named ``echo-source`` receives what was typed in a
token field, and nothing else: no attention, no heat maps, no readouts, no checkboxes. Served by
``pn.serve`` with the options app/server.py uses, so the edit-to-update latency of the page can
be read against it.
"""

from __future__ import annotations

import argparse

import panel as pn
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from app.shared.transport import answer_without_nagle_delay

FIELDS = ("Query", "Key", "Value")
TOKENS = 8
SHOWN_TOKENS = 3  # the worked-row preset's token count


def create_baseline() -> pn.viewable.Viewable:
    source = ColumnDataSource({"field": [""], "value": [""]}, name="echo-source")
    fig = figure(width=300, height=200, toolbar_location=None, tools="", x_range=(0, 1),
                 y_range=(0, 1), name="echo-figure")
    fig.text(x=0.5, y=0.5, text="value", source=source)

    def echo(event) -> None:
        with pn.io.unlocked():
            source.data = {"field": [event.obj.name], "value": [event.new]}

    rows = []
    for i in range(1, TOKENS + 1):
        widgets = [pn.widgets.TextInput(name=f"{word} {i}", value="1", width=72) for word in FIELDS]
        for w in widgets:
            w.param.watch(echo, "value")
        rows.append(pn.Column(pn.Row(*widgets, margin=0), visible=i <= SHOWN_TOKENS, margin=0))
    sidebar = pn.Column(pn.widgets.IntInput(name="Tokens", value=SHOWN_TOKENS, width=90), *rows,
                        width=380)
    form = pn.Column(
        pn.pane.Bokeh(fig), pn.widgets.IntInput(name="Row", value=2, width=90),
        pn.widgets.TextAreaInput(name="Prediction", height=80, width=620),
        pn.Row(pn.widgets.TextInput(name="Learner", width=300),
               pn.widgets.TextInput(name="Label", width=300)),
        pn.widgets.TextAreaInput(name="Explanation", height=80, width=620))
    return pn.Row(sidebar, form)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    answer_without_nagle_delay()  # as app/server.py serves
    pn.serve({"/": create_baseline}, port=args.port, address="127.0.0.1", show=False,
             websocket_origin=[f"127.0.0.1:{args.port}", f"localhost:{args.port}"],
             # Bokeh's own names, as app/server.py passes them (shorter ones are ignored).
             check_unused_sessions_milliseconds=10_000, unused_session_lifetime_milliseconds=60_000,
             threaded=False, title="baseline")


if __name__ == "__main__":
    main()
