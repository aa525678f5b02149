"""Thin views over :class:`app.state.WorkbenchState`: inputs, heat maps, readouts, checks.

Every view builds its own widgets in ``__init__``, so each browser session gets its own.
Learner text is only ever put on the page escaped (``html.escape``) or as plain-text cells.
"""

from __future__ import annotations

import html

import numpy as np
import panel as pn
import param
from bokeh.models import Column as BokehColumn
from bokeh.models import Div, Spinner, TextInput
from bokeh.models import Row as BokehRow

from app.shared.compare import TABLE_CSS, num
from app.shared.heatmap import HeatMap
from app.shared.widgets import ButtonGroup, LabelledCheckboxes, in_one_patch, like_the_first_paint
from app.state import PRESETS, WorkbenchState

_TOKEN_FIELDS = (("queries", "Query"), ("keys", "Key"), ("values", "Value"))


class InputsView(pn.viewable.Viewer):
    """Token count, one labelled text field per query/key/value, the two mask toggles, presets.

    A page holds only the fields it has shown: token fields up to the largest token count used,
    ``Value i`` fields once values are switched on, a message pane once there is a message.
    Most learners never raise the token count or type something invalid, and every widget is a
    Bokeh model the server keeps (some 30 KiB of memory) and ships for each open page. The
    presets (:class:`app.shared.widgets.ButtonGroup`) and the three toggles
    (:class:`app.shared.widgets.LabelledCheckboxes`) are one model each for the same reason.
    """

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # Not from_param, and no start/end: with bounds the browser silently keeps an out-of-range
        # number in the field without sending it. Here it reaches _set_tokens and gets a message.
        # A plain Bokeh Spinner, the model Panel's IntInput wraps, in the same Bokeh layout as the
        # token fields.
        self.tokens = Spinner(title="Tokens", value=s.tokens, mode="int", step=1, width=120,
                              margin=(5, 10, 5, 10))
        self.tokens_message: Div | None = None  # built with the first message
        self.tokens.on_change("value", in_one_patch(lambda _attr, _old, new: s.set_tokens(new)))
        s.param.watch(self._show_tokens, "tokens")
        s.param.watch(self._sync_tokens_message, "tokens_error")
        # The token fields are plain Bokeh TextInputs (the model a Panel TextInput wraps) in one
        # Bokeh layout and one Panel pane: a Panel widget costs the server some 25 KiB per page,
        # its bare Bokeh model a third of that. Every field is labelled "Query i", "Key i",
        # "Value i", so the columns need no heading.
        self.fields: dict[str, list[TextInput]] = {f: [] for f, _ in _TOKEN_FIELDS}
        self.messages: dict[str, Div] = {}
        # One row per token (Query i, Key i, Value i) and each field's message right under its
        # token's row: a message inside a column of queries pushed that column's later fields
        # below their keys.
        self._rows: list[BokehRow] = []
        self._grid = BokehColumn(children=[])
        self._top = BokehColumn(children=[self.tokens, self._grid])
        self.toggles = LabelledCheckboxes.for_params(s, {
            "use_values": "Use values (adds output and contributions)",
            "causal": "Causal mask",
            "mask_after_softmax": "Mask after softmax (broken)",
        }, margin=(5, 10))
        self.mask_note: pn.pane.HTML | None = None  # built when there is first something to say
        keys = [*PRESETS, "reset"]
        self.presets = ButtonGroup(
            heading="Presets", labels=[p["label"] for p in PRESETS.values()] + ["Reset"],
            on_press=lambda i: s.apply_preset(keys[i]), margin=(10, 10))
        s.param.watch(self._sync_texts, ["queries", "keys", "values"])
        s.param.watch(self._sync_fields, ["tokens", "use_values", "field_errors"])
        s.param.watch(self._sync_mask_note, ["causal", "mask_after_softmax", "tokens"])
        self._layout = pn.Column(
            pn.pane.Bokeh(self._top, margin=0),
            self.toggles,
            self.presets,
        )
        self._sync_fields()
        self._sync_mask_note()

    def _show_tokens(self, *events) -> None:
        with pn.io.unlocked():
            self.tokens.value = self.state.tokens

    def _sync_tokens_message(self, *events) -> None:
        message = self.state.tokens_error
        with pn.io.unlocked():
            if not message:
                if self.tokens_message is not None:
                    self.tokens_message.visible = False
                self.tokens.value = self.state.tokens  # a preset or reset replaced the bad count
                return
            if self.tokens_message is None:
                self.tokens_message = Div(text="", margin=(0, 10, 5, 10), stylesheets=[_ERROR_CSS])
                self._top.children.insert(1, self.tokens_message)
            self.tokens_message.text = f'<span role="alert">{html.escape(message)}</span>'
            self.tokens_message.visible = True

    def _add_field(self, field: str, word: str) -> None:
        s, i = self.state, len(self.fields[field])
        # A Bokeh TextInput's value, like Panel's, arrives on Enter or when the field is left.
        w = TextInput(title=f"{word} {i + 1}", value=getattr(s, field)[i], width=90,
                      margin=(5, 10, 5, 10))
        w.on_change("value", in_one_patch(lambda _attr, _old, new: s.set_token_text(field, i, new)))
        self.fields[field].append(w)
        # Fields are added queries, then keys, then values, so each row keeps that order.
        if i == len(self._rows):
            self._rows.append(BokehRow(children=[]))
            self._grid.children.append(self._rows[i])
        self._rows[i].children.append(w)

    # Bare Bokeh models changed from a Panel callback need Panel's unlocked() to reach the
    # browser, as in app.shared.heatmap.
    def _sync_texts(self, *events):
        with pn.io.unlocked():
            for field, widgets in self.fields.items():
                for w, text in zip(widgets, getattr(self.state, field), strict=False):
                    if w.value != text:
                        w.value = text

    def _sync_fields(self, *events):
        s = self.state
        with pn.io.unlocked():
            for field, word in _TOKEN_FIELDS:
                shown_field = field != "values" or s.use_values
                if shown_field:
                    while len(self.fields[field]) < s.tokens:
                        self._add_field(field, word)
                for i, w in enumerate(self.fields[field]):
                    w.visible = shown_field and i < s.tokens
                    self._sync_message(i, w, s.field_errors.get(w.title, ""))
            for i, row in enumerate(self._rows):
                row.visible = i < s.tokens

    def _sync_message(self, token: int, w: TextInput, message: str) -> None:
        div = self.messages.get(w.title)
        if div is None:
            if not message:
                return
            div = self.messages[w.title] = Div(text="", margin=(0, 10, 5, 10), visible=False,
                                               width=310, stylesheets=[_ERROR_CSS])
            children = self._grid.children
            at = children.index(self._rows[token]) + 1
            while at < len(children) and isinstance(children[at], Div):  # its row's other messages
                at += 1
            children.insert(at, div)
        text = f'<span role="alert">{html.escape(message)}</span>' if message else ""
        if div.text != text:
            div.text = text
        div.visible = bool(message) and w.visible
        stylesheets = [_FIELD_ERROR_CSS] if message else []
        if list(w.stylesheets) != stylesheets:
            w.stylesheets = stylesheets

    def _sync_mask_note(self, *events):
        s = self.state
        if s.mask_after_softmax and not s.causal:
            note = ("The causal mask is off, so <b>Mask after softmax (broken)</b> has nothing to "
                    "act on: no cell is masked before or after softmax.")
        elif not s.causal:
            note = "The causal mask is off: every token can read future tokens."
        elif s.mask_after_softmax and s.tokens == 1:
            note = ("With one token there is no future token, so <b>Mask after softmax "
                    "(broken)</b> has nothing to act on.")
        else:
            note = ""
        if self.mask_note is None:
            if not note:
                return
            with like_the_first_paint():
                self.mask_note = pn.pane.HTML("", margin=(0, 10))
            self._layout.insert(self._layout.objects.index(self.toggles) + 1, self.mask_note)
        self.mask_note.object = note
        self.mask_note.visible = bool(note)

    def __panel__(self):
        return self._layout


