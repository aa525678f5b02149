"""The floor Panel itself imposes: the learner page's text fields, a callback that only echoes.

The same text fields as the learner page in the size benchmarked (counted in the served page):
one Panel TextInput per number the page's input grids show, named as the page names its cells
(``Query i`` at width 1, else ``Query i, component c``; ``Key …``, ``Value …``) for the
``--tokens`` shown, ``--width`` (d_k = d_v) and values; with ``--batch B`` the page in matrix mode
instead (issue 23's layer): ``X item b token i, component c`` for each of the ``B`` items, ``W_Q``,
``W_K``, ``W_V`` (``--d-model`` rows × ``--width``) and ``W_O`` (``--width`` × ``--d-model``) as
``W_Q row r, column c``, and the projection-ablation panel's ``Factor`` TextInput; the ``Tokens`` and ``Row`` IntInputs;
the ``Prediction``, ``Explanation`` and ``Generated test`` (issue 16) TextAreaInputs and the
``Learner`` and ``Label`` TextInputs. One Bokeh figure whose ``ColumnDataSource`` named
``echo-source`` receives what was typed in a number field, and nothing else: no attention, no
heat maps, no readouts, no checkboxes. Served by ``pn.serve`` with the options app/server.py
uses, so the edit-to-update latency of the page can be read against it. The defaults are the "Worked row (seed 003)"
preset (3 tokens, one number each, values on); ``--tokens 8 --width 4`` is the largest page.
"""

from __future__ import annotations

import argparse

import panel as pn
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from app.upstream import answer_without_nagle_delay

FIELDS = ("Query", "Key", "Value")


def field_names(tokens: int, width: int) -> list[str]:
    """The page's cell names, token by token: ``Query 1`` … at width 1, else with components."""
    return [f"{word} {i}" if width == 1 else f"{word} {i}, component {c}"
            for i in range(1, tokens + 1) for word in FIELDS for c in range(1, width + 1)]


def layer_field_names(batch: int, tokens: int, width: int, d_model: int) -> list[str]:
    """The matrix-mode page's cell names with a batch and W_O (app/learner/state.py's
    ``cell_label``): each item's X, then W_Q, W_K, W_V (d_model × width) and W_O (width × d_model)."""
    xs = [f"X item {b} token {i}, component {c}" for b in range(1, batch + 1)
          for i in range(1, tokens + 1) for c in range(1, d_model + 1)]
    ws = [f"{w} row {r}, column {c}" for w in ("W_Q", "W_K", "W_V")
          for r in range(1, d_model + 1) for c in range(1, width + 1)]
    w_o = [f"W_O row {r}, column {c}" for r in range(1, width + 1) for c in range(1, d_model + 1)]
    return xs + ws + w_o


def create_baseline(tokens: int = 3, width: int = 1, batch: int | None = None,
                    d_model: int = 4) -> pn.viewable.Viewable:
    source = ColumnDataSource({"field": [""], "value": [""]}, name="echo-source")
    fig = figure(width=300, height=200, toolbar_location=None, tools="", x_range=(0, 1),
                 y_range=(0, 1), name="echo-figure")
    fig.text(x=0.5, y=0.5, text="value", source=source)

    def echo(event) -> None:
        with pn.io.unlocked():
            source.data = {"field": [event.obj.name], "value": [event.new]}

    names = field_names(tokens, width) if batch is None else layer_field_names(batch, tokens, width, d_model)
    widgets = [pn.widgets.TextInput(name=name, value="1", width=45) for name in names]
    for w in widgets:
        w.param.watch(echo, "value")
    per_row = 3 * width if batch is None else d_model
    rows = [pn.Row(*widgets[n:n + per_row], margin=0) for n in range(0, len(widgets), per_row)]
    sidebar = pn.Column(pn.widgets.IntInput(name="Tokens", value=tokens, width=90), *rows, width=420)
    form = pn.Column(
        pn.pane.Bokeh(fig), pn.widgets.IntInput(name="Row", value=2, width=90),
        pn.widgets.TextAreaInput(name="Prediction", height=80, width=620),
        pn.Row(pn.widgets.TextInput(name="Learner", width=300),
               pn.widgets.TextInput(name="Label", width=300)),
        pn.widgets.TextAreaInput(name="Explanation", height=80, width=620),
        pn.widgets.TextAreaInput(name="Generated test", height=200, width=620),
        # The projection-ablation panel's one text field, shown in matrix mode.
        *([pn.widgets.TextInput(name="Factor", value="2", width=90)] if batch is not None else []))
    return pn.Row(sidebar, form)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=3, help="tokens shown (default 3)")
    parser.add_argument("--width", type=int, default=1, help="d_k = d_v (default 1)")
    parser.add_argument("--batch", type=int, default=None,
                        help="matrix mode with W_O and this many batch items (issue 23's layer)")
    parser.add_argument("--d-model", type=int, default=4, help="d_model in matrix mode (default 4)")
    parser.add_argument("--nagle", action="store_true",
                        help="leave Nagle's algorithm on, as Tornado does (bench/upstream.py's comparison)")
    args = parser.parse_args()
    if not args.nagle:
        answer_without_nagle_delay()  # as app/server.py serves

    def page():
        return create_baseline(args.tokens, args.width, args.batch, args.d_model)

    pn.serve({"/": page}, port=args.port, address="127.0.0.1", show=False,
             websocket_origin=[f"127.0.0.1:{args.port}", f"localhost:{args.port}"],
             # Bokeh's own names, as app/server.py passes them (shorter ones are ignored).
             check_unused_sessions_milliseconds=10_000, unused_session_lifetime_milliseconds=60_000,
             threaded=False, title="baseline")


if __name__ == "__main__":
    main()
