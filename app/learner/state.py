"""One learner's workbench state: what was typed, what the core computed, what was saved.

Everything a browser session knows lives on one :class:`LearnerState`. The views read it and
write only the parameters their widgets stand for; derived values (the parsed inputs, the
attention result, the field messages) are computed once per change by a declared dependency.
Saving is an explicit action (:meth:`LearnerState.save_run`). Left out: widgets and layout
(the views in this package) and storage itself (:class:`attention_core.store.RunStore`).
"""

from __future__ import annotations

import panel as pn
import param

from app.shared.parsing import clean_text, parse_number
from attention_core import AttentionInputError, AttentionResult, scaled_dot_product_attention
from attention_core.modes import FAILURE_MODES
from attention_core.records import ExperimentRecord
from attention_core.store import RunStore, StoreError

MAX_UI_TOKENS = 8
MAX_RESTORED_RUNS = 50  # run ids a reloaded page takes back from its URL

_WORKED = {"queries": ["1", "1", "1"], "keys": ["1", "2", "9"], "values": ["10", "20", "100"]}

PRESETS: dict[str, dict] = {
    "worked_row": {"label": "Worked row (seed 003)", "tokens": 3, **_WORKED, "use_values": True},
    "large_scores": {
        "label": "Large scores (~1000)", "tokens": 3, "queries": ["100", "100", "100"],
        "keys": ["10", "10.01", "9.99"], "values": ["1", "2", "3"], "use_values": False,
    },
    "all_equal": {
        "label": "All equal", "tokens": 3, "queries": ["1", "1", "1"], "keys": ["2", "2", "2"],
        "values": ["1", "2", "3"], "use_values": False,
    },
    # Keys mixed instead of values shows only in an output, so this one turns values on.
    "keys_as_values": {
        "label": "Worked row with values, keys mixed", "tokens": 3, **_WORKED, "use_values": True,
        "failure_mode": "keys_as_values",
    },
}
"""Inputs a learner loads with one click. Each sets every input it depends on: the token count
and texts, values on or off, the causal mask, the failure mode (``"correct"`` unless given) and
no padding."""

EXPOSING_PRESETS: dict[str, str] = {"naive_softmax": "large_scores", "keys_as_values": "keys_as_values"}
"""For a mode the default input cannot show, the preset whose input does (loaded in that mode)."""

_FIELDS = {"queries": "Query", "keys": "Key", "values": "Value"}
_INPUTS = ("tokens", "queries", "keys", "values", "use_values", "causal", "failure_mode", "padding")


def _same_run(a: ExperimentRecord, b: ExperimentRecord) -> bool:
    """Whether two records differ only in id and time (a double-clicked Save run)."""
    fields = ("learner", "label", "prediction", "notes", "inputs", "settings")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _padded(items: list, fill) -> list:
    return list(items) + [fill] * (MAX_UI_TOKENS - len(items))