_ERROR_CSS = ":host { color: #b00020; font-size: 0.85em; max-width: 280px; }"
_FIELD_ERROR_CSS = ":host .bk-input, :host .bk-input:focus { border: 2px solid #b00020; }"


class MatricesView(pn.viewable.Viewer):
    """The ``Scores`` and ``Weights`` heat maps of the current result.

    ``model`` is the two maps side by side (wrapping on a narrow page) as one Bokeh layout, which
    the workbench places in its page's Bokeh layout rather than in panes of their own. ``tables``
    is their two mirror tables (for screen readers), which the workbench places in another one.

    The tables are apart because every Bokeh ``Div`` whose text changes makes BokehJS lay out
    its whole layout again, at once: beside the figures, the two tables' changes on an edit laid
    out and redrew both figures twice more (some 30 ms of the browser's time per edit).
    """

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        self.scores = HeatMap("Scores", "scores", kind="scores", table_apart=True)
        self.weights = HeatMap("Weights", "weights", kind="weights", table_apart=True)
        self.model = BokehRow(children=[self.scores.model, self.weights.model],
                              styles={"flex-wrap": "wrap"})
        self.tables = BokehColumn(children=[self.scores.table, self.weights.table], margin=0)
        self.state.param.watch(self._update, "result")
        self._update()

    def _update(self, *events):
        r = self.state.result
        if r is None:
            return
        forbidden = ~r.allowed
        received_mask = np.isneginf(r.masked_scores)
        self.scores.update(r.masked_scores, received_mask, scores=r.scores, weights=r.weights)
        after = r.mode.mask == "after"
        self.weights.update(r.weights, forbidden, scores=r.scores, weights=r.weights,
                            masked_label="zeroed" if after else "masked",
                            masked_note="zeroed after softmax" if after else "masked")

    def __panel__(self):
        return pn.pane.Bokeh(BokehColumn(children=[self.model, self.tables]), margin=0)


