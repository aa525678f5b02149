"""An editable grid of number fields: one matrix (or several side by side) as one widget.

Used for the learner's inputs: the token table (each token's query, key and value components,
or its row of X, and its padding tick) and the projections W_Q, W_K, W_V. Texts are kept as
typed; parsing and messages are the state's job, which hands each cell's message back
(:attr:`MatrixGrid.errors`).
"""

from __future__ import annotations

import panel as pn
import param
from panel.custom import JSComponent


class MatrixGrid(JSComponent):
    """One editable grid of texts, a labelled ``<input>`` per cell.

    A custom component because one Panel TextInput per cell costs a widget model per number
    (up to 96 on the largest page), over the page's memory and latency budget (bench/README.md).

    Like a TextInput, a cell's text arrives in :attr:`value` on Enter or when the cell is left.
    Each column is as wide as its longest text, as it is typed, so a number always shows whole.
    Every cell has its accessible name (:attr:`labels`); a message in :attr:`errors` marks its
    cell (``aria-invalid``) and is shown under that row with ``role="alert"``.

    The browser sends each edit alone (one cell's label and text, or one row's tick), counted;
    the grid applies it to its current :attr:`value` (or :attr:`checks`) and answers with the
    count in :attr:`acked`. A cell being typed in, or whose edit is not acknowledged yet, keeps
    its text when a value the server sent earlier arrives; the server's texts are put into the
    cells in place, so the cell with focus keeps it and its caret.
    """

    value = param.List(default=[], doc="Rows of texts (strings), as the grid shows them.")
    labels = param.List(default=[], doc="Rows of accessible names, one per cell; the grid's shape.")
    groups = param.List(default=[], doc="Column groups left to right: [title, number of columns].")
    row_headers = param.List(default=[], doc="Each row's header (default: its number from 1).")
    corner = param.String(default="", doc="Header of the row-header column.")
    caption = param.String(default="", doc="The accessible name of the whole grid.")
    checks = param.List(default=[], doc="Each row's tick, when check_labels are given.")
    check_labels = param.List(default=[], doc="Each row's tick label (none: no tick column).")
    check_title = param.String(default="", doc="Header of the tick column.")
    errors = param.Dict(default={}, doc="Message per cell label; other labels are ignored.")
    acked = param.Integer(default=0, doc="The count of the browser's last edit applied here.")

    _esm = "grid.js"
    _stylesheets = ["grid.css"]

    def _handle_msg(self, msg: object) -> None:
        """Apply one edit from the browser, ``{"seq", "label", "text"}`` or ``{"seq", "tick",
        "checked"}``, to the grid as it is now (a preset may have changed it since the browser
        drew it), then acknowledge ``seq``. An edit of a cell no longer in the grid is dropped.
        """
        if not isinstance(msg, dict) or not isinstance(msg.get("seq"), int):
            return
        update: dict = {}
        label, tick = msg.get("label"), msg.get("tick")
        if isinstance(label, str) and isinstance(msg.get("text"), str):
            for i, row in enumerate(self.labels):
                if label in row:
                    value = [list(r) for r in self.value]
                    value += [[] for _ in range(i + 1 - len(value))]
                    j = row.index(label)
                    value[i] += [""] * (j + 1 - len(value[i]))
                    value[i][j] = msg["text"]
                    update["value"] = value
                    break
        elif isinstance(tick, int) and 0 <= tick < len(self.check_labels):
            checks = [bool(c) for c in self.checks]
            checks += [False] * (tick + 1 - len(checks))
            checks[tick] = bool(msg.get("checked"))
            update["checks"] = checks
        # Held: the answer and everything the edit changes on the page reach it as one patch.
        # The count last: the browser lets go of the cell once its new value is there.
        with pn.io.hold():
            self.param.update(**update, acked=max(self.acked, msg["seq"]))
