"""What the learner sets: token count, each token's query/key/value and padding, the masks,
the failure mode (what it breaks, and a preset that shows it), and the presets.

Every widget is bound to :class:`app.learner.state.LearnerState`; the views only show the
state's messages. Left out: what the inputs compute (the heat maps, readouts and checks).
"""

from __future__ import annotations

import html

import panel as pn
import param

from app.learner.state import EXPOSING_PRESETS, MAX_UI_TOKENS, PRESETS, LearnerState
from attention_core import exposure
from attention_core.checks import CHECK_TITLES
from attention_core.modes import FAILURE_MODES

_TOKEN_FIELDS = (("queries", "Query"), ("keys", "Key"), ("values", "Value"))
ERROR_CSS = ":host { color: #b00020; font-size: 0.85em; }"
_FIELD_ERROR_CSS = ":host .bk-input, :host .bk-input:focus { border: 2px solid #b00020; }"
# In the Presets row; the other presets are offered beside the failure mode they expose.
_SHOWN_PRESETS = ("worked_row", "large_scores", "all_equal")
# Bokeh's spinner buttons have no accessible name (axe: critical); the field keeps the arrow keys.
NO_SPIN_BUTTONS = ":host .bk-spin-btn { display: none !important; }"
_NOTE_CSS = ":host { font-size: 0.9em; } p { margin: 0.3em 0; }"


def alert_html(message: str) -> str:
    """A message a screen reader announces as it appears, escaped."""
    return f'<span role="alert">{html.escape(message)}</span>' if message else ""


def labelled_checkbox(owner: param.Parameterized, name: str, label: str, **params) -> pn.widgets.CheckBoxGroup:
    """A checkbox for Boolean parameter ``name`` of ``owner``, synced both ways.

    A one-option CheckBoxGroup rather than Panel's Checkbox: Bokeh draws a Checkbox's text
    outside any ``<label>``, so it has no accessible name; each group option is a real label.
    """
    box = pn.widgets.CheckBoxGroup(options=[label], value=[label] if getattr(owner, name) else [],
                                   margin=(2, 10), **params)
    box.param.watch(lambda e: setattr(owner, name, label in e.new), "value")
    owner.param.watch(lambda e: setattr(box, "value", [label] if e.new else []), name)
    return box


def mask_note_html(causal: bool, failure_mode: str, tokens: int) -> str:
    """What the mask settings mean, when they need saying (bidirectional, nothing to mask)."""
    if failure_mode == "mask_after_softmax" and not causal:
        return ("<p>The causal mask is off, so <b>Mask after softmax (broken)</b> has nothing to "
                "act on: no cell is masked before or after softmax.</p>")
    if failure_mode == "mask_after_softmax" and tokens == 1:
        return ("<p>With one token there is no future token, so <b>Mask after softmax "
                "(broken)</b> has nothing to act on.</p>")
    if not causal:
        return ("<p data-testid='bidirectional-note'>The causal mask is off: this is "
                "<b>bidirectional</b> attention, as an encoder uses (seed 004: self-attention may "
                "be causal or bidirectional), so every token can read future tokens, and that is "
                "correct here. A decoder that needs the mask and forgets it is the failure mode "
                "<b>No mask</b>.</p>")
    return ""


def mode_html(failure_mode: str) -> str:
    """The chosen mode's description and the checks it breaks, by their titles."""
    mode = FAILURE_MODES[failure_mode]
    if not mode.breaks:
        return f"<p data-testid='mode-description'>{html.escape(mode.description)}</p>"
    broken = ", ".join(CHECK_TITLES[name] for name in CHECK_TITLES if name in mode.breaks)
    return (f"<p data-testid='mode-description'>{html.escape(mode.description)}</p>"
            f"<p data-testid='mode-breaks'>It breaks: <b>{html.escape(broken)}</b>.</p>")


