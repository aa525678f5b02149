"""Record a run: the lesson's prediction checkpoint (first on the page, with what the run then
showed), optional learner and label, Save run.

The explanation is not here: it is attached to the saved run(s) it explains, in
:class:`app.learner.runs.SavedRunsView` (the order of the Self-attention
lesson's checkpoints: predict → experiment → explain).
Learner text is only ever shown escaped.
"""

from __future__ import annotations

import panel as pn
import param

from app.learner.checks import row_sum_html
from app.learner.state import LearnerState, inputs_to_fix
from app.shared.connection import mark_stale_js
from app.shared.html import Markup, html, join
from app.shared.numbers import format_number
from app.shared.static import read_text
from attention_core import AttentionResult
from attention_core.modes import run_title
from attention_core.records import TEXT_LIMITS

PREDICT_QUESTION = ("Can token 2 attend to token 3, and what will post-softmax masking "
                    "change?")  # the Self-attention lesson's predict checkpoint

STATUS_CSS = read_text(__package__, "record_status.css")

# Run in the browser when the server's connection drops: a green "Saved run #2" beside Save run
# would say the next click saves too. The message keeps what was saved and says nothing more is;
# a save pressed as the connection went may have been committed unheard, so it says how to know.
STALE_STATUS_JS = mark_stale_js(
    ".status.ok", " Since then the connection to the server was lost: nothing you do now is saved. If "
    "you pressed Save run as it was lost, reload: Saved runs then lists that run if it was saved.", ok_class="ok"
) + read_text(__package__, "record_save_off.js")  # and the Save buttons go grey, saying why


# What a text field takes in the browser: far more than a record may hold, so text over the limit
# reaches Save run and is refused with its real length, never cut silently (Panel cuts at 5000).
MAX_TYPED = 100_000


def limited(placeholder: str, field: str) -> str:
    """A text field's placeholder followed by its limit, "(up to 2000 characters)"."""
    return f"{placeholder} (up to {TEXT_LIMITS[field]} characters)"


def status_html(message: str, ok: bool, pending: bool = False) -> str:
    """A status line (role=status) a screen reader announces; ``message`` is escaped, as it can
    quote the learner's label. ``pending``: what it says is not done yet ("Saving…"); marked
    "ok" too, so a lost connection marks it as it marks a save's answer (STALE_STATUS_JS)."""
    if not message:
        return ""
    kind = "ok pending" if pending else "ok" if ok else "error"
    return html('<div class="status {}" role="status">{}</div>', kind, message)


SHOWN_PREDICTION = 300  # characters of the prediction repeated beside the outcome
_WRAP = "overflow-wrap: anywhere;"  # a long unbroken word (a URL) wraps instead of widening the page


def outcome_html(prediction: str, r: AttentionResult | None, input_ok: bool = True) -> Markup:
    """The learner's prediction (escaped) beside what the run shows about the lesson's question:
    row 2's weight on token 3, its future-token weight and every row sum of ``r`` (the map shown),
    in the run's own mode; empty without a prediction. A shorter run speaks of its last row and
    leaves out the token it does not have."""
    if not prediction.strip():
        return Markup("")
    text, limit = prediction.strip(), TEXT_LIMITS["prediction"]
    # Shown whole up to a few lines; a longer one is cut here (the field keeps it) and one over
    # the record's limit is said to be, before Save run refuses it.
    shown = text if len(text) <= SHOWN_PREDICTION else text[:SHOWN_PREDICTION - 1] + "…"
    said = html("You predicted: <q>{}</q>", shown)
    if len(text) > limit:
        said = html("{} (it is {} characters long; Save run takes up to {})", said, len(text), limit)
    if r is None:
        return html("<p data-testid='prediction-outcome' style='{}'>{}</p>", _WRAP, said)
    row = min(2, r.T)
    facts = [html("row {}'s weight on token 3: <b>{}</b>", row, format_number(r.weights[row - 1, 2]))
             ] if r.T_k >= 3 else []
    facts.append(html("row {}'s future-token weight: <b>{}</b>", row, format_number(r.future_weight[row - 1])))
    facts.append(html("row sums: {}", ", ".join(row_sum_html(x) for x in r.row_sums)))
    stale = "" if input_ok else " (the last valid input)"
    return html("<p data-testid='prediction-outcome' style='{}'>{}<br>This run{}, <b>{}</b>: {}.</p>", _WRAP,
                said, stale, run_title(r.mode.name, r.causal, r.T), join(facts, "; "))


