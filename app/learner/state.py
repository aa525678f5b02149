"""One learner's workbench state: what was typed, what the core computed, what was saved.

Everything a browser session knows lives on one :class:`LearnerState`. The views read it and
write only the parameters their widgets stand for; derived values (the parsed inputs, the
attention result, the field messages) are computed once per change by a declared dependency.
Saving is an explicit action (:meth:`LearnerState.save_run`). Left out: widgets and layout
(the views in this package) and storage itself (:class:`app.store.RunStore`).
"""

from __future__ import annotations

import panel as pn
import param

from app.shared.parsing import clean_text, parse_number
from app.store import RunStore, StoreError
from attention_core import (
    AttentionInputError,
    AttentionResult,
    scaled_dot_product_attention,
    self_attention,
)
from attention_core.modes import FAILURE_MODES
from attention_core.records import ExperimentRecord, RecordError

MAX_UI_TOKENS = 8
MAX_WIDTH = 4  # largest d_k, d_v and d_model the page offers
MAX_RESTORED_RUNS = 50  # run ids a reloaded page takes back from its URL

INPUT_MODES: dict[str, str] = {
    "vectors": "Numbers or vectors (Q, K, V)",
    "matrices": "X and projections (W_Q, W_K, W_V)",
}
"""The two ways to give the inputs: each token's query, key and value typed directly (one
number per token when d_k = d_v = 1), or X with the projections W_Q, W_K, W_V
(Self-Attention in Matrix Form)."""

TOKEN_FIELDS = ("queries", "keys", "values")
MATRIX_FIELDS = ("x", "w_q", "w_k", "w_v")
GRID_FIELDS = TOKEN_FIELDS + MATRIX_FIELDS
FIELD_NAMES = {"queries": "Query", "keys": "Key", "values": "Value", "x": "X", "w_q": "W_Q",
               "w_k": "W_K", "w_v": "W_V"}
# The core's field names (AttentionInputError.field) for each grid.
_CORE_FIELDS = {"queries": "queries", "keys": "keys", "values": "values", "X": "x", "W_Q": "w_q",
                "W_K": "w_k", "W_V": "w_v"}

_WORKED = {"queries": ["1", "1", "1"], "keys": ["1", "2", "9"], "values": ["10", "20", "100"]}
_FOUR_TOKEN_TRACE = {  # Self-Attention in Matrix Form, "Extend the Four-Token Trace"
    "x": [["1", "0"], ["0", "1"], ["1", "1"], ["-1", "1"]],
    "w_q": [["1", "0"], ["0", "1"]], "w_k": [["1", "0"], ["0", "1"]],
    "w_v": [["1", "1"], ["1", "-1"]],
}


def cell_label(field: str, i: int, j: int, width: int) -> str:
    """The accessible name of one input cell, row ``i`` and column ``j`` counted from 0.

    ``Query 2`` when the field has one column (d_k = 1), else ``Query 2, component 3``;
    ``X token 2, component 1``; ``W_Q row 1, column 2``.
    """
    if field in TOKEN_FIELDS:
        word = FIELD_NAMES[field]
        return f"{word} {i + 1}" if width == 1 else f"{word} {i + 1}, component {j + 1}"
    if field == "x":
        return f"X token {i + 1}, component {j + 1}"
    return f"{FIELD_NAMES[field]} row {i + 1}, column {j + 1}"


def grid_texts(data, rows: int, fill: str = "0") -> list[list[str]]:
    """``data`` (a list of texts, or of lists of texts) as ``rows`` × :data:`MAX_WIDTH` texts,
    padded with ``fill``; a flat list is one text per row."""
    out = []
    for i in range(rows):
        row = data[i] if i < len(data) else []
        row = list(row) if isinstance(row, (list, tuple)) else [row]
        out.append([str(t) for t in row[:MAX_WIDTH]] + [fill] * (MAX_WIDTH - len(row[:MAX_WIDTH])))
    return out


def number_text(x: float | None) -> str:
    """A saved number as a learner would type it, exactly: ``1`` for 1.0, else its shortest
    repr (``float(number_text(x)) == x``)."""
    if x is None:
        return ""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


_IDENTITY = [["1" if i == j else "0" for j in range(MAX_WIDTH)] for i in range(MAX_WIDTH)]

