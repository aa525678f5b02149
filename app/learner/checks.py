"""What the current result says: the broken-mode banner (or why this input cannot show the
chosen mode, with the preset that does), the run's name, each row's sum and
future-token weight, the totals, the output, and the core's checks in audit order.

All HTML here is built from numbers and the core's own messages, escaped. Left out: the heat
maps (:mod:`.matrices`) and the row's step-by-step computation (:mod:`.steps`).
"""

from __future__ import annotations

import re

import numpy as np
import panel as pn
import param

from app.learner.state import EXPOSING_PRESETS, PRESETS, LearnerState, layer_exposure
from app.shared.compare import TABLE_CSS
from app.shared.html import Markup, html, join
from app.shared.numbers import MINUS, format_number
from app.shared.static import read_text
from attention_core import AttentionResult, LayerResult, row_steps
from attention_core.checks import CHECK_OBJECTS, CHECK_STEPS, ROW_SUM_TOLERANCE
from attention_core.modes import run_title

OTHER_LIBRARIES = (
    "What other libraries do with a row that has no visible key: PyTorch's "
    "scaled_dot_product_attention returns zeros, as here; scipy.special.softmax and a plain −∞ "
    "softmax return NaN; jax.nn.dot_product_attention returns uniform weights over all keys, "
    "masked ones included, so its output is the mean of every value.")

NOTICE_CSS = read_text(__package__, "checks_notice.css")


def empty_rows(r: AttentionResult) -> list[int]:
    """Rows (from 0) left with no visible key, e.g. every key they may read is padding, and so
    all-zero weights (in "no mask" such a row still reads its future keys)."""
    return [i for i in range(r.T) if row_steps(r, i).no_visible_key and not r.weights[i].any()]


def banner_html(r: AttentionResult | LayerResult | None) -> Markup:
    """The warning over the heat maps when a broken mode changes this input's result (one map,
    or a whole layer)."""
    if r is None or r.mode.name == "correct" or not r.failed_checks:
        return Markup("")
    name = "mask after softmax" if r.mode.name == "mask_after_softmax" else r.mode.title.lower()
    return html("<div class='notice danger'><b>BROKEN MODE: {}.</b> {}</div>", name, r.mode.description)


def exposing_preset(mode: str) -> str:
    """The preset whose input shows ``mode`` (:data:`EXPOSING_PRESETS`), else ``"reset"``: the
    starting input shows every other mode."""
    return EXPOSING_PRESETS.get(mode, "reset")


def preset_label(key: str) -> str:
    """A preset's button label (``"reset"``: the starting input)."""
    return PRESETS[key]["label"] if key in PRESETS else "Reset (the starting input)"


def exposure_html(layer: LayerResult | None) -> Markup:
    """Why this input cannot show the failure of the mode it ran in (:func:`layer_exposure`), said
    over the heat maps, where the learner looks for the mode's effect; empty if it shows."""
    note = layer_exposure(layer) if layer is not None else None
    if note is None:
        return Markup("")
    return html("<div class='notice warning'><p data-testid='exposure-note' role='note' style='margin: 0;'>"
                "<b>{}: this input cannot show it.</b> {}</p></div>", layer.mode.title, note)


def _words(message: str) -> str:
    """A core message with a non-finite number in words, as the row steps say them: the page
    never shows "nan" (an undefined ∞/∞ is what a naive softmax gave); a number's minus sign
    is the page's (U+2212, :mod:`app.shared.numbers`), a hyphen in a word stays."""
    words = re.sub(r"\bnan\b", "undefined", re.sub(r"\binf\b", "∞", message))
    return re.sub(r"(?<![\w.-])-(?=\.?\d|∞)|(?<=\de)-(?=\d)", MINUS, words)


def _check_mark(c) -> tuple[str, str]:
    return {True: ("✓", "pass"), False: ("✗", "FAIL"), None: ("–", "n/a")}[c.passed]


def first_incorrect_html(layer: LayerResult) -> Markup:
    """The first incorrect object in dependency order (Review, "Audit Order": inspect it first),
    or that there is none."""
    first = layer.first_incorrect
    if first is None:
        return Markup("<p class='first-incorrect none' data-testid='first-incorrect'>No check failed: "
                      "no object to inspect.</p>")
    return html("<p class='first-incorrect' data-testid='first-incorrect'>First incorrect object: "
                "<b>{}</b> (step {}, {}). Inspect it first: every later step depends on it.</p>",
                CHECK_OBJECTS[first.name], CHECK_STEPS[first.name], first.title)


def checks_html(r: AttentionResult | LayerResult) -> Markup:
    """The checks of a run (a whole layer, or one map as a layer of one item) as a checklist
    in the nine steps of Review, "Audit Order", under the first incorrect object."""
    layer = r if isinstance(r, LayerResult) else LayerResult.of(r)
    items = join(
        html("<li class='check-{cls}' data-check='{name}' data-step='{step}'><span class='step'>Step "
             "{step}</span> <span aria-hidden='true'>{mark}</span> <b>{word}</b> {title}: {message}</li>",
             cls=word.lower().replace("/", ""), name=c.name, step=CHECK_STEPS[c.name],
             mark=mark, word=word, title=c.title, message=_words(c.message))
        for c in layer.checks for mark, word in [_check_mark(c)])
    return html("<h3>Checks (the nine steps of Review, <em>Audit Order</em>)</h3>{}"
                "<ol class='checklist' aria-label='Checks in audit order'>{}</ol>",
                first_incorrect_html(layer), items)