class LearnerState(param.Parameterized):
    """One learner's workbench.

    The token texts are kept for all :data:`MAX_UI_TOKENS` positions, so lowering ``tokens`` and
    raising it again gives back what was typed.
    """

    tokens = param.Integer(default=3, bounds=(1, MAX_UI_TOKENS), doc="Number of tokens T.")
    queries = param.List(default=_padded(_WORKED["queries"], "0"), item_type=str,
                         bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS), doc="Typed query of each token.")
    keys = param.List(default=_padded(_WORKED["keys"], "0"), item_type=str,
                      bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS), doc="Typed key of each token.")
    values = param.List(default=_padded(_WORKED["values"], "0"), item_type=str,
                        bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS), doc="Typed value of each token.")
    use_values = param.Boolean(default=False, doc="Mix values into an output column.")
    causal = param.Boolean(default=True, doc="Ask for the causal mask (off: bidirectional attention).")
    failure_mode = param.Selector(default="correct", objects=list(FAILURE_MODES),
                                  doc="How attention is computed: a name of FAILURE_MODES.")
    mask_after_softmax = param.Boolean(
        default=False, doc="The broken mode of seed 003; always equal to failure_mode == 'mask_after_softmax'.")
    padding = param.List(default=[False] * MAX_UI_TOKENS, item_type=bool,
                         bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS),
                         doc="Whether each token is padding (a key no row may read).")
    row = param.Integer(default=2, bounds=(1, MAX_UI_TOKENS),
                        doc="The row (query, from 1) whose steps are shown; at most tokens.")

    learner = param.String(default="", doc="Optional learner name.")
    label = param.String(default="", doc="Optional run label.")
    prediction = param.String(default="", doc="The learner's prediction, required to save.")

    field_errors = param.Dict(default={}, doc="Message per field label ('Query 2') at fault.")
    tokens_error = param.String(default="", doc="Why the typed token count was not taken, if not.")
    result = param.ClassSelector(class_=AttentionResult, default=None, allow_None=True,
                                 doc="The last result computed from valid input.")
    input_ok = param.Boolean(default=True, doc="The current input is valid and shown.")
    saved = param.List(default=[], item_type=ExperimentRecord,
                       doc="Experiment records saved or restored in this session, oldest first.")
    save_message = param.String(default="", doc="What the last save did.")
    save_ok = param.Boolean(default=True, doc="Whether the last save worked.")
    store = param.ClassSelector(class_=RunStore, doc="Where runs are saved.")

    def __init__(self, **params) -> None:
        if params.get("mask_after_softmax") and "failure_mode" not in params:
            params["failure_mode"] = "mask_after_softmax"
        super().__init__(**params)

    @param.depends("failure_mode", watch=True, on_init=True)
    def _mode_to_checkbox(self) -> None:
        self.mask_after_softmax = self.failure_mode == "mask_after_softmax"

    @param.depends("mask_after_softmax", watch=True)
    def _checkbox_to_mode(self) -> None:
        if self.mask_after_softmax:
            self.failure_mode = "mask_after_softmax"
        elif self.failure_mode == "mask_after_softmax":
            self.failure_mode = "correct"

    @param.depends("tokens", watch=True, on_init=True)
    def _bound_row(self) -> None:
        self.row = min(self.row, self.tokens)
        self.param.row.bounds = (1, self.tokens)

    @param.depends(*_INPUTS, watch=True, on_init=True)
    def _compute(self) -> None:
        errors: dict[str, str] = {}
        parsed: dict[str, list[float]] = {}
        for field, word in _FIELDS.items():
            if field == "values" and not self.use_values:
                continue
            numbers = []
            for i, text in enumerate(getattr(self, field)[:self.tokens]):
                label = f"{word} {i + 1}"
                try:
                    numbers.append(parse_number(text, label))
                except ValueError as exc:
                    errors[label] = str(exc)
            parsed[field] = numbers
        if not errors:
            padding = self.padding[:self.tokens]
            try:
                result = scaled_dot_product_attention(
                    parsed["queries"], parsed["keys"], parsed.get("values"), causal=self.causal,
                    padding_mask=[not p for p in padding] if any(padding) else None,
                    failure_mode=self.failure_mode,
                )
            except AttentionInputError as exc:
                errors[f"{_FIELDS.get(exc.field, exc.field)} {exc.token or 1}"] = str(exc)
            else:
                # Held, so every view's change from one edit reaches the browser as one message,
                # drawn once (Panel's hold; it does nothing outside a served page).
                with pn.io.hold():
                    self.param.update(result=result, field_errors={}, input_ok=True)
                return
        # Keep the last good result on screen; only the messages change.
        with pn.io.hold():
            self.param.update(field_errors=errors, input_ok=False)

    def set_tokens(self, value: object) -> None:
        """Take a typed token count, or keep the current one and say why in :attr:`tokens_error`."""
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_UI_TOKENS:
            self.param.update(tokens=value, tokens_error="")
            return
        shown = "an empty field" if value is None else repr(value)
        tokens = "1 token" if self.tokens == 1 else f"{self.tokens} tokens"
        self.tokens_error = (f"Tokens: {shown} is not a token count; choose a whole number from 1 "
                             f"to {MAX_UI_TOKENS}. Still showing {tokens}.")

    def set_token_text(self, field: str, index: int, text: str) -> None:
        """Set what was typed for token ``index`` (from 0) of ``field`` ("queries", ...)."""
        texts = list(getattr(self, field))
        if texts[index] != text:
            texts[index] = text
            setattr(self, field, texts)

    def set_padding(self, index: int, is_padding: bool) -> None:
        """Mark token ``index`` (from 0) as padding or as a real token."""
        padding = list(self.padding)
        if padding[index] != is_padding:
            padding[index] = bool(is_padding)
            self.padding = padding

    def apply_preset(self, name: str, failure_mode: str | None = None) -> None:
        """Load one of :data:`PRESETS` (in ``failure_mode`` if given), or ``"reset"`` for the
        starting state. Every input the preset depends on is set, so it gives the same result
        whatever was chosen before."""
        if name == "reset":
            preset = {p: self.param[p].default for p in _INPUTS}
        else:
            p = PRESETS[name]
            preset = dict(
                tokens=p["tokens"], queries=_padded(p["queries"], "0"), keys=_padded(p["keys"], "0"),
                values=_padded(p["values"], "0"), use_values=p["use_values"], causal=True,
                failure_mode=p.get("failure_mode", "correct"), padding=[False] * MAX_UI_TOKENS)
        if failure_mode is not None:
            preset["failure_mode"] = failure_mode
        self.param.update(**preset, tokens_error="")

    def save_run(self) -> ExperimentRecord | None:
        """Write the current run to the store as an experiment record.

        Returns the record, or ``None`` with :attr:`save_message` saying why nothing was saved
        (invalid input, no prediction, text too long, or a store error such as a full disk).
        """
        if not self.input_ok or self.result is None or self.tokens_error:
            problems = [*self.field_errors.values(), *([self.tokens_error] if self.tokens_error else [])]
            return self._not_saved("fix the highlighted inputs first (" + "; ".join(problems) + ")")
        if not self.prediction.strip():
            return self._not_saved("write your prediction first (the Prediction field)")
        try:
            texts = {f: clean_text(getattr(self, f), f) for f in ("learner", "label", "prediction")}
            record = ExperimentRecord.from_result(self.result, **texts)
        except ValueError as exc:
            return self._not_saved(str(exc))
        if self.saved and _same_run(self.saved[-1], record):
            return self._not_saved(f"this run is already saved as #{len(self.saved)}; change an "
                                   "input, a toggle or the text to save another")
        try:
            self.store.save(record)
        except StoreError as exc:  # already a sentence: "Run not saved: the runs directory … is full."
            self.param.update(save_ok=False, save_message=str(exc))
            return None
        self.saved = [*self.saved, record]
        name = f"“{record.label}”" if record.label else f"#{len(self.saved)}"
        self.param.update(save_ok=True, save_message=f"Saved run {name} ({record.id}).")
        return record

    def restore_runs(self, run_ids: list[str]) -> None:
        """Show runs this learner saved before a reload again, by id, oldest first.

        Ids that are malformed, missing or unreadable are skipped (a URL can hold anything):
        :meth:`attention_core.store.RunStore.get` refuses any id that is not a plain run id.
        """
        restored = []
        for run_id in run_ids[:MAX_RESTORED_RUNS]:
            try:
                restored.append(self.store.get(run_id))
            except (ValueError, KeyError, OSError):
                continue
        restored.sort(key=lambda r: (r.created_at, r.id))
        self.saved = restored

    def _not_saved(self, why: str) -> None:
        self.param.update(save_ok=False, save_message=f"Not saved: {why}")
        return None

    def attach_explanation(self, run_ids: list[str], text: str) -> list[ExperimentRecord]:
        """Attach ``text`` as the explanation of the saved runs ``run_ids`` (empty text removes
        it), on disk and in :attr:`saved`; never adds a run.

        Returns the updated records. Raises ``ValueError`` for text over its limit (naming the
        field), ``KeyError`` for a run not in the store, :class:`StoreError` ("Explanation not
        saved: …") on a disk error; runs updated before an error stay updated.
        """
        explanation = clean_text(text, "explanation")
        updated = {}
        try:
            for run_id in run_ids:
                updated[run_id] = self.store.update_explanation(run_id, explanation)
        finally:
            if updated:
                self.saved = [updated.get(r.id, r) for r in self.saved]
        return list(updated.values())