PRESETS: dict[str, dict] = {
    "worked_row": {"label": "Worked row (seed 003)", "tokens": 3, **_WORKED, "use_values": True, "row": 2},
    "large_scores": {
        "label": "Large scores (~1000)", "tokens": 3, "queries": ["100", "100", "100"],
        "keys": ["10", "10.01", "9.99"], "values": ["1", "2", "3"], "use_values": False,
    },
    "all_equal": {
        "label": "All equal", "tokens": 3, "queries": ["1", "1", "1"], "keys": ["2", "2", "2"],
        "values": ["1", "2", "3"], "use_values": False,
    },
    "four_token_trace": {
        "label": "Four-token trace (seed 000)", "input_mode": "matrices", "tokens": 4, "d_model": 2,
        "d_k": 2, "d_v": 2, **_FOUR_TOKEN_TRACE, "use_values": True, "row": 4,  # the chapter traces h_4
    },
    # A wider head's scores are twice what they are divided by √4; this one shows no_scaling.
    "wide_head": {
        "label": "Wide head, d_k = 4", "tokens": 3, "d_k": 4,
        "queries": [["1", "1", "1", "1"]] * 3,
        "keys": [["1", "1", "1", "1"], ["0.5", "0.5", "0.5", "0.5"], ["0", "0", "0", "0"]],
        "values": ["1", "2", "3"], "use_values": False, "row": 2,  # keys 1 and 2 differ
    },
    # Keys mixed instead of values shows only in an output, so this one turns values on.
    "keys_as_values": {
        "label": "Worked row with values, keys mixed", "tokens": 3, **_WORKED, "use_values": True,
        "failure_mode": "keys_as_values", "row": 2,
    },
}
"""Inputs a learner loads with one click. Each sets every input it depends on: the input mode
and sizes (vectors, d_k = d_v = 1 unless given), the token count and texts, values on or off,
the causal mask, the failure mode and no padding. The failure mode is the preset's own if it
names one, the chosen one for a preset that exists to show a mode (a value of
:data:`EXPOSING_PRESETS`: its input is the point, seen beside the correct weights in whichever
mode is chosen), else ``"correct"``. A preset about one row (``"row"``, from 1) chooses it; the
others keep the chosen row where it still exists."""

EXPOSING_PRESETS: dict[str, str] = {"naive_softmax": "large_scores", "keys_as_values": "keys_as_values",
                                    "no_scaling": "wide_head"}
"""For a mode the default input cannot show, the preset whose input does (loaded in that mode)."""

_INPUTS = ("input_mode", "tokens", "d_k", "d_v", "d_model", *GRID_FIELDS, "use_values", "causal",
           "failure_mode", "padding")


def _same_run(a: ExperimentRecord, b: ExperimentRecord) -> bool:
    """Whether two records differ only in id and time (a double-clicked Save run)."""
    fields = ("learner", "label", "prediction", "notes", "inputs", "settings")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _run_name(record: ExperimentRecord) -> str:
    return f"“{record.label}” ({record.id})" if record.label else record.id


def _grid_param(default: list[list[str]], doc: str) -> param.List:
    return param.List(default=default, item_type=list, bounds=(len(default), len(default)), doc=doc)