def row_sum_html(x: float) -> str:
    """A row sum and, where it is off 1 by more than the core's check allows
    (``ROW_SUM_TOLERANCE``), "✗ not 1" with enough digits to see it: 0.9999 is not "1.000"."""
    x = float(x)
    if np.isfinite(x) and abs(x - 1) <= ROW_SUM_TOLERANCE:
        return format_number(x)
    near = np.isfinite(x) and abs(x - 1) < 0.0005  # three decimals would read 1.000
    return f"{format_number(x, 'exact' if near else 'cell')} ✗ not 1"


def readouts_html(r: AttentionResult | None, input_ok: bool, layer: LayerResult | None = None) -> Markup:
    """Row sums, future-token weight, output per row of the map ``r``; totals; notes; the
    checklist of ``layer`` (the whole run ``r`` belongs to; default ``r`` alone)."""
    stale = Markup("") if input_ok else Markup(
        "<div class='notice warning'>The inputs have a problem (see the marked fields), so "
        "the heat maps and these readouts still show the last valid input.</div>")
    if r is None:
        return stale
    empty = empty_rows(r)
    has_output = r.output is not None
    head = Markup("<th scope='col'>row (query)</th><th scope='col'>row sum</th>"
                  "<th scope='col'>future-token weight</th>")
    if has_output:
        head += Markup("<th scope='col'>output</th>")
    rows = []
    for i in range(r.T):
        flag = " (no visible key: see the note under this table)" if i in empty else ""
        cells = html("<th scope='row'>{}</th><td>{}{}</td><td>{}</td>",
                     i + 1, row_sum_html(r.row_sums[i]), flag, format_number(r.future_weight[i]))
        if has_output:
            cells += html("<td>{}</td>", ", ".join(format_number(x) for x in np.atleast_1d(r.output[i])))
        rows.append(html("<tr>{}</tr>", cells))
    note = ""
    if empty:
        many = len(empty) > 1
        failed = [c.title for c in sorted(r.checks, key=lambda c: c.name != "row_sums")
                  if c.passed is False]
        note = html("<div class='notice warning' data-testid='empty-row-note'><p><b>Row{s} "
                    "{which}: no visible key.</b> Every key {they} may read is padding, so {their} "
                    "weights are all 0 here and the check “{check}” fails.</p><p>{others}</p></div>",
                    s="s" if many else "", which=", ".join(str(i + 1) for i in empty),
                    they="they" if many else "it", their="their" if many else "its",
                    check=failed[0] if failed else "Row sums equal 1", others=OTHER_LIBRARIES)
    total = format_number(r.total_future_weight)
    if np.isfinite(r.total_future_weight) and not np.isfinite(r.weights).all():
        # Naive softmax: the future cells' 0 is real (exp(−∞)), but the row's other weights are not.
        total += " (the future cells only: the other weights are undefined)"
    # The empty-row note sits right under the table, next to the rows it is about.
    return html(
        "{stale}<p>This run: <b data-testid='run-title'>{title}</b></p>"
        "<div class='readouts-and-checks'><div>"
        "<table class='readouts' aria-label='Row sums and future-token weight'>"
        "<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{note}"
        "<p>Total future-token weight: <b data-testid='total-future-weight'>"
        "{total}</b> · smallest row sum: "
        "<b data-testid='min-row-sum'>{smallest}</b></p>"
        "</div><div>{checks}</div></div>",
        stale=stale, title=run_title(r.mode.name, r.causal, r.T), head=head, rows=join(rows),
        note=note, total=total, smallest=format_number(r.min_row_sum),
        checks=checks_html(layer if layer is not None else r))


INVARIANTS_CSS = read_text(__package__, "checks_invariants.css")