class InputsView(pn.viewable.Viewer):
    """Tokens, one row per token (``Query i``, ``Key i``, ``Value i``, ``Padding i``), the
    masks, the ``Failure mode`` choice with what it breaks, and the presets."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # No start/end: with bounds the browser silently keeps an out-of-range count without
        # sending it; here set_tokens gets every count and says why it refuses one.
        self.tokens = pn.widgets.IntInput(label="Tokens", value=s.tokens, width=90, margin=(5, 10),
                                          stylesheets=[NO_SPIN_BUTTONS])
        self.tokens.param.watch(lambda e: s.set_tokens(e.new), "value")
        s.param.watch(lambda e: setattr(self.tokens, "value", e.new), "tokens")
        s.param.watch(self._tokens_error_shown, "tokens_error")
        self.tokens_message = pn.pane.HTML(
            pn.bind(alert_html, s.param.tokens_error), visible=pn.bind(bool, s.param.tokens_error),
            stylesheets=[ERROR_CSS], margin=(0, 10))
        self.fields: dict[str, list[pn.widgets.TextInput]] = {f: [] for f, _ in _TOKEN_FIELDS}
        self.padding: list[pn.widgets.CheckBoxGroup] = []
        self.messages: list[pn.pane.HTML] = []  # each token's field messages, under its row
        rows = []
        for i in range(MAX_UI_TOKENS):
            shown = pn.bind(lambda tokens, i=i: i < tokens, s.param.tokens)
            cells = [self._field(field, word, i) for field, word in _TOKEN_FIELDS]
            box = pn.widgets.CheckBoxGroup(options=[f"Padding {i + 1}"], value=[], margin=(25, 5, 2, 5))
            box.param.watch(lambda e, i=i: s.set_padding(i, bool(e.new)), "value")
            self.padding.append(box)
            message = pn.pane.HTML(
                pn.bind(self._row_errors, s.param.field_errors, s.param.use_values, i=i),
                stylesheets=[ERROR_CSS], margin=(0, 10), width=340)
            self.messages.append(message)
            rows.append(pn.Column(pn.Row(*cells, box, margin=0), message, visible=shown, margin=0))
        s.param.watch(self._sync_texts, ["queries", "keys", "values", "padding"])
        s.param.watch(self._mark_fields, ["field_errors", "use_values"])
        self.toggles = pn.Column(
            labelled_checkbox(s, "use_values", "Use values (adds output and contributions)"),
            labelled_checkbox(s, "causal", "Causal mask"),
            labelled_checkbox(s, "mask_after_softmax", "Mask after softmax (broken)"),
            margin=0)
        self.mask_note = pn.pane.HTML(
            pn.bind(mask_note_html, s.param.causal, s.param.failure_mode, s.param.tokens),
            stylesheets=[_NOTE_CSS], margin=(0, 10), sizing_mode="stretch_width")
        self.failure_mode = pn.widgets.Select.from_param(
            s.param.failure_mode, label="Failure mode",
            options={m.title: m.name for m in FAILURE_MODES.values()}, description=None, width=250,
            margin=(5, 10))
        self.mode_note = pn.pane.HTML(pn.bind(mode_html, s.param.failure_mode),
                                      stylesheets=[_NOTE_CSS], margin=(0, 10), sizing_mode="stretch_width")
        self.exposure_note = pn.pane.HTML(
            pn.bind(self._exposure_html, s.param.result), stylesheets=[_NOTE_CSS, ":host { color: #664d03; }"],
            margin=(0, 10), sizing_mode="stretch_width")
        self.expose = pn.widgets.Button(label="", visible=False, margin=(0, 10))
        self.expose.on_click(self._load_exposing_preset)
        s.param.watch(self._sync_expose, ["result", "failure_mode"])
        self.presets = []
        for key in (*_SHOWN_PRESETS, "reset"):
            button = pn.widgets.Button(label=PRESETS[key]["label"] if key in PRESETS else "Reset",
                                       margin=(3, 4))
            button.on_click(lambda _e, key=key: s.apply_preset(key))
            self.presets.append(button)
        self._layout = pn.Column(
            pn.Row(self.tokens, self.failure_mode, margin=0), self.mode_note, self.tokens_message,
            *rows, self.toggles, self.mask_note, self.exposure_note, self.expose,
            pn.pane.HTML("<b>Presets</b>", margin=(5, 10, 0, 10)),
            pn.FlexBox(*self.presets, margin=(0, 6)),
            margin=0, sizing_mode="stretch_width")
        self._mark_fields()
        self._sync_expose()

    def _field(self, field: str, word: str, i: int) -> pn.widgets.TextInput:
        s = self.state
        # A TextInput's value arrives on Enter or when the field is left.
        w = pn.widgets.TextInput(label=f"{word} {i + 1}", value=getattr(s, field)[i], width=72,
                                 margin=(2, 5))
        w.param.watch(lambda e: s.set_token_text(field, i, e.new), "value")
        if field == "values":
            w.visible = s.use_values
            s.param.watch(lambda e: setattr(w, "visible", e.new), "use_values")
        self.fields[field].append(w)
        return w

    def _tokens_error_shown(self, event) -> None:
        if not event.new:  # a preset or reset replaced the bad count the field still shows
            self.tokens.value = self.state.tokens

    def _sync_texts(self, *events) -> None:
        for field, widgets in self.fields.items():
            for w, text in zip(widgets, getattr(self.state, field), strict=True):
                w.value = text
        for box, is_padding in zip(self.padding, self.state.padding, strict=True):
            box.value = list(box.options) if is_padding else []

    def _row_errors(self, errors: dict, use_values: bool, i: int) -> str:
        words = [w for f, w in _TOKEN_FIELDS if f != "values" or use_values]
        return "".join(f"<div>{alert_html(errors[f'{w} {i + 1}'])}</div>"
                       for w in words if f"{w} {i + 1}" in errors)

    def _mark_fields(self, *events) -> None:
        for widgets in self.fields.values():
            for w in widgets:
                w.stylesheets = [_FIELD_ERROR_CSS] if w.label in self.state.field_errors else []

    def _exposure_html(self, result) -> str:
        note = exposure(result) if result is not None else None
        if note is None:
            return ""
        if self.state.failure_mode not in EXPOSING_PRESETS:
            note += " No input on this page can show it: queries and keys are single numbers here."
        return f"<p data-testid='exposure-note' role='note'>{html.escape(note)}</p>"

    def _sync_expose(self, *events) -> None:
        s = self.state
        key = EXPOSING_PRESETS.get(s.failure_mode)
        needed = s.result is not None and key is not None and exposure(s.result) is not None
        if needed:
            self.expose.label = f"Load a preset that shows it: {PRESETS[key]['label']}"
        self.expose.visible = needed

    def _load_exposing_preset(self, _event) -> None:
        s = self.state
        s.apply_preset(EXPOSING_PRESETS[s.failure_mode], failure_mode=s.failure_mode)

    def __panel__(self):
        return self._layout