class LearnerState(param.Parameterized):
    """One learner's workbench.

    Every grid of texts is kept at its largest size (:data:`MAX_UI_TOKENS` or :data:`MAX_WIDTH`
    rows, :data:`MAX_WIDTH` columns), so lowering ``tokens``, ``d_k``, ``d_v`` or ``d_model``
    and raising it again gives back what was typed; only the top-left ``rows × width`` part of
    each grid is used (:meth:`shape`).
    """

    input_mode = param.Selector(default="vectors", objects=list(INPUT_MODES),
                                doc="How the inputs are given: a key of INPUT_MODES.")
    tokens = param.Integer(default=3, bounds=(1, MAX_UI_TOKENS), doc="Number of tokens T.")
    d_k = param.Integer(default=1, bounds=(1, MAX_WIDTH), doc="Width of each query and key.")
    d_v = param.Integer(default=1, bounds=(1, MAX_WIDTH), doc="Width of each value.")
    d_model = param.Integer(default=2, bounds=(1, MAX_WIDTH), doc="Width of each row of X.")
    queries = _grid_param(grid_texts(_WORKED["queries"], MAX_UI_TOKENS), "Typed query of each token.")
    keys = _grid_param(grid_texts(_WORKED["keys"], MAX_UI_TOKENS), "Typed key of each token.")
    values = _grid_param(grid_texts(_WORKED["values"], MAX_UI_TOKENS), "Typed value of each token.")
    x = _grid_param(grid_texts(_FOUR_TOKEN_TRACE["x"], MAX_UI_TOKENS), "Typed X, one row per token.")
    w_q = _grid_param(grid_texts(_IDENTITY, MAX_WIDTH), "Typed W_Q (d_model × d_k).")
    w_k = _grid_param(grid_texts(_IDENTITY, MAX_WIDTH), "Typed W_K (d_model × d_k).")
    w_v = _grid_param(grid_texts(_FOUR_TOKEN_TRACE["w_v"], MAX_WIDTH), "Typed W_V (d_model × d_v).")
    use_values = param.Boolean(default=False, doc="Mix values into an output column.")
    causal = param.Boolean(default=True, doc="Ask for the causal mask (off: bidirectional attention).")
    failure_mode = param.Selector(default="correct", objects=list(FAILURE_MODES),
                                  doc="How attention is computed: a name of FAILURE_MODES.")
    mask_after_softmax = param.Boolean(
        default=False, doc=("The broken mode of Self-attention, \"A worked row\"; always equal to "
                            "failure_mode == 'mask_after_softmax'."))
    padding = param.List(default=[False] * MAX_UI_TOKENS, item_type=bool,
                         bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS),
                         doc="Whether each token is padding (a key no row may read).")
    row = param.Integer(default=2, bounds=(1, MAX_UI_TOKENS),
                        doc="The row (query, from 1) whose steps are shown; at most tokens.")

    learner = param.String(default="", doc="Optional learner name.")
    label = param.String(default="", doc="Optional run label.")
    prediction = param.String(default="", doc="The learner's prediction, required to save.")

    field_errors = param.Dict(default={}, doc="Message per cell label ('Query 2') at fault.")
    tokens_error = param.String(default="", doc="Why the typed token count was not taken, if not.")
    row_error = param.String(default="", doc="Why the typed Row was not taken, if not.")
    result = param.ClassSelector(class_=AttentionResult, default=None, allow_None=True,
                                 doc="The last result computed from valid input.")
    input_ok = param.Boolean(default=True, doc="The current input is valid and shown.")
    saved = param.List(default=[], item_type=ExperimentRecord,
                       doc="Experiment records saved or restored in this session, oldest first.")
    last_saved = param.ClassSelector(class_=ExperimentRecord, default=None, allow_None=True,
                                     doc="The run Save run wrote last: set once for every run saved.")
    save_message = param.String(default="", doc="What the last save did.")
    save_ok = param.Boolean(default=True, doc="Whether the last save worked.")
    store = param.ClassSelector(class_=RunStore, doc="Where runs are saved.")

    opened = param.ClassSelector(class_=ExperimentRecord, default=None, allow_None=True,
                                 doc="The saved run the workbench was opened on, if any.")
    opened_edited = param.Boolean(default=False, doc="An input changed since the run was opened.")
    open_message = param.String(default="", doc="What the page says about an opened run.")
    restore_message = param.String(default="", doc="How many ids of ?runs= were not found.")
    open_ok = param.Boolean(default=True, doc="Whether the last open worked.")

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

    @param.depends("row", "tokens", watch=True)
    def _row_taken(self) -> None:
        self.row_error = ""

    def shape(self, field: str) -> tuple[int, int]:
        """(rows, columns) of the grid ``field`` in use: tokens × d_k for queries and keys,
        tokens × d_v for values, tokens × d_model for X, d_model × d_k (or d_v) for a W."""
        width = {"queries": self.d_k, "keys": self.d_k, "values": self.d_v, "x": self.d_model,
                 "w_q": self.d_k, "w_k": self.d_k, "w_v": self.d_v}[field]
        return (self.d_model if field.startswith("w_") else self.tokens), width

    def active_fields(self) -> tuple[str, ...]:
        """The grids the current mode computes from, in the order they are shown."""
        fields = TOKEN_FIELDS if self.input_mode == "vectors" else ("x", "w_q", "w_k", "w_v")
        return tuple(f for f in fields if self.use_values or f not in ("values", "w_v"))

    def _parsed(self, field: str, errors: dict[str, str]) -> list:
        rows, width = self.shape(field)
        grid = getattr(self, field)
        out = []
        for i in range(rows):
            row = []
            for j in range(width):
                label = cell_label(field, i, j, width)
                try:
                    row.append(parse_number(grid[i][j], label))
                except ValueError as exc:
                    errors[label] = str(exc)
            # One number per token in vector mode at width 1: the core's scalar mode.
            out.append(row[0] if field in TOKEN_FIELDS and width == 1 and row else row)
        return out

    def _error_label(self, exc: AttentionInputError) -> str:
        """The label of the cell a core refusal points at (its first cell when it names none)."""
        field = _CORE_FIELDS.get(exc.field, "queries")
        rows, width = self.shape(field)
        row, column = exc.row or 1, exc.column or 1
        return cell_label(field, min(row, rows) - 1, min(column, width) - 1, width)

    @param.depends(*_INPUTS, watch=True, on_init=True)
    def _compute(self) -> None:
        errors: dict[str, str] = {}
        parsed = {field: self._parsed(field, errors) for field in self.active_fields()}
        if not errors:
            padding = self.padding[:self.tokens]
            options = dict(causal=self.causal, failure_mode=self.failure_mode,
                           padding_mask=[not p for p in padding] if any(padding) else None)
            try:
                if self.input_mode == "matrices":
                    result = self_attention(parsed["x"], parsed["w_q"], parsed["w_k"],
                                            parsed.get("w_v"), **options)
                else:
                    result = scaled_dot_product_attention(
                        parsed["queries"], parsed["keys"], parsed.get("values"), **options)
            except AttentionInputError as exc:
                errors[self._error_label(exc)] = str(exc)
            else:
                # Held, so every view's change from one edit reaches the browser as one message,
                # drawn once (Panel's hold; it does nothing outside a served page).
                with pn.io.hold():
                    self.param.update(result=result, field_errors={}, input_ok=True)
                return
        # Keep the last good result on screen; only the messages change.
        with pn.io.hold():
            self.param.update(field_errors=errors, input_ok=False)

    @param.depends(*_INPUTS, "learner", "label", "prediction", watch=True)
    def _note_edit(self) -> None:
        if self.opened is not None and not self.opened_edited:
            self.param.update(opened_edited=True, open_message=(
                f"Edited from saved run {_run_name(self.opened)}: Save run saves this as a new run; "
                "the saved run stays as it was."))

    def set_row(self, value: object) -> None:
        """Take a typed row (from 1), or keep the current one and say why in :attr:`row_error`."""
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= self.tokens:
            self.param.update(row=value, row_error="")
            return
        shown = "an empty field" if value is None else repr(value)
        rows = "row 1" if self.tokens == 1 else f"a row from 1 to {self.tokens}"
        self.row_error = (f"Row: {shown} is not a row of this input; choose {rows}. "
                          f"Still showing row {self.row}.")

    def set_tokens(self, value: object) -> None:
        """Take a typed token count, or keep the current one and say why in :attr:`tokens_error`."""
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_UI_TOKENS:
            self.param.update(tokens=value, tokens_error="")
            return
        shown = "an empty field" if value is None else repr(value)
        tokens = "1 token" if self.tokens == 1 else f"{self.tokens} tokens"
        self.tokens_error = (f"Tokens: {shown} is not a token count; choose a whole number from 1 "
                             f"to {MAX_UI_TOKENS}. Still showing {tokens}.")

    def set_token_text(self, field: str, index: int, text: str, component: int = 0) -> None:
        """Set what was typed in cell (``index``, ``component``) (both from 0) of the grid
        ``field`` ("queries", "keys", "values", "x", "w_q", "w_k", "w_v")."""
        grid = getattr(self, field)
        if grid[index][component] != text:
            grid = [list(row) for row in grid]
            grid[index][component] = text
            setattr(self, field, grid)

    def set_texts(self, blocks: dict[str, list[list[str]]]) -> None:
        """Set the top-left block of each grid named in ``blocks`` to its rows of texts (as a grid
        shows them), all in one update, so the views never see some fields new and others
        not; the cells outside a block keep what was typed."""
        changed = {}
        for field, texts in blocks.items():
            grid = [list(row) for row in getattr(self, field)]
            for i, row in enumerate(texts[:len(grid)]):
                for j, text in enumerate(row[:MAX_WIDTH]):
                    grid[i][j] = str(text)
            if grid != getattr(self, field):
                changed[field] = grid
        if changed:
            self.param.update(**changed)

    def set_padding(self, index: int, is_padding: bool) -> None:
        """Mark token ``index`` (from 0) as padding or as a real token."""
        padding = list(self.padding)
        if padding[index] != is_padding:
            padding[index] = bool(is_padding)
            self.padding = padding

    def apply_preset(self, name: str, failure_mode: str | None = None) -> None:
        """Load one of :data:`PRESETS` (in ``failure_mode`` if given, else in the mode
        :data:`PRESETS` says), or ``"reset"`` for the starting state. Every input the preset
        depends on is set, so it gives the same result whatever else was chosen before."""
        if name == "reset":
            preset = {p: self.param[p].default for p in _INPUTS}
        else:
            p = PRESETS[name]
            shows_a_mode = name in EXPOSING_PRESETS.values()
            preset = dict(
                input_mode=p.get("input_mode", "vectors"), tokens=p["tokens"], d_k=p.get("d_k", 1),
                d_v=p.get("d_v", 1), use_values=p["use_values"], causal=True,
                failure_mode=p.get("failure_mode", self.failure_mode if shows_a_mode else "correct"),
                padding=[False] * MAX_UI_TOKENS)
            if "d_model" in p:
                preset["d_model"] = p["d_model"]
            for field in GRID_FIELDS:
                if field in p:
                    rows = MAX_WIDTH if field.startswith("w_") else MAX_UI_TOKENS
                    preset[field] = grid_texts(p[field], rows)
        if failure_mode is not None:
            preset["failure_mode"] = failure_mode
        self.param.update(**preset, tokens_error="")
        if name != "reset" and "row" in PRESETS[name]:
            self.param.update(row=PRESETS[name]["row"], row_error="")

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
        if self.opened is not None and not self.opened_edited and _same_run(self.opened, record):
            return self._not_saved(f"this is saved run {_run_name(self.opened)}, unchanged; change "
                                   "an input, a toggle or the text to save a new run")
        if self.saved and _same_run(self.saved[-1], record):
            return self._not_saved(f"this run is already saved as #{len(self.saved)}; change an "
                                   "input, a toggle or the text to save another")
        try:
            self.store.save(record)
        except StoreError as exc:  # already a sentence: "Run not saved: the store … is full."
            self.param.update(save_ok=False, save_message=str(exc))
            return None
        self.param.update(saved=[*self.saved, record], last_saved=record)
        name = f"“{record.label}”" if record.label else f"#{len(self.saved)}"
        self.param.update(save_ok=True, save_message=f"Saved run {name} ({record.id}).")
        return record

    def restore_runs(self, run_ids: list[str]) -> None:
        """Show runs this learner saved before a reload again, by id, oldest first.

        Ids that are malformed, missing or unreadable are skipped (a URL can hold anything):
        :meth:`app.store.RunStore.get` refuses any id that is not a plain run id.
        :attr:`restore_message` says how many were not found, instead of an empty table alone.
        """
        restored = []
        # dict.fromkeys: an id given twice (an edited URL) is the same run, listed once.
        wanted = list(dict.fromkeys(run_ids))[:MAX_RESTORED_RUNS]
        for run_id in wanted:
            try:
                restored.append(self.store.get(run_id))
            except (ValueError, KeyError, OSError):
                continue
        restored.sort(key=lambda r: (r.created_at, r.id))
        missing = len(wanted) - len(restored)
        self.restore_message = "" if not missing else (
            f"{missing} of the {len(wanted)} run ids in this page's address (?runs=) "
            f"{'was' if missing == 1 else 'were'} not found in the store, so "
            f"{'they are' if missing > 1 else 'it is'} not listed below.")
        self.saved = restored

    def open_record(self, record: ExperimentRecord) -> bool:
        """Show saved run ``record`` in the workbench exactly as it was saved: input mode, sizes,
        every input, values on or off, masks, failure mode, padding and the learner's texts.

        Editing it afterwards makes a new run (:meth:`save_run`); the saved one is never
        changed. Records of schema version 1 open too. Returns whether it opened; if not,
        :attr:`open_message` says why and nothing on the page changed.
        """
        try:
            opened = _opened_inputs(record)
        except ValueError as exc:
            self.param.update(open_ok=False, open_message=f"Saved run {record.id} not opened: {exc}")
            return False
        self.opened = None  # so loading its inputs is not an edit
        with pn.io.hold():
            self.param.update(**opened, tokens_error="", learner=record.learner or "",
                              label=record.label or "", prediction=record.prediction or "")
            self.param.update(opened=record, opened_edited=False, open_ok=True, save_message="",
                              open_message=(
                                  f"Showing saved run {_run_name(record)} as it was saved "
                                  f"({record.created_at[:19].replace('T', ' ')} UTC). Editing it "
                                  "makes a new run: Save run saves it under a new id, and the "
                                  "saved run stays as it was."))
        return True

    def open_run_id(self, run_id: str) -> bool:
        """Open the saved run called ``run_id`` (e.g. from ``/?run=<id>``), or say in
        :attr:`open_message` why it cannot: not a run id, no such run, or an unreadable file.
        Never raises for what a URL holds."""
        shown = repr(run_id[:80] + ("…" if len(run_id) > 80 else ""))
        try:
            record = self.store.get(run_id)
        except (RecordError, OSError) as exc:  # RecordError is a ValueError: caught first
            why = f"saved run {shown} could not be read ({exc})."
        except ValueError:
            why = (f"{shown} is not a run id (a run id is up to 64 letters, digits, '-' and '_'); "
                   "check the link.")
        except KeyError:
            why = f"no saved run has the id {shown}; it may have been deleted, or the link is incomplete."
        else:
            return self.open_record(record)
        self.param.update(open_ok=False, open_message=f"Run not opened: {why}")
        return False

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