def invariants_html(r: AttentionResult | None, input_ok: bool, layer: LayerResult | None = None) -> Markup:
    """The run in brief, for the embed (:mod:`app.learner.embed`): its title, total future-token
    weight, smallest row sum and each check that applies by title alone (its message in a
    tooltip and in :func:`checks_html`), then how many do not apply (their titles in a tooltip):
    the frame has no room for a line each."""
    if r is None:
        return Markup("")
    stale = Markup("") if input_ok else Markup(
        "<p class='check-fail'>The inputs have a problem: still showing the last valid input.</p>")
    checks = (layer or LayerResult.of(r)).checks
    # Numbered by the course's audit steps, as the full page's checklist is (two checks share
    # step 5), not by the list's own count: the same check has the same number in both.
    items = join(
        html("<li class='check-{cls}' data-check='{name}' data-step='{step}' title='{message}'>"
             "<span class='step'>{step}.</span> <span aria-hidden='true'>{mark}</span> <b>{word}</b> {title}</li>",
             cls=word.lower().replace("/", ""), name=c.name, step=CHECK_STEPS[c.name],
             message=_words(c.message), mark=mark, word=word, title=c.title)
        for c in checks if c.passed is not None for mark, word in [_check_mark(c)])
    idle = [c for c in checks if c.passed is None]
    if idle:
        items += html("<li class='check-na' data-check='{names}' title='{titles}'><span class='step'>{steps}.</span>"
                      " <span aria-hidden='true'>–</span> <b>n/a</b> {n} check{s} not applying here</li>",
                      names=" ".join(c.name for c in idle), titles="; ".join(c.title for c in idle),
                      steps=", ".join(str(CHECK_STEPS[c.name]) for c in idle), n=len(idle),
                      s="s" if len(idle) > 1 else "")
    return html(
        "<div data-testid='invariants'>{stale}<p>This run: <b data-testid='brief-run-title'>{title}</b></p>"
        "<p>Total future-token weight: <b data-testid='brief-total-future-weight'>"
        "{total}</b> · smallest row sum: "
        "<b data-testid='brief-min-row-sum'>{smallest}</b></p>"
        "<ol class='checklist' aria-label='Checks in brief'>{items}</ol></div>",
        stale=stale, title=run_title(r.mode.name, r.causal, r.T), total=format_number(r.total_future_weight),
        smallest=format_number(r.min_row_sum), items=items)


class ResultView(pn.viewable.Viewer):
    """The current result as one HTML pane, redrawn when the result or the input's validity
    changes and hidden while it has nothing to say or the weights are hidden (``state.revealed``).
    A view is :meth:`html` and its style."""

    state = param.ClassSelector(class_=LearnerState)
    stylesheets: tuple[str, ...] = ()

    def __init__(self, **params):
        super().__init__(**params)
        self.pane = pn.pane.HTML(stylesheets=list(self.stylesheets), sizing_mode="stretch_width",
                                 margin=(0, 10))
        self._show()

    @staticmethod
    def html(r: AttentionResult | None, input_ok: bool, layer: LayerResult | None = None) -> str:
        raise NotImplementedError

    @param.depends("state.result", "state.input_ok", "state.revealed", watch=True)
    def _show(self) -> None:
        # Built once per change; param sends the pane only what differs from what it shows.
        # Until a prediction is written (state.predict_first) it says nothing: it tells the answer.
        text = self.html(self.state.result, self.state.input_ok, self.state.layer) if self.state.revealed else ""
        self.pane.param.update(object=text, visible=bool(text))

    def __panel__(self):
        return self.pane


class InvariantsView(ResultView):
    """The current run's invariants in brief (:func:`invariants_html`), for the embed."""

    stylesheets = (INVARIANTS_CSS,)
    html = staticmethod(invariants_html)


class BannerView(ResultView):
    """Above the heat maps: the broken-mode warning while a broken mode shows; while the input
    cannot show the chosen mode, why, and a button (``expose``) loading a preset that does."""

    stylesheets = (NOTICE_CSS,)

    def __init__(self, **params):
        # The warning (``pane``), the exposure note and its button are apart, so that the embed
        # can put the note beside its checks.
        self.exposure_note = pn.pane.HTML(stylesheets=[NOTICE_CSS], sizing_mode="stretch_width", margin=(0, 10))
        # Its label names a preset and can be longer than a narrow column: it wraps.
        self.expose = pn.widgets.Button(label="", visible=False, margin=(0, 10, 10, 10),
                                        stylesheets=[":host { max-width: calc(100% - 20px); } "
                                                     ".bk-btn { white-space: normal; text-align: left; }"])
        super().__init__(**params)
        self.expose.on_click(self._load_exposing_preset)
        self._layout = pn.Column(self.pane, self.exposure_note, self.expose, margin=0, sizing_mode="stretch_width")

    @staticmethod
    def html(r: AttentionResult | None, input_ok: bool, layer: LayerResult | None = None) -> str:
        return banner_html(layer or r)

    @param.depends("state.result", "state.input_ok", "state.revealed", watch=True)
    def _show(self) -> None:
        super()._show()
        layer = self.state.layer
        note = exposure_html(layer)
        self.exposure_note.param.update(object=note, visible=bool(note))
        needed = layer is not None and layer_exposure(layer) is not None
        if needed:
            self.expose.label = f"Load a preset that shows it: {preset_label(exposing_preset(layer.mode.name))}"
        self.expose.visible = needed

    def _load_exposing_preset(self, _event) -> None:
        mode = self.state.layer.mode.name
        self.state.apply_preset(exposing_preset(mode), failure_mode=mode)

    def __panel__(self):
        return self._layout


class ReadoutsView(ResultView):
    """The readouts and the checklist of the current result (:func:`readouts_html`)."""

    stylesheets = (TABLE_CSS, NOTICE_CSS)
    html = staticmethod(readouts_html)