class ReadoutsView(pn.viewable.Viewer):
    """Each row's sum and future-token weight, the totals, the output, and the checks.

    The readouts and the checklist are one Bokeh ``Div`` (``table``, with the notice that the
    input has a problem), and the broken-mode banner a second one (``banner``) above the heat
    maps. The workbench places both in its page's one Bokeh layout: a Panel pane is some 30 KiB
    of server memory per open page, and they all change together on every edit anyway. The
    HTML is built here from numbers and the core's messages, escaped.
    """

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        self.banner = Div(text="", visible=False, stylesheets=[_NOTICE_CSS],
                          sizing_mode="stretch_width", margin=(5, 10))
        self.table = Div(text="", name="readouts", stylesheets=[TABLE_CSS, _NOTICE_CSS],
                         margin=(5, 10))
        self.state.param.watch(self._update, ["result", "field_errors", "input_ok"])
        self._update()

    def _update(self, *events):
        # Bare Bokeh models changed from a Panel callback need Panel's unlocked() to reach the
        # browser, as in app.shared.heatmap.
        with pn.io.unlocked():
            self._show()

    def _show(self) -> None:
        s, r = self.state, self.state.result
        stale = "" if s.input_ok else (
            "<div class='notice warning'>The inputs have a problem (see the marked fields), so "
            "the heat maps and these readouts still show the last valid input.</div>")
        if r is None:
            self.table.text = stale
            return
        broken = bool(r.mode.mask == "after" and (~r.allowed).any())
        banner = (
            "<div class='notice danger'><b>BROKEN MODE: mask after softmax.</b> Softmax saw the "
            "future scores; the future weights were then zeroed without renormalising, so rows "
            "sum to less than 1.</div>" if broken else "")
        if self.banner.text != banner:
            self.banner.text = banner
        self.banner.visible = broken
        has_output = r.output is not None
        head = "<th scope='col'>row (query)</th><th scope='col'>row sum</th>" \
               "<th scope='col'>future-token weight</th>"
        if has_output:
            head += "<th scope='col'>output</th>"
        rows = []
        for i in range(r.T):
            flag = "" if abs(r.row_sums[i] - 1) <= 1e-9 else " ✗ not 1"
            cells = (f"<th scope='row'>{i + 1}</th><td>{num(r.row_sums[i])}{flag}</td>"
                     f"<td>{num(r.future_weight[i])}</td>")
            if has_output:
                out = np.atleast_1d(r.output[i])
                cells += f"<td>{', '.join(num(x) for x in out)}</td>"
            rows.append(f"<tr>{cells}</tr>")
        self.table.text = (
            f"{stale}<div class='readouts-and-checks'><div>"
            "<table class='readouts' aria-label='Row sums and future-token weight'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p>Total future-token weight: <b data-testid='total-future-weight'>"
            f"{num(r.total_future_weight)}</b> · smallest row sum: "
            f"<b data-testid='min-row-sum'>{num(r.min_row_sum)}</b></p>"
            f"{self._contributions(r)}</div><div>{checks_html(r)}</div></div>"
        )

    @staticmethod
    def _contributions(r) -> str:
        if r.contributions is None or r.contributions.ndim != 2:
            return ""
        head = "".join(f"<th scope='col'>from key {j + 1}</th>" for j in range(r.T))
        body = "".join(
            f"<tr><th scope='row'>{i + 1}</th>"
            + "".join(f"<td>{num(r.contributions[i, j])}</td>" for j in range(r.T))
            + "</tr>" for i in range(r.T))
        return (
            "<details><summary>Contributions weight × value</summary>"
            "<table aria-label='Contributions'><thead><tr><th scope='col'>row</th>"
            f"{head}</tr></thead><tbody>{body}</tbody></table></details>")

    def __panel__(self):
        return pn.pane.Bokeh(BokehColumn(children=[self.banner, self.table]), margin=0)


def checks_html(r) -> str:
    """The core's checks of result ``r`` as a checklist in seed 004's audit order."""
    items = []
    for c in r.checks:
        mark, word = {True: ("✓", "pass"), False: ("✗", "FAIL"), None: ("–", "n/a")}[c.passed]
        items.append(
            f"<li class='check-{word.lower().replace('/', '')}' data-check='{c.name}'>"
            f"<span aria-hidden='true'>{mark}</span> <b>{word}</b> {html.escape(c.title)}: "
            f"{html.escape(c.message)}</li>")
    return ("<h3>Checks (audit order of seed 004)</h3>"
            "<ol class='checklist' aria-label='Checks in audit order'>" + "".join(items) + "</ol>")


_NOTICE_CSS = """
.notice { padding: 12px 16px; border-radius: 6px; border: 1px solid; margin-bottom: 8px; }
.danger { background: #f8d7da; color: #58151c; border-color: #f1aeb5; }
.warning { background: #fff3cd; color: #664d03; border-color: #ffe69c; }
.readouts-and-checks { display: flex; flex-wrap: wrap; gap: 10px 40px; align-items: flex-start; }
h3 { font-size: 1.1em; font-weight: bold; margin: 1.2em 0 0.8em; }
"""