def _written(prediction: str) -> bool:
    return bool(prediction.strip())


class PredictionView(pn.viewable.Viewer):
    """The lesson's predict checkpoint, first in the main area: its prompt, the ``Prediction``
    field (required to save) and, once written, the prediction beside the run's outcome."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # Its value arrives when the field is left (or on Enter), so a click on Save run sends
        # the typed text first; longer text than TEXT_LIMITS is refused on Save run, not cut.
        self.prediction = pn.widgets.TextAreaInput.from_param(
            s.param.prediction, label="Prediction", placeholder=limited(PREDICT_QUESTION, "prediction"),
            max_length=MAX_TYPED, height=80, width=620)
        self.prompt = pn.pane.HTML(html("<h3>Predict first</h3><p>{} Write your prediction before "
                                        "you look at the weights.</p>", PREDICT_QUESTION), margin=(0, 10))
        # The prediction beside the run's outcome, shown once a prediction is written. Made with
        # the page, as nearly every learner writes one: a pane added later makes Bokeh walk the
        # whole page's models again, at the moment the learner acts (bench/README.md).
        self.outcome = pn.pane.HTML(
            pn.bind(outcome_html, s.param.prediction, s.param.result, s.param.input_ok),
            visible=pn.bind(_written, s.param.prediction), margin=(0, 10), sizing_mode="stretch_width")
        self._layout = pn.Column(self.prompt, self.prediction, self.outcome, margin=0,
                                 sizing_mode="stretch_width")

    def __panel__(self):
        return self._layout


class RecordView(pn.viewable.Viewer):
    """Learner, Label, ``Save run``, why it is off while an input is refused, and what the save
    did (the prediction it needs is in :class:`PredictionView`)."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # Each field says its limit (TEXT_LIMITS); longer text is refused on Save run with a
        # message naming the field, rather than cut by the browser.
        self.learner = pn.widgets.TextInput.from_param(
            s.param.learner, label="Learner", placeholder=limited("optional", "learner"),
            max_length=MAX_TYPED, width=300)
        self.label = pn.widgets.TextInput.from_param(
            s.param.label, label="Label", placeholder=limited("optional", "label"),
            max_length=MAX_TYPED, width=300)
        # Save run is greyed while an input is refused, and says why under it: the refused field
        # may be out of view, and the last save's message (still shown) says nothing of it.
        to_fix = pn.bind(inputs_to_fix, s.param.input_ok, s.param.tokens_error, s.param.field_errors)
        # Off too while a save waits on the store ("Saving…", LearnerState.save_pending).
        off = pn.bind(lambda why, pending: bool(why) or pending, to_fix, s.param.save_pending)
        self.button = pn.widgets.Button(label="Save run", color="primary", disabled=off)
        self.button.on_click(lambda _event: s.press_save())
        self.save_off = pn.pane.HTML(
            pn.bind(lambda why: html("<p class='save-off'>Save run is off until the highlighted "
                                     "inputs are fixed: {}.</p>", why.rstrip(".")), to_fix),
            visible=pn.bind(bool, to_fix), margin=(0, 10))
        # What Save run did, under the button. Made with the form, as every save says something:
        # a pane added at the first save would make Bokeh walk the whole page's models again
        # just as the learner waits for the answer (bench/README.md). Hidden while Save run is
        # off for a refused input: "Already saved as #1" beside "Save run is off…" read as both.
        self.message = pn.pane.HTML(
            pn.bind(status_html, s.param.save_message, s.param.save_ok, s.param.save_pending),
            visible=pn.bind(lambda said, why: bool(said) and not why, s.param.save_message, to_fix),
            stylesheets=[STATUS_CSS])
        self._layout = pn.Column(
            pn.pane.HTML("<h3>Record your run</h3>"),
            pn.Row(self.learner, self.label), self.button, self.save_off, self.message)

    def __panel__(self):
        return self._layout
