"""Thin views over :class:`app.state.WorkbenchState`: inputs, heat maps, readouts, checks, runs.

Every view builds its own widgets in ``__init__``, so each browser session gets its own.
Learner text is only ever put on the page escaped (``html.escape``) or as plain-text cells.
"""

from __future__ import annotations

import html
import io
from datetime import UTC, datetime

import numpy as np
import panel as pn
import param

from app.heatmap import HeatMap, format_number
from app.state import MAX_UI_TOKENS, PRESETS, WorkbenchState
from app.widgets import LabelledCheckbox
from attention_core.store import export_csv, export_json

_TOKEN_FIELDS = (("queries", "Query"), ("keys", "Key"), ("values", "Value"))


class InputsView(pn.viewable.Viewer):
    """Token count, one labelled text field per query/key/value, the two mask toggles, presets."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.tokens = pn.widgets.IntInput.from_param(s.param.tokens, name="Tokens", width=120)
        self.fields: dict[str, list[pn.widgets.TextInput]] = {}
        self.messages: dict[str, pn.pane.HTML] = {}
        for field, word in _TOKEN_FIELDS:
            widgets = []
            for i in range(MAX_UI_TOKENS):
                label = f"{word} {i + 1}"
                w = pn.widgets.TextInput(name=label, value=getattr(s, field)[i], width=90,
                                         stylesheets=[_FIELD_CSS])
                w.param.watch(lambda e, f=field, i=i: s.set_token_text(f, i, e.new), "value")
                widgets.append(w)
                self.messages[label] = pn.pane.HTML("", margin=(0, 5), visible=False,
                                                    stylesheets=[_ERROR_CSS])
            self.fields[field] = widgets
        self.use_values = LabelledCheckbox.for_param(
            s.param.use_values, "Use values (adds output and contributions)")
        self.causal = LabelledCheckbox.for_param(s.param.causal, "Causal mask")
        self.broken = LabelledCheckbox.for_param(
            s.param.mask_after_softmax, "Mask after softmax (broken)")
        self.mask_note = pn.pane.HTML("", margin=(0, 10))
        self.presets = [
            pn.widgets.Button(name=p["label"], button_type="light") for p in PRESETS.values()
        ] + [pn.widgets.Button(name="Reset", button_type="light")]
        for button, key in zip(self.presets, [*PRESETS, "reset"], strict=True):
            button.on_click(lambda e, k=key: s.apply_preset(k))
        s.param.watch(self._sync_texts, ["queries", "keys", "values"])
        s.param.watch(self._sync_visibility, ["tokens", "use_values", "field_errors"])
        s.param.watch(self._sync_mask_note, ["causal", "mask_after_softmax"])
        self._sync_visibility()
        self._sync_mask_note()

    def _sync_texts(self, *events):
        for field, widgets in self.fields.items():
            for w, text in zip(widgets, getattr(self.state, field), strict=True):
                if w.value != text:
                    w.value = text

    def _sync_visibility(self, *events):
        s = self.state
        for field, widgets in self.fields.items():
            shown_field = field != "values" or s.use_values
            for i, w in enumerate(widgets):
                w.visible = shown_field and i < s.tokens
                message = s.field_errors.get(w.name, "")
                pane = self.messages[w.name]
                pane.object = f'<span role="alert">{html.escape(message)}</span>' if message else ""
                pane.visible = bool(message) and w.visible
                w.css_classes = ["field-error"] if message else []

    def _sync_mask_note(self, *events):
        s = self.state
        if s.mask_after_softmax and not s.causal:
            note = ("The causal mask is off, so <b>Mask after softmax (broken)</b> has nothing to "
                    "act on: no cell is masked before or after softmax.")
        elif not s.causal:
            note = "The causal mask is off: every token can read future tokens."
        else:
            note = ""
        self.mask_note.object = note
        self.mask_note.visible = bool(note)

    def __panel__(self):
        columns = []
        for field, _word in _TOKEN_FIELDS:
            items = []
            for w in self.fields[field]:
                items += [w, self.messages[w.name]]
            column = pn.Column(pn.pane.HTML(f"<b>{field.capitalize()}</b>", margin=(0, 10)), *items)
            if field == "values":
                column.visible = self.state.use_values
                self.state.param.watch(lambda e, c=column: setattr(c, "visible", e.new),
                                       "use_values")
            columns.append(column)
        return pn.Column(
            self.tokens,
            pn.Row(*columns),
            self.use_values,
            self.causal,
            self.broken,
            self.mask_note,
            pn.pane.HTML("<b>Presets</b>", margin=(10, 10, 0, 10)),
            pn.FlexBox(*self.presets),
        )


_ERROR_CSS = ":host { color: #b00020; font-size: 0.85em; max-width: 280px; }"
_FIELD_CSS = ":host(.field-error) .bk-input { border: 2px solid #b00020; }"
TABLE_CSS = """
table { border-collapse: collapse; } th, td { padding: 2px 8px; text-align: right; }
caption { font-weight: bold; text-align: left; } thead th { border-bottom: 1px solid #999; }
.check-fail { color: #b00020; } .check-pass { color: #1b5e20; } .check-na { color: #555; }
"""


class MatricesView(pn.viewable.Viewer):
    """The ``Scores`` and ``Weights`` heat maps of the current result."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        self.scores = HeatMap("Scores", "scores", kind="scores")
        self.weights = HeatMap("Weights", "weights", kind="weights")
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
        return pn.FlexBox(self.scores, self.weights)


def _num(x: float) -> str:
    return html.escape(format_number(x))


class ReadoutsView(pn.viewable.Viewer):
    """Each row's sum and future-token weight, the totals, the mode banner, and the output."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        self.banner = pn.pane.Alert("", alert_type="danger", visible=False)
        self.stale = pn.pane.Alert("", alert_type="warning", visible=False)
        self.table = pn.pane.HTML("", name="readouts", stylesheets=[TABLE_CSS])
        self.state.param.watch(self._update, ["result", "field_errors", "input_ok"])
        self._update()

    def _update(self, *events):
        s, r = self.state, self.state.result
        self.stale.object = (
            "The inputs have a problem (see the marked fields), so the matrices below still show "
            "the last valid input." if not s.input_ok else "")
        self.stale.visible = not s.input_ok
        if r is None:
            return
        broken = bool(r.mode.mask == "after" and (~r.allowed).any())
        self.banner.object = (
            "**BROKEN MODE: mask after softmax.** Softmax saw the future scores; the future "
            "weights were then zeroed without renormalising, so rows sum to less than 1."
            if broken else "")
        self.banner.visible = broken
        has_output = r.output is not None
        head = "<th scope='col'>row (query)</th><th scope='col'>row sum</th>" \
               "<th scope='col'>future-token weight</th>"
        if has_output:
            head += "<th scope='col'>output</th>"
        rows = []
        for i in range(r.T):
            flag = "" if abs(r.row_sums[i] - 1) <= 1e-9 else " ✗ not 1"
            cells = (f"<th scope='row'>{i + 1}</th><td>{_num(r.row_sums[i])}{flag}</td>"
                     f"<td>{_num(r.future_weight[i])}</td>")
            if has_output:
                out = np.atleast_1d(r.output[i])
                cells += f"<td>{', '.join(_num(x) for x in out)}</td>"
            rows.append(f"<tr>{cells}</tr>")
        self.table.object = (
            "<table class='readouts' aria-label='Row sums and future-token weight'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p>Total future-token weight: <b data-testid='total-future-weight'>"
            f"{_num(r.total_future_weight)}</b> · smallest row sum: "
            f"<b data-testid='min-row-sum'>{_num(r.min_row_sum)}</b></p>"
            + self._contributions(r)
        )

    @staticmethod
    def _contributions(r) -> str:
        if r.contributions is None or r.contributions.ndim != 2:
            return ""
        head = "".join(f"<th scope='col'>from key {j + 1}</th>" for j in range(r.T))
        body = "".join(
            f"<tr><th scope='row'>{i + 1}</th>"
            + "".join(f"<td>{_num(r.contributions[i, j])}</td>" for j in range(r.T))
            + "</tr>" for i in range(r.T))
        return (
            "<details><summary>Contributions weight × value</summary>"
            "<table aria-label='Contributions'><thead><tr><th scope='col'>row</th>"
            f"{head}</tr></thead><tbody>{body}</tbody></table></details>")

    def __panel__(self):
        return pn.Column(self.stale, self.table)


class ChecksView(pn.viewable.Viewer):
    """The core's checks as a checklist in seed 004's audit order."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        self.list = pn.pane.HTML("", name="checks", stylesheets=[TABLE_CSS])
        self.state.param.watch(self._update, "result")
        self._update()

    def _update(self, *events):
        r = self.state.result
        if r is None:
            return
        items = []
        for c in r.checks:
            mark, word = {True: ("✓", "pass"), False: ("✗", "FAIL"), None: ("–", "n/a")}[c.passed]
            items.append(
                f"<li class='check-{word.lower().replace('/', '')}' data-check='{c.name}'>"
                f"<span aria-hidden='true'>{mark}</span> <b>{word}</b> {html.escape(c.title)}: "
                f"{html.escape(c.message)}</li>")
        self.list.object = (
            "<ol class='checklist' aria-label='Checks in audit order'>" + "".join(items) + "</ol>")

    def __panel__(self):
        return pn.Column(pn.pane.HTML("<h3>Checks (audit order of seed 004)</h3>"), self.list)




_STATUS_CSS = """
.status { padding: 8px 12px; border-radius: 4px; unicode-bidi: isolate; }
.ok { background: #e6f4ea; color: #1b5e20; } .error { background: #fdecea; color: #b00020; }
"""


class SaveView(pn.viewable.Viewer):
    """The lesson's checkpoints (prediction, explanation), optional learner/label, and Save run."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.prediction = pn.widgets.TextAreaInput.from_param(
            s.param.prediction, name="Prediction", height=80, max_length=2000,
            placeholder="Can token 2 attend to token 3, and what will post-softmax masking "
                        "change?")
        self.learner = pn.widgets.TextInput.from_param(s.param.learner, name="Learner",
                                                       max_length=100)
        self.label = pn.widgets.TextInput.from_param(s.param.label, name="Label", max_length=100)
        self.explanation = pn.widgets.TextAreaInput.from_param(
            s.param.explanation, name="Explanation", height=80, max_length=2000,
            placeholder="What invariant did your evidence reveal, and how did the broken mode "
                        "violate it?")
        self.button = pn.widgets.Button(name="Save run", button_type="primary")
        self.button.on_click(lambda e: s.save_run())
        # Plain HTML with escaped text, not an Alert: Alert renders Markdown, and the message
        # can quote the learner's label.
        self.message = pn.pane.HTML("", visible=False, stylesheets=[_STATUS_CSS],
                                    sizing_mode="stretch_width")
        s.param.watch(self._update, ["save_message", "save_ok", "input_ok"])
        self._update()

    def _update(self, *events):
        s = self.state
        self.button.disabled = not s.input_ok
        kind = "ok" if s.save_ok else "error"
        self.message.object = (f'<div class="status {kind}" role="status">'
                               f"{html.escape(s.save_message)}</div>")
        self.message.visible = bool(s.save_message)

    def __panel__(self):
        return pn.Column(
            pn.pane.HTML("<h3>Record your run</h3>"),
            self.prediction, pn.Row(self.learner, self.label), self.button, self.message,
            self.explanation,
        )


def _mode_title(record) -> str:
    if record.mask_after_softmax and record.causal:
        return "mask after softmax (broken)"
    if record.failure_mode != "correct":
        return record.failure_mode.replace("_", " ")
    return "correct, causal" if record.causal else "correct, no causal mask"


def runs_frame(records):
    """This session's saved runs as a pandas DataFrame, one row per experiment record."""
    import pandas as pd

    def number(x):
        return "—" if x is None else format_number(x)

    rows = [{
        "run": n, "id": r.id, "saved (UTC)": r.created_at[11:19], "label": r.label or "",
        "learner": r.learner or "",
        "mode": _mode_title(r), "future-token weight": number(r.total_future_weight),
        "smallest row sum": number(r.min_row_sum),
        "failed checks": ", ".join(r.failed_checks) or "none",
    } for n, r in enumerate(records, start=1)]
    return pd.DataFrame(rows, columns=list(_RUN_COLUMNS))


# Column name -> width in pixels; all text is shown as plain text, never HTML.
_RUN_COLUMNS = {"run": 55, "id": 10, "saved (UTC)": 95, "label": 120, "learner": 100, "mode": 190,
                "future-token weight": 105, "smallest row sum": 105, "failed checks": 160}


class RunsView(pn.viewable.Viewer):
    """This session's saved runs, downloads of them, and a side-by-side comparison of two."""

    state = param.ClassSelector(class_=WorkbenchState)

    def __init__(self, **params):
        super().__init__(**params)
        self.table = pn.widgets.Tabulator(
            runs_frame([]), name="Saved runs", show_index=False, selectable="checkbox",
            disabled=True, hidden_columns=["id"], sizing_mode="stretch_width", height=220,
            widths=dict(_RUN_COLUMNS), text_align="left",
            formatters={c: {"type": "plaintext"} for c in _RUN_COLUMNS},
        )
        self.download_json = pn.widgets.FileDownload(
            callback=lambda: self._download("json"), filename="attention-runs.json",
            label="Download my runs (JSON)", embed=False)
        self.download_csv = pn.widgets.FileDownload(
            callback=lambda: self._download("csv"), filename="attention-runs.csv",
            label="Download my runs (CSV)", embed=False)
        self.compare = ComparisonView()
        self.hint = pn.pane.HTML(
            "<p>Tick two saved runs to compare them side by side.</p>")
        self.state.param.watch(self._update_table, "saved")
        self.table.param.watch(self._update_compare, "selection")
        self._update_table()

    def _update_table(self, *events):
        self.table.value = runs_frame(self.state.saved)
        has_runs = bool(self.state.saved)
        self.download_json.disabled = self.download_csv.disabled = not has_runs

    def _update_compare(self, *events):
        chosen = [self.state.saved[i] for i in self.table.selection[:2]
                  if i < len(self.state.saved)]
        self.compare.show(chosen)

    def _download(self, fmt: str) -> io.StringIO:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        records = list(self.state.saved)
        if fmt == "json":
            self.download_json.filename = f"attention-runs-{stamp}.json"
            return io.StringIO(export_json(records, []))
        self.download_csv.filename = f"attention-runs-{stamp}.csv"
        return io.StringIO(export_csv(records))

    def __panel__(self):
        return pn.Column(
            pn.pane.HTML("<h3>Saved runs</h3>"), self.table,
            pn.Row(self.download_json, self.download_csv), self.hint, self.compare,
        )


def _matrix(rows) -> np.ndarray:
    return np.array([[np.nan if x is None else x for x in row] for row in rows], dtype=float)


class ComparisonView(pn.viewable.Viewer):
    """Two saved runs side by side: both weight heat maps, their difference, row sums."""

    def __init__(self, **params):
        super().__init__(**params)
        self.first = HeatMap("Weights of run A", "compare-a", kind="weights", size=260)
        self.second = HeatMap("Weights of run B", "compare-b", kind="weights", size=260)
        self.difference = HeatMap("Difference A − B", "compare-diff", kind="difference",
                                  size=260)
        self.summary = pn.pane.HTML("", name="comparison-summary", stylesheets=[TABLE_CSS])
        self._pane = pn.Column(
            pn.pane.HTML("<h3>Comparison</h3>"), self.summary,
            pn.FlexBox(self.first, self.second, self.difference), visible=False)

    def show(self, records) -> None:
        """Compare the first two of ``records`` (hide the view if fewer than two)."""
        if len(records) < 2:
            self._pane.visible = False
            return
        a, b = records[:2]
        wa, wb = _matrix(a.results["weights"]), _matrix(b.results["weights"])
        ma = ~np.array(a.results["mask"], dtype=bool)
        mb = ~np.array(b.results["mask"], dtype=bool)
        for heat_map, record, w, masked in ((self.first, a, wa, ma), (self.second, b, wb, mb)):
            after = record.mask_after_softmax
            heat_map.update(w, masked, weights=w, masked_label="zeroed" if after else "masked",
                            masked_note="zeroed after softmax" if after else "masked")
        same_shape = wa.shape == wb.shape
        if same_shape:
            self.difference.update(wa - wb, np.zeros_like(ma), weights=wa - wb)
        self.difference.visible = same_shape
        self.summary.object = self._summary(a, b, same_shape)
        self._pane.visible = True

    @staticmethod
    def _summary(a, b, same_shape: bool) -> str:
        def cells(values):
            return "".join(f"<td>{'—' if v is None else _num(v)}</td>" for v in values)

        rows = []
        for tag, r in (("A", a), ("B", b)):
            name = html.escape(r.label or r.id)
            rows.append(
                f"<tr><th scope='row'>{tag}: {name} ({html.escape(_mode_title(r))})</th>"
                f"<td>{_num(r.total_future_weight) if r.total_future_weight is not None else '—'}"
                f"</td><td>{_num(r.min_row_sum) if r.min_row_sum is not None else '—'}</td>"
                f"{cells(r.results['row_sums'])}</tr>")
        width = max(a.T, b.T)
        head = "".join(f"<th scope='col'>row {i + 1} sum</th>" for i in range(width))
        note = "" if same_shape else "<p>The runs have different token counts: no difference map.</p>"
        return (
            "<table aria-label='Comparison of row sums and future-token weight'><thead><tr>"
            "<th scope='col'>run</th><th scope='col'>total future-token weight</th>"
            f"<th scope='col'>smallest row sum</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{note}")

    def __panel__(self):
        return self._pane