def _opened_inputs(record: ExperimentRecord) -> dict:
    """The state parameters that show ``record``'s run (any schema version, read back by
    :attr:`ExperimentRecord.run_inputs`), or ``ValueError`` saying why this page cannot (more
    tokens or a wider head than it offers)."""
    run = record.run_inputs
    if run.T > MAX_UI_TOKENS:
        raise ValueError(f"it has {run.T} tokens; this page shows at most {MAX_UI_TOKENS}")
    if run.failure_mode not in FAILURE_MODES:
        raise ValueError(f"its failure mode {run.failure_mode!r} is not one this page knows")
    sizes = {"d_k": run.d_k, "d_v": run.d_v or 1, "d_model": run.d_model or 1}
    for name, size in sizes.items():
        if size > MAX_WIDTH:
            raise ValueError(f"its {name} is {size}; this page offers at most {MAX_WIDTH}")
    real = run.padding_mask
    opened: dict = {
        "input_mode": "matrices" if run.input_mode == "matrix" else "vectors", "tokens": run.T,
        "d_k": run.d_k, "use_values": run.values is not None, "causal": run.causal,
        "failure_mode": run.failure_mode,
        "padding": [real is not None and i < run.T and not real[i] for i in range(MAX_UI_TOKENS)]}
    if run.d_v is not None:
        opened["d_v"] = run.d_v
    if run.input_mode == "matrix":
        opened["d_model"] = run.d_model
        sources = {"x": run.x, "w_q": run.w_q, "w_k": run.w_k, "w_v": run.w_v}
    else:
        sources = {"queries": run.queries, "keys": run.keys, "values": run.values}
    for field, data in sources.items():
        if data is not None:
            rows = MAX_WIDTH if field.startswith("w_") else MAX_UI_TOKENS
            texts = [[number_text(x) for x in (row if isinstance(row, tuple) else (row,))] for row in data]
            opened[field] = grid_texts(texts, rows)
    return opened
