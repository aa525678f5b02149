"""One learner's workbench state: what was typed, what the core computed, what was saved.

Everything a browser session knows lives on one :class:`LearnerState`. The views read it and
write only the parameters their widgets stand for; derived values (the parsed inputs, the
layer's run over every batch item and the map shown of it, the field messages) are computed
once per change by a declared dependency.
Saving is an explicit action (:meth:`LearnerState.save_run`; a served page's in a worker
thread, :meth:`LearnerState.save_run_in_thread`). Left out: widgets and layout
(the views in this package) and storage itself (:class:`app.store.RunStore`).
"""

from __future__ import annotations

import asyncio
import functools
import secrets

import numpy as np
import panel as pn
import param

from app.learner.page_key import key_hash
from app.shared import store_calls
from app.shared.numbers import format_number
from app.shared.parsing import clean_text, parse_number
from app.shared.words import in_words
from app.store import PAGE_RUNS, NotOwnerError, RunStore, StoreError
from attention_core import (
    ALIGNMENTS,
    MAX_BATCH,
    Ablation,
    AttentionInputError,
    AttentionResult,
    LayerResult,
    attention_layer,
    exposure,
    scaled_dot_product_attention,
)
from attention_core.modes import FAILURE_MODES
from attention_core.records import ExperimentRecord, RecordError

MAX_UI_TOKENS = 8
MAX_WIDTH = 4  # largest d_k, d_v and d_model the page offers
MAX_RESTORED_RUNS = 50  # run ids a reloaded page takes back from its URL
#: A served page whose runs could not be listed as it opened tries again every RELIST_EVERY_S
#: seconds, RELIST_TRIES times (5 minutes), until the store answers.
RELIST_EVERY_S, RELIST_TRIES = 10.0, 30
#: Seconds a served page's save may wait on the store before the page says "Saving…": a save that
#: answers sooner (nearly all: a few ms) sends the browser one message, its answer.
SAVING_SHOWN_AFTER_S = 0.3
#: Seconds a served page's Save run, pressed before the page's key has reached the server (its
#: first moments), waits for the key before it says to press again, and how often it looks.
KEY_WAIT_S, KEY_WAIT_STEP_S = 10.0, 0.05

INPUT_MODES: dict[str, str] = {
    "vectors": "Numbers or vectors (Q, K, V)",
    "matrices": "X and projections (W_Q, W_K, W_V)",
}
"""The two ways to give the inputs: each token's query, key and value typed directly (one
number per token when d_k = d_v = 1), or X with the projections W_Q, W_K, W_V and optionally
W_O (Self-Attention in Matrix Form; Review, "The Complete Layer"). Only the second has a batch,
cross-attention and W_O: the layer projects them from X."""

TOKEN_FIELDS = ("queries", "keys", "values")
MATRIX_FIELDS = ("x", "w_q", "w_k", "w_v", "w_o")
X_FIELDS = ("x", "x_2", "x_3")  # X of batch items 1, 2, 3
KV_FIELDS = ("x_kv", "x_kv_2", "x_kv_3")  # cross-attention's second sequence, per item
PADDING_FIELDS = ("padding", "padding_2", "padding_3")  # each item's key padding
GRID_FIELDS = TOKEN_FIELDS + MATRIX_FIELDS + X_FIELDS[1:] + KV_FIELDS
FIELD_NAMES = {"queries": "Query", "keys": "Key", "values": "Value", "x": "X", "w_q": "W_Q",
               "w_k": "W_K", "w_v": "W_V", "w_o": "W_O", **dict.fromkeys(X_FIELDS[1:], "X"),
               **dict.fromkeys(KV_FIELDS, "X_kv")}
# The core's field names (AttentionInputError.field) for each W grid; X and X_kv go by item.
_CORE_FIELDS = {"queries": "queries", "keys": "keys", "values": "values", "W_Q": "w_q",
                "W_K": "w_k", "W_V": "w_v", "W_O": "w_o"}


@functools.lru_cache(maxsize=4096)
def _typed_number(text: str) -> float:
    """:func:`parse_number` of one cell's text, unnamed (ValueError for a refused text); kept for
    the texts typed already: an edit changes one cell, and the page parses every cell in use."""
    return parse_number(text, "")


def item_of(field: str) -> int:
    """The batch item (from 1) a per-item grid or padding field belongs to; 1 for any other."""
    return int(field[-1]) if field[-2:] in ("_2", "_3") else 1

_WORKED = {"queries": ["1", "1", "1"], "keys": ["1", "2", "9"], "values": ["10", "20", "100"]}
_FOUR_TOKEN_TRACE = {  # Self-Attention in Matrix Form, "Extend the Four-Token Trace"
    "x": [["1", "0"], ["0", "1"], ["1", "1"], ["-1", "1"]],
    "w_q": [["1", "0"], ["0", "1"]], "w_k": [["1", "0"], ["0", "1"]],
    "w_v": [["1", "1"], ["1", "-1"]],
}


def cell_label(field: str, i: int, j: int, width: int, batched: bool = False) -> str:
    """The accessible name of one input cell, row ``i`` and column ``j`` counted from 0.

    ``Query 2`` when the field has one column (d_k = 1), else ``Query 2, component 3``;
    ``X token 2, component 1``, or with a batch (``batched``) ``X item 2 token 2, component 1``;
    ``X_kv token 4, component 2``; ``W_Q row 1, column 2``; ``W_O row 2, column 1``.
    """
    if field in TOKEN_FIELDS:
        word = FIELD_NAMES[field]
        return f"{word} {i + 1}" if width == 1 else f"{word} {i + 1}, component {j + 1}"
    if field in X_FIELDS or field in KV_FIELDS:
        item = f" item {item_of(field)}" if batched else ""
        return f"{FIELD_NAMES[field]}{item} token {i + 1}, component {j + 1}"
    return f"{FIELD_NAMES[field]} row {i + 1}, column {j + 1}"


def padding_label(item: int, i: int, batched: bool = False) -> str:
    """The accessible name of key token ``i``'s (from 0) padding tick: ``Padding 2``, or with a
    batch ``Padding 2, item 1``."""
    return f"Padding {i + 1}, item {item}" if batched else f"Padding {i + 1}"


def layer_exposure(layer: LayerResult) -> str | None:
    """Why this input cannot show the failure of the mode it ran in, or ``None`` if it does:
    :func:`attention_core.exposure` said of the whole layer (a batch breaks checks no one map can)."""
    mode = layer.mode
    if mode.name == "correct" or mode.breaks <= set(layer.failed_checks):
        return None
    return next(filter(None, map(exposure, layer.maps)), None)


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
# The seed's W_V in its first two columns; at d_v > d_model = 2 the columns after them copy X's
# two columns, so no column of V is all zeros for want of a typed weight.
_DEFAULT_W_V = [[*_FOUR_TOKEN_TRACE["w_v"][0], "1", "0"], [*_FOUR_TOKEN_TRACE["w_v"][1], "0", "1"],
                ["0", "0", "1", "0"], ["0", "0", "0", "1"]]
_TWO_BY_TWO = {"w_q": [["1", "0"], ["0", "1"]], "w_k": [["1", "0"], ["0", "1"]],
               "w_v": [["1", "1"], ["1", "-1"]]}
# Review, "The Complete Layer": a W_O that is not its own transpose, so H W_Oᵀ ≠ H W_O shows.
_W_O = [["1", "2"], ["0", "1"]]
_SECOND_ITEM = [["0", "2"], ["1", "0"], ["0", "0"]]  # two real tokens and one of padding

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
    # Review, "The Complete Layer": Y = H W_O with d_v = d_model, so a transposed W_O keeps
    # Y's shape and only the orientation check can tell.
    "output_projection": {
        "label": "Output projection W_O (d_v = d_model)", "input_mode": "matrices", "tokens": 3,
        "d_model": 2, "d_k": 2, "d_v": 2, "x": _FOUR_TOKEN_TRACE["x"][:3], **_TWO_BY_TWO,
        "w_o": _W_O, "use_values": True, "use_w_o": True, "row": 3,
    },
    # Two sequences of different lengths in one batch: the second is padded to the first's.
    "batch_padded": {
        "label": "Batch of two, the second padded", "input_mode": "matrices", "tokens": 3,
        "d_model": 2, "d_k": 2, "d_v": 2, "batch_size": 2, "x": _FOUR_TOKEN_TRACE["x"][:3],
        "x_2": _SECOND_ITEM, **_TWO_BY_TWO, "use_values": True,
        "padding_2": [False, False, True],
    },
    "cross_attention": {
        "label": "Cross-attention, T_q = 2, T_k = 4", "input_mode": "matrices", "tokens": 2,
        "kv_tokens": 4, "cross_attention": True, "causal_alignment": "top_left", "d_model": 2,
        "d_k": 2, "d_v": 2, "x": [["1", "0"], ["0", "1"]], "x_kv": _FOUR_TOKEN_TRACE["x"],
        **_TWO_BY_TWO, "use_values": True,
    },
    # The lesson's "Swapping rows and columns" answers "who reads this token?": with values
    # and the causal mask A is not symmetric, so Aᵀ V and A V differ.
    "who_reads": {"label": "Worked row: who reads token 1", "tokens": 3, **_WORKED,
                  "use_values": True, "row": 1},
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
                                    "no_scaling": "wide_head", "output_projection_transposed": "output_projection",
                                    "batch_items_mixed": "batch_padded", "rows_and_columns_swapped": "who_reads"}
"""For a mode the default input cannot show, the preset whose input does (loaded in that mode)."""

_INPUTS = ("input_mode", "tokens", "d_k", "d_v", "d_model", *GRID_FIELDS, "use_values", "causal",
           "failure_mode", *PADDING_FIELDS, "batch_size", "cross_attention", "kv_tokens",
           "causal_alignment", "use_w_o")
# What a preset leaves as the starting state when it does not name it.
_LAYER_DEFAULTS = {"batch_size": 1, "cross_attention": False, "use_w_o": False}


def change_text(change: str, factor: float | None = None) -> str:
    """What an ablation (of :data:`~attention_core.ablation.ABLATION_CHANGES`) did to its matrix,
    as the page says it: "scaled by 2", "set to zero", "an edited copy"."""
    if change == "scale":
        return f"scaled by {format_number(factor, 'exact')}"
    return {"zero": "set to zero", "edit": "an edited copy"}[change]


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
    w_v = _grid_param(_DEFAULT_W_V, "Typed W_V (d_model × d_v).")
    w_o = _grid_param(grid_texts(_W_O, MAX_WIDTH), "Typed W_O (d_v × d_model).")
    x_2 = _grid_param(grid_texts(_SECOND_ITEM, MAX_UI_TOKENS), "Typed X of batch item 2.")
    x_3 = _grid_param(grid_texts(_FOUR_TOKEN_TRACE["x"][::-1], MAX_UI_TOKENS), "Typed X of batch item 3.")
    x_kv = _grid_param(grid_texts(_FOUR_TOKEN_TRACE["x"], MAX_UI_TOKENS),
                       "Typed X_kv (cross-attention's keys' and values' sequence) of batch item 1.")
    x_kv_2 = _grid_param(grid_texts(_SECOND_ITEM, MAX_UI_TOKENS), "Typed X_kv of batch item 2.")
    x_kv_3 = _grid_param(grid_texts(_FOUR_TOKEN_TRACE["x"][::-1], MAX_UI_TOKENS), "Typed X_kv of batch item 3.")
    use_values = param.Boolean(default=False, doc="Mix values into an output column.")
    use_w_o = param.Boolean(default=False, doc=("Matrix mode: project the output with W_O, Y = H W_O "
                                                "(needs values: ticking it ticks use_values)."))
    batch_size = param.Integer(default=1, bounds=(1, MAX_BATCH),
                               doc="Matrix mode: batch items B, each its own X sharing every W.")
    item = param.Integer(default=1, bounds=(1, MAX_BATCH),
                         doc="The batch item (from 1) whose row steps and contributions are shown.")
    cross_attention = param.Boolean(default=False, doc=(
        "Matrix mode: keys and values projected from a second sequence X_kv of kv_tokens tokens."))
    kv_tokens = param.Integer(default=4, bounds=(1, MAX_UI_TOKENS),
                              doc="Cross-attention: tokens T_k of X_kv (the keys).")
    causal_alignment = param.Selector(default="top_left", objects=list(ALIGNMENTS), doc=(
        "Cross-attention with the causal mask and T_q != T_k: where the causal diagonal sits."))
    causal = param.Boolean(default=True, doc="Ask for the causal mask (off: bidirectional attention).")
    failure_mode = param.Selector(default="correct", objects=list(FAILURE_MODES),
                                  doc="How attention is computed: a name of FAILURE_MODES.")
    mask_after_softmax = param.Boolean(
        default=False, doc=("The broken mode of Self-attention, \"A worked row\"; always equal to "
                            "failure_mode == 'mask_after_softmax'."))
    padding = param.List(default=[False] * MAX_UI_TOKENS, item_type=bool,
                         bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS),
                         doc="Whether each key token (of batch item 1) is padding (a key no row may read).")
    padding_2 = param.List(default=[False] * MAX_UI_TOKENS, item_type=bool,
                           bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS), doc="Padding of batch item 2's key tokens.")
    padding_3 = param.List(default=[False] * MAX_UI_TOKENS, item_type=bool,
                           bounds=(MAX_UI_TOKENS, MAX_UI_TOKENS), doc="Padding of batch item 3's key tokens.")
    row = param.Integer(default=2, bounds=(1, MAX_UI_TOKENS),
                        doc="The row (query, from 1) whose steps are shown; at most tokens.")

    learner = param.String(default="", doc="Optional learner name.")
    label = param.String(default="", doc="Optional run label.")
    prediction = param.String(default="", doc="The learner's prediction, required to save.")
    predict_first = param.Boolean(default=False, doc=(
        "Hide the weights, the checks and the readouts until a prediction is written "
        "(``?predict=first``; the embed without a prediction passed in): the lesson's predict checkpoint."))
    revealed = param.Boolean(default=True, constant=True, doc=(
        "Whether the weights and everything derived from them show: not predict_first, or a "
        "prediction is written."))
    self_check = param.Dict(default=None, allow_None=True, doc=(
        "The learner's last checked self-check answer ({'question', 'choice', 'correct'}): saved "
        "with the next run, then cleared (a later run records it only if checked again)."))
    highlight = param.Tuple(default=None, allow_None=True, length=3, doc=(
        "Cells of the Weights map a Check-yourself answer points at: (row, first column, last "
        "column), from 1, in one row; None for none. Cleared by any change of input or row."))

    field_errors = param.Dict(default={}, doc="Message per cell label ('Query 2') at fault.")
    tokens_error = param.String(default="", doc="Why the typed token count was not taken, if not.")
    row_error = param.String(default="", doc="Why the typed Row was not taken, if not.")
    layer = param.ClassSelector(class_=LayerResult, default=None, allow_None=True, doc=(
        "The whole run last computed from valid input: every batch item, the checks of the layer."))
    result = param.ClassSelector(class_=AttentionResult, default=None, allow_None=True, doc=(
        "The map of layer shown step by step: batch item `item`, or the mixed batch's one map."))
    input_ok = param.Boolean(default=True, doc="The current input is valid and shown.")
    saved = param.List(default=[], item_type=ExperimentRecord,
                       doc="Experiment records saved or restored in this session, oldest first.")
    last_saved = param.ClassSelector(class_=ExperimentRecord, default=None, allow_None=True,
                                     doc="The run Save run wrote last: set once for every run saved.")
    save_message = param.String(default="", doc="What the last save did.")
    save_ok = param.Boolean(default=True, doc="Whether the last save worked.")
    save_from_ablation = param.Boolean(default=False, doc=(
        "The last save asked for was the ablation panel's (Save ablation as a run)."))
    saving = param.Boolean(default=False, doc=(
        "A save is in flight (save_run_in_thread): the store has not answered yet. A press of Save "
        "run meanwhile is that save."))
    save_pending = param.Boolean(default=False, doc=(
        "The save in flight has waited on the store longer than SAVING_SHOWN_AFTER_S: the page "
        "says \"Saving…\" and Save run is off until it answers."))
    store = param.ClassSelector(class_=RunStore, doc="Where runs are saved.")
    key_hash = param.String(default=None, allow_None=True, doc=(
        "SHA-256 (hex) of this page's key (app.learner.page_key): runs are saved with it, and only "
        "runs saved with it can be explained here. A state made without one (a script, a test) makes "
        "a key of its own for its life; a served page takes its browser's (take_page_key)."))
    awaiting_key = param.Boolean(default=False, doc=(
        "A served page whose browser has not sent its key yet: Save run waits for it (KEY_WAIT_S)."))
    owned = param.List(default=[], item_type=str, doc=(
        "Ids of the runs in saved that this page saved (with its key): the only ones it can explain. "
        "The others are shown from a link (?runs=) and only read."))

    opened = param.ClassSelector(class_=ExperimentRecord, default=None, allow_None=True,
                                 doc="The saved run the workbench was opened on, if any.")
    opened_edited = param.Boolean(default=False, doc="An input changed since the run was opened.")
    open_message = param.String(default="", doc="What the page says about an opened run.")
    unlisted = param.Boolean(default=False, doc=(
        "This page's own runs could not be listed (the store did not answer): the next save lists them."))
    restore_message = param.String(default="", doc=(
        "How many ids of ?runs= were not found, or why the page could not list its own runs."))
    open_ok = param.Boolean(default=True, doc="Whether the last open worked.")

    def __init__(self, **params) -> None:
        if params.get("mask_after_softmax") and "failure_mode" not in params:
            params["failure_mode"] = "mask_after_softmax"
        if params.get("key_hash") is None:
            params["key_hash"] = key_hash(secrets.token_hex(16))
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

    @param.depends("predict_first", "prediction", watch=True, on_init=True)
    def _reveal(self) -> None:
        with param.edit_constant(self):
            self.revealed = not self.predict_first or bool(self.prediction.strip())

    @param.depends("use_w_o", watch=True)
    def _w_o_needs_values(self) -> None:
        if self.use_w_o:
            self.use_values = True

    @param.depends("use_values", watch=True)
    def _no_w_o_without_values(self) -> None:
        if not self.use_values:
            self.use_w_o = False

    @param.depends(*_INPUTS, "row", "item", watch=True)
    def _drop_highlight(self) -> None:
        # The cells it pointed at may now hold other numbers, or not exist.
        self.highlight = None

    @param.depends("tokens", "result", watch=True, on_init=True)
    def _bound_row(self) -> None:
        rows = self.shown_rows()
        self.row = min(self.row, rows)
        self.param.row.bounds = (1, rows)

    @param.depends("row", "tokens", watch=True)
    def _row_taken(self) -> None:
        self.row_error = ""

    @param.depends("batch_size", watch=True, on_init=True)
    def _bound_item(self) -> None:
        self.item = min(self.item, self.batch_size)
        self.param.item.bounds = (1, self.batch_size)

    @param.depends("item", watch=True)
    def _show_item(self) -> None:
        if self.layer is not None:
            self.result = self._shown(self.layer)

    @property
    def matrices(self) -> bool:
        """Whether the inputs are X and the W's (the only mode with a batch, cross-attention, W_O)."""
        return self.input_mode == "matrices"

    @property
    def batched(self) -> bool:
        """Whether a batch of more than one item is computed (and its cells named by item)."""
        return self.matrices and self.batch_size > 1

    @property
    def cross(self) -> bool:
        """Whether cross-attention is computed (keys and values from X_kv)."""
        return self.matrices and self.cross_attention

    @property
    def key_tokens(self) -> int:
        """T_k: the keys' token count (kv_tokens in cross-attention, else tokens)."""
        return self.kv_tokens if self.cross else self.tokens

    def shown_rows(self) -> int:
        """Rows of the map shown step by step: tokens, or B·T for the mixed batch's one map."""
        if self.layer is not None and self.layer.flattened and self.result is self.layer.maps[0]:
            return self.result.T
        return self.tokens

    def shape(self, field: str) -> tuple[int, int]:
        """(rows, columns) of the grid ``field`` in use: tokens × d_k for queries and keys,
        tokens × d_v for values, tokens × d_model for X (kv_tokens × d_model for X_kv),
        d_model × d_k (or d_v) for W_Q, W_K, W_V, d_v × d_model for W_O."""
        width = {"queries": self.d_k, "keys": self.d_k, "values": self.d_v, "w_q": self.d_k,
                 "w_k": self.d_k, "w_v": self.d_v}.get(field, self.d_model)
        if field == "w_o":
            return self.d_v, self.d_model
        if field in KV_FIELDS:
            return self.kv_tokens, width
        return (self.d_model if field.startswith("w_") else self.tokens), width

    def active_fields(self) -> tuple[str, ...]:
        """The grids the current mode computes from, in the order they are shown: each item's
        X (then X_kv in cross-attention), then the W's."""
        if self.input_mode == "vectors":
            fields = TOKEN_FIELDS
        else:
            B = self.batch_size
            fields = (*X_FIELDS[:B], *(KV_FIELDS[:B] if self.cross_attention else ()),
                      "w_q", "w_k", "w_v", *(("w_o",) if self.use_w_o else ()))
        return tuple(f for f in fields if self.use_values or f not in ("values", "w_v", "w_o"))

    def key_field(self, item: int) -> str:
        """The grid whose rows are batch item ``item``'s (from 1) keys: its X_kv in
        cross-attention, else its X (or the keys in vector mode); its rows carry the padding ticks."""
        if self.input_mode == "vectors":
            return "queries"
        return KV_FIELDS[item - 1] if self.cross_attention else X_FIELDS[item - 1]

    def cell_name(self, field: str, i: int, j: int) -> str:
        """:func:`cell_label` of cell (``i``, ``j``) of ``field`` as this page names it now."""
        return cell_label(field, i, j, self.shape(field)[1], self.batched)

    def _parsed(self, field: str, errors: dict[str, str]) -> list:
        rows, width = self.shape(field)
        grid = getattr(self, field)
        out = []
        for i in range(rows):
            row = []
            for j in range(width):
                try:
                    row.append(_typed_number(grid[i][j]))
                except ValueError:  # said again with the cell's name, which only a refusal needs
                    label = self.cell_name(field, i, j)
                    try:
                        parse_number(grid[i][j], label)
                    except ValueError as exc:
                        errors[label] = str(exc)
            # One number per token in vector mode at width 1: the core's scalar mode.
            out.append(row[0] if field in TOKEN_FIELDS and width == 1 and row else row)
        return out

    def _error_label(self, exc: AttentionInputError) -> str:
        """The label of the cell a core refusal points at: its field's grid (X and X_kv by batch
        item), row (token) and column (component); the first cell when it names none."""
        item = exc.item or 1
        if exc.field in ("X", "X_kv"):
            field = (X_FIELDS if exc.field == "X" else KV_FIELDS)[item - 1]
        elif self.matrices and exc.field in TOKEN_FIELDS:  # projected from the item's X (or X_kv)
            field = X_FIELDS[item - 1] if exc.field == "queries" else self.key_field(item)
        elif exc.field in _CORE_FIELDS:
            field = _CORE_FIELDS[exc.field]
        else:  # padding_mask, causal_alignment: no cell of their own; the item's first key cell
            field = self.key_field(item) if self.matrices else "queries"
        if field not in self.active_fields():
            field = self.active_fields()[0]
        rows, width = self.shape(field)
        row, column = exc.row or exc.token or 1, exc.column or 1
        return self.cell_name(field, min(row, rows) - 1, min(column, width) - 1)

    def _padding_mask(self) -> list | None:
        """Each item's real keys (``True`` = real), one row per item, or ``None`` if none is padding."""
        B = self.batch_size if self.matrices else 1
        rows = [getattr(self, f)[:self.key_tokens] for f in PADDING_FIELDS[:B]]
        if not any(any(r) for r in rows):
            return None
        real = [[not p for p in r] for r in rows]
        return real if B > 1 else real[0]

    def _layer(self, parsed: dict) -> LayerResult:
        """The run of ``parsed`` inputs: :func:`attention_layer` in matrix mode, else the one
        sequence of :func:`scaled_dot_product_attention` as a batch of one."""
        options = dict(causal=self.causal, failure_mode=self.failure_mode, padding_mask=self._padding_mask())
        if not self.matrices:
            return LayerResult.of(scaled_dot_product_attention(
                parsed["queries"], parsed["keys"], parsed.get("values"), **options))
        B = self.batch_size
        x = [parsed[f] for f in X_FIELDS[:B]]
        x_kv = [parsed[f] for f in KV_FIELDS[:B]] if self.cross_attention else None
        # The alignment only means something where the causal diagonal is not the main one.
        aligned = self.cross_attention and self.causal and self.kv_tokens != self.tokens
        return attention_layer(
            x if B > 1 else x[0], parsed["w_q"], parsed["w_k"], parsed.get("w_v"), parsed.get("w_o"),
            x_kv=None if x_kv is None else (x_kv if B > 1 else x_kv[0]),
            causal_alignment=self.causal_alignment if aligned else None, **options)

    def _shown(self, layer: LayerResult) -> AttentionResult:
        return layer.maps[min(self.item, len(layer.maps)) - 1]

    @param.depends(*_INPUTS, watch=True, on_init=True)
    def _compute(self) -> None:
        errors: dict[str, str] = {}
        parsed = {field: self._parsed(field, errors) for field in self.active_fields()}
        if not errors:
            try:
                layer = self._layer(parsed)
            except AttentionInputError as exc:
                errors[self._error_label(exc)] = str(exc)
            else:
                # Held, so every view's change from one edit reaches the browser as one message,
                # drawn once (Panel's hold; it does nothing outside a served page).
                with pn.io.hold():
                    self.param.update(layer=layer, result=self._shown(layer), field_errors={},
                                      input_ok=True)
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
        most = self.shown_rows()
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most:
            self.param.update(row=value, row_error="")
            return
        shown = "an empty field" if value is None else repr(value)
        rows = "row 1" if most == 1 else f"a row from 1 to {most}"
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
        ``field`` (one of :data:`GRID_FIELDS`: "queries", "x", "x_kv_2", "w_o", ...)."""
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

    def set_padding(self, index: int, is_padding: bool, item: int = 1) -> None:
        """Mark key token ``index`` (from 0) of batch item ``item`` (from 1) as padding or as a
        real token."""
        field = PADDING_FIELDS[item - 1]
        padding = list(getattr(self, field))
        if padding[index] != is_padding:
            padding[index] = bool(is_padding)
            setattr(self, field, padding)

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
                **{f: (list(p.get(f, [])) + [False] * MAX_UI_TOKENS)[:MAX_UI_TOKENS]
                   for f in PADDING_FIELDS},
                **{k: p.get(k, v) for k, v in _LAYER_DEFAULTS.items()})
            for key in ("d_model", "kv_tokens", "causal_alignment"):
                if key in p:
                    preset[key] = p[key]
            for field in GRID_FIELDS:
                if field in p:
                    rows = MAX_WIDTH if field.startswith("w_") else MAX_UI_TOKENS
                    preset[field] = grid_texts(p[field], rows)
        if failure_mode is not None:
            preset["failure_mode"] = failure_mode
        self.param.update(**preset, tokens_error="")
        if name != "reset" and "row" in PRESETS[name]:
            self.param.update(row=PRESETS[name]["row"], row_error="")

    def save_ablation(self, ablation: Ablation) -> str:
        """Save the current run with ``ablation`` (the ablation panel's Save button), as
        :meth:`press_save` does; returns what :attr:`save_message` says about it, or ``""``
        while a served page's save is in flight (:attr:`save_message` says the rest)."""
        return "" if self.press_save(ablation) else self.save_message

    def press_save(self, ablation: Ablation | None = None) -> bool:
        """What Save run's click does: on a served page the store's reads and write run in a
        worker thread (as :meth:`save_run_in_thread`) and the page stays live meanwhile; without
        a server (a script, a notebook, a test) :meth:`save_run` at once. Returns whether a save
        is in flight (this press's, or one pressed before: a press meanwhile is that save)."""
        if not store_calls.served():
            self.save_run(ablation)
            return False
        if self.awaiting_key and not self.saving:  # it waits for the key (save_run_in_thread)
            pn.state.execute(functools.partial(self.save_run_in_thread, ablation))
            return True
        record = self._begin_save(ablation)
        if record is not None:
            pn.state.execute(functools.partial(self._save_in_thread, record, ablation))
        return self.saving

    def save_run(self, ablation: Ablation | None = None) -> ExperimentRecord | None:
        """Write the current run (:attr:`layer`) to the store as an experiment record, with
        ``ablation`` (an :class:`~attention_core.Ablation` of this layer) if given, and
        :attr:`self_check` if one was checked since the last saved run (then cleared).

        Returns the record, or ``None`` with :attr:`save_message` saying why nothing was saved
        (invalid input, no prediction, text too long, or a store error such as a full disk), or
        that this run is already saved (:attr:`save_ok` stays true: nothing failed).
        """
        record = self._record_to_save(ablation)
        if record is None:
            return None
        if self.unlisted:  # a reload while the store was down: its earlier runs first
            self._list_own_runs()
        if self._already_saved(record):
            return None
        try:
            self.store.save(record, key_hash=self.key_hash)
        except StoreError as exc:  # already a sentence: "Run not saved: the store is full."
            self.param.update(save_ok=False, save_message=exc.for_learner())
            return None
        return self._saved(record, ablation)

    async def save_run_in_thread(self, ablation: Ablation | None = None) -> ExperimentRecord | None:
        """:meth:`save_run`, with the store's reads and write in a store thread
        (:mod:`app.shared.store_calls`), so every other page of the process goes on while the
        store takes its time (a locked table, a busy disk). :attr:`saving` is true meanwhile (a
        call then saves nothing); past :data:`SAVING_SHOWN_AFTER_S` the page says "Saving…" and
        Save run is off (:attr:`save_pending`) until the store answers."""
        if self.awaiting_key and not self.saving:
            self.saving = True
            return await self._save_once_key_arrives(ablation)
        record = self._begin_save(ablation)
        return None if record is None else await self._save_in_thread(record, ablation)

    async def _save_once_key_arrives(self, ablation: Ablation | None) -> ExperimentRecord | None:
        """Save run pressed in a served page's first moments, before its key has reached the
        server (:attr:`saving` is already true: a press meanwhile is this save): wait for the key
        (at most :data:`KEY_WAIT_S`, "Saving…" after :data:`SAVING_SHOWN_AFTER_S`), then save as
        :meth:`save_run_in_thread`; still no key, and :attr:`save_message` says to press again."""
        try:
            for step in range(int(KEY_WAIT_S / KEY_WAIT_STEP_S)):
                if not self.awaiting_key:
                    break
                if step * KEY_WAIT_STEP_S >= SAVING_SHOWN_AFTER_S and not self.save_pending:
                    self.param.update(save_pending=True, save_ok=True, save_message="Saving…")
                await asyncio.sleep(KEY_WAIT_STEP_S)
        finally:
            self.param.update(saving=False, save_pending=False)
        record = self._begin_save(ablation)
        return None if record is None else await self._save_in_thread(record, ablation)

    def _begin_save(self, ablation: Ablation | None) -> ExperimentRecord | None:
        if self.saving:  # a second click while the first save is in flight: it is that save
            return None
        record = self._record_to_save(ablation)
        if record is not None:
            self.saving = True  # no view shows it: a save that answers at once sends one message
        return record

    async def _save_in_thread(self, record: ExperimentRecord, ablation: Ablation | None) -> ExperimentRecord | None:
        # Counted in flight until the page has been told, so a stopping server waits for it.
        async def with_the_store() -> bool:  # whether the record was written
            if self.unlisted:  # a reload while the store was down: its earlier runs first
                await self._list_own_runs_in_thread()
            if self._already_saved(record):
                return False
            await store_calls.in_thread(self.store.save, record, key_hash=self.key_hash)
            return True

        with store_calls.in_flight():
            try:
                work = asyncio.ensure_future(with_the_store())
                if not (await asyncio.wait({work}, timeout=SAVING_SHOWN_AFTER_S))[0]:
                    self.param.update(save_pending=True, save_ok=True, save_message="Saving…")
                try:
                    if not await work:
                        return None
                except StoreError as exc:
                    self.param.update(save_pending=False, save_ok=False, save_message=exc.for_learner())
                    return None
                return self._saved(record, ablation)
            except Exception:  # not left saying "Saving…"; the server's log gets the traceback
                self.param.update(save_pending=False, save_ok=False,
                                  save_message="Run not saved: the server failed (its log says why).")
                raise
            finally:
                self.param.update(saving=False, save_pending=False)

    async def _list_own_runs_in_thread(self, retrying: bool = False) -> None:
        """:meth:`_list_own_runs` with the store's read in a store thread (``retrying``: as the
        page tries again by itself, and says so)."""
        self._took_own_runs(await store_calls.in_thread(self._read_own_runs), retrying)

    def _record_to_save(self, ablation: Ablation | None) -> ExperimentRecord | None:
        """The record Save run would store now, or ``None`` with :attr:`save_message` saying why
        there is none (nothing in the store is read)."""
        self.save_from_ablation = ablation is not None
        if (to_fix := inputs_to_fix(self.input_ok, self.tokens_error, self.field_errors)) or self.layer is None:
            return self._not_saved(f"fix the highlighted inputs first ({to_fix})")
        if not self.prediction.strip():
            return self._not_saved("write your prediction first (the Prediction field)")
        if self.awaiting_key:
            return self._not_saved("this page is still connecting to the server (its key has not arrived); "
                                   "press Save run again in a moment")
        try:
            texts = {f: clean_text(getattr(self, f), f) for f in ("learner", "label", "prediction")}
            record = ExperimentRecord.from_result(self.layer, ablation=ablation, self_check=self.self_check,
                                                  **texts)
        except ValueError as exc:
            return self._not_saved(str(exc))
        if self.self_check is None and self.opened is not None and not self.opened_edited \
                and _same_run(self.opened, record):
            return self._not_saved(f"this is saved run {_run_name(self.opened)}, unchanged; change "
                                   "an input, a toggle or the text to save a new run")
        return record

    def _already_saved(self, record: ExperimentRecord) -> bool:
        """Whether ``record`` is this page's last saved run again (then :attr:`save_message` says
        so). A self-check answer checked since is new: it is saved, with the run it was checked on."""
        if self.self_check is not None or not self.saved or not _same_run(self.saved[-1], record):
            return False
        # Not a failure: what the learner asked for is in the store (a double click, or Save
        # run pressed again), so it reads as the save's answer, not in the colour of an error.
        self.param.update(save_ok=True, save_pending=False, save_message=(
            f"Already saved as #{len(self.saved)}: change an input, a toggle or the text to "
            "save another run."))
        return True

    def _saved(self, record: ExperimentRecord, ablation: Ablation | None) -> ExperimentRecord:
        """Show ``record``, just committed, as this page's newest saved run."""
        name = f"“{record.label}”" if record.label else f"#{len(self.saved) + 1}"
        # The ablation panel's save is said here too: which ablation, so it is not taken for Save run's.
        what = "" if ablation is None else \
            f", the ablation {ablation.target}: {change_text(ablation.change, ablation.factor)}"
        # Held, as an edit's result is: the new run in Saved runs, its tick, the exercise's test
        # and this message reach the browser as one message, not one per view.
        with pn.io.hold():
            self.param.update(owned=[*self.owned, record.id], saved=[*self.saved, record], last_saved=record,
                              self_check=None, save_ok=True, save_pending=False,
                              save_message=f"Saved run {name}{what} ({record.id}).")
        return record

    def take_page_key(self, key: str) -> None:
        """Take this page's key from its browser (:class:`~app.learner.page_key.PageKey`) and
        list the runs saved with it (the latest :data:`~app.store.PAGE_RUNS`) beside those shown,
        oldest first: after a reload (with or without ``?runs=``), and a run committed while the
        server died, before the page heard, is listed once the page is back.

        On a served page the store's read runs in a store thread, and Save run waits for
        it (:attr:`awaiting_key` stays true until then): a page opened while the store is slow
        holds no other page. A ``key`` that is not a page key (an edited page) is not taken: the
        page keeps a key of its own until a reload, and :attr:`restore_message` says so. Never
        raises.
        """
        try:
            self.key_hash = key_hash(key)
        except ValueError:
            self.param.update(awaiting_key=False, restore_message=(
                "This browser sent no usable page key: runs saved now are this page's only until "
                "it is reloaded (their links still show them)."))
            return
        if store_calls.served():
            pn.state.execute(self._take_own_runs_in_thread)
        else:
            self.awaiting_key = False
            self._list_own_runs()

    async def _take_own_runs_in_thread(self) -> None:
        try:
            await self._list_own_runs_in_thread()
        finally:
            self.awaiting_key = False
        # Listed once the store answers again, without a reload or a save (for a while: bounded).
        for _ in range(RELIST_TRIES):
            if not self.unlisted:
                return
            if not self.restore_message.endswith(_RETRYING):
                self.restore_message += _RETRYING
            await asyncio.sleep(RELIST_EVERY_S)
            if self.unlisted:  # a save meanwhile may have listed them
                await self._list_own_runs_in_thread(retrying=True)

    def _list_own_runs(self) -> None:
        """List the runs saved with this page's key beside those shown (see :meth:`take_page_key`);
        when the store cannot say, :attr:`restore_message` says so and the next save tries again."""
        self._took_own_runs(self._read_own_runs())

    def _read_own_runs(self) -> list[ExperimentRecord] | Exception:
        """The runs saved with this page's key, or why the store could not list them (never raises)."""
        try:
            return self.store.page_runs(self.key_hash, limit=PAGE_RUNS)
        except (RecordError, StoreError) as exc:
            return exc

    def _took_own_runs(self, own: list[ExperimentRecord] | Exception, retrying: bool = False) -> None:
        """Show this page's runs as the store listed them, or say why it could not (the same
        words again, as a page retrying gets them, send nothing)."""
        if isinstance(own, Exception):
            self.param.update(unlisted=True, restore_message=(
                f"{_UNLISTED}{said_to_learner(own)}{_RETRYING if retrying else ''}"))
            return
        self.unlisted = False
        if self.restore_message.startswith(_UNLISTED):
            self.restore_message = ""
        self._show_also(own, owned=True)

    def _show_also(self, records: list[ExperimentRecord], *, owned: bool) -> None:
        """Add ``records`` to :attr:`saved` (a run listed once), oldest first; ``owned``: this
        page's own. A reload is not a new prediction: an empty Prediction takes the latest own
        run's, as under ?predict=first the page would hide what Saved runs compares. Runs shown
        from a link are someone's, maybe another learner's: their prediction is not this
        learner's, and a run saved next would store it as theirs."""
        by_id = {r.id: r for r in [*self.saved, *records]}
        shown = sorted(by_id.values(), key=lambda r: (r.created_at, r.id))
        mine = list(dict.fromkeys([*self.owned, *(r.id for r in records)])) if owned else self.owned
        self.param.update(owned=mine, saved=shown)
        if owned and records and not self.prediction.strip():
            self.prediction = max(records, key=lambda r: (r.created_at, r.id)).prediction or ""

    def restore_runs(self, run_ids: list[str]) -> None:
        """Show the runs a link names (``?runs=``) again, by id, oldest first: read only, unless
        this page saved them (:meth:`take_page_key` marks its own).

        Ids that are malformed, missing or unreadable are skipped (a URL can hold anything):
        :meth:`app.store.RunStore.get` refuses any id that is not a plain run id.
        :attr:`restore_message` says how many were skipped and why (not a run id, not in the
        store, unreadable), instead of an empty table alone.
        """
        wanted = _wanted_ids(run_ids)
        self._show_restored(len(wanted), *self._read_runs(wanted))

    async def restore_runs_in_thread(self, run_ids: list[str]) -> None:
        """:meth:`restore_runs` with the store's reads in a store thread (a served page opening)."""
        wanted = _wanted_ids(run_ids)
        self._show_restored(len(wanted), *await store_calls.in_thread(self._read_runs, wanted))

    def _read_runs(self, wanted: list[str]) -> tuple[list[ExperimentRecord], dict[str, list[str]]]:
        """The runs of ``wanted`` the store holds, and the others by why (never raises)."""
        restored = []
        skipped: dict[str, list[str]] = {"not run ids": [], "not found": [], "unreadable": []}
        for run_id in wanted:
            try:
                restored.append(self.store.get(run_id))
            except (RecordError, OSError):  # RecordError is a ValueError: caught first
                skipped["unreadable"].append(run_id)
            except ValueError:
                skipped["not run ids"].append(run_id)
            except KeyError:
                skipped["not found"].append(run_id)
        return restored, skipped

    def _show_restored(self, wanted: int, restored: list[ExperimentRecord], skipped: dict[str, list[str]]) -> None:
        self.restore_message = _restore_message(wanted, skipped)
        self._show_also(restored, owned=False)

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
        return self._open_read(self._read_run(run_id))

    async def open_run_id_in_thread(self, run_id: str) -> bool:
        """:meth:`open_run_id` with the store's read in a store thread (a served page opening)."""
        return self._open_read(await store_calls.in_thread(self._read_run, run_id))

    def _read_run(self, run_id: str) -> ExperimentRecord | str:
        """The saved run called ``run_id``, or why it cannot be opened (never raises)."""
        shown = _shown_id(run_id)
        try:
            return self.store.get(run_id)
        except (RecordError, OSError) as exc:  # RecordError is a ValueError: caught first
            # Not in brackets: the store's own sentence may hold some ("… longer than 8 s); try again.").
            return f"saved run {shown} could not be read: {said_to_learner(exc)}"
        except ValueError:
            return f"{shown} is not a run id {_RUN_ID_RULE}; check the link."
        except KeyError:
            return f"no saved run has the id {shown}; it may have been deleted, or the link is incomplete."

    def _open_read(self, read: ExperimentRecord | str) -> bool:
        if isinstance(read, ExperimentRecord):
            return self.open_record(read)
        self.param.update(open_ok=False, open_message=f"Run not opened: {read}")
        return False

    def _not_saved(self, why: str) -> None:
        self.param.update(save_ok=False, save_message=f"Not saved: {why}")
        return None

    def attach_explanation(self, run_ids: list[str], text: str) -> list[ExperimentRecord]:
        """Attach ``text`` as the explanation of the saved runs ``run_ids`` (empty text removes
        it), on disk and in :attr:`saved`; never adds a run. Only this page's own runs
        (:attr:`owned`): the store checks the key again (:meth:`RunStore.update_explanation`).

        Returns the updated records. Raises ``ValueError`` for text over its limit (naming the
        field), :class:`~app.store.NotOwnerError` (nothing changed) when a run is not this
        page's, ``KeyError`` for a run not in the store, :class:`StoreError` ("Explanation not
        saved: …") on a disk error; runs updated before an error stay updated.
        """
        explanation = clean_text(text, "explanation")
        foreign = [run_id for run_id in run_ids if run_id not in self.owned]
        if foreign:
            raise NotOwnerError(foreign[0])
        updated = {}
        try:
            for run_id in run_ids:
                updated[run_id] = self.store.update_explanation(run_id, explanation, key_hash=self.key_hash)
        finally:
            if updated:
                self.saved = [updated.get(r.id, r) for r in self.saved]
        return list(updated.values())


_UNLISTED = "This page's saved runs could not be listed: "
_RETRYING = " It tries again by itself."


def _wanted_ids(run_ids: list[str]) -> list[str]:
    # dict.fromkeys: an id given twice (an edited URL) is the same run, listed once.
    return list(dict.fromkeys(run_ids))[:MAX_RESTORED_RUNS]


def inputs_to_fix(input_ok: bool, tokens_error: str, field_errors: dict[str, str]) -> str:
    """What stops Save run now ("" when nothing does): the refused fields' messages and the
    token count's, joined by "; " (a :class:`LearnerState`'s ``input_ok``, ``tokens_error`` and
    ``field_errors``)."""
    if input_ok and not tokens_error:
        return ""
    return "; ".join([*field_errors.values(), *([tokens_error] if tokens_error else [])]) or "the inputs"


def said_to_learner(error: Exception) -> str:
    """``error`` as a learner's page says it: a store's error without the store's address or
    the driver's words (:meth:`StoreError.for_learner`), any other as it is."""
    return error.for_learner() if isinstance(error, StoreError) else str(error)


def _texts(data, rows: int) -> list[list[str]]:
    """Saved numbers (one per token, or rows of them) as a grid's texts, exactly."""
    texts = [[number_text(x) for x in (row if isinstance(row, (tuple, list, np.ndarray)) else (row,))]
             for row in data]
    return grid_texts(texts, rows)


def _opened_inputs(record: ExperimentRecord) -> dict:
    """The state parameters that show ``record``'s run (any schema version, read back by
    :attr:`ExperimentRecord.run_inputs` and computed again), or ``ValueError`` saying why this
    page cannot (more tokens, items or a wider head than it offers)."""
    run = record.run_inputs
    if run.failure_mode not in FAILURE_MODES:
        raise ValueError(f"its failure mode {run.failure_mode!r} is not one this page knows")
    layer = run.compute()
    sizes = {"d_k": layer.d_k, "d_v": layer.d_v or 1, "d_model": layer.d_model or 1}
    for name, size in sizes.items():
        if size > MAX_WIDTH:
            raise ValueError(f"its {name} is {size}; this page offers at most {MAX_WIDTH}")
    for name, size in {"tokens": layer.T, "keys": layer.T_k}.items():
        if size > MAX_UI_TOKENS:
            raise ValueError(f"it has {size} {name}; this page shows at most {MAX_UI_TOKENS}")
    real = layer.padding_mask
    first = layer.maps[0]
    opened: dict = {
        "input_mode": "matrices" if layer.x is not None else "vectors", "tokens": layer.T,
        "d_k": layer.d_k, "use_values": first.values is not None, "causal": layer.causal,
        "failure_mode": layer.mode.name, "batch_size": layer.B, "cross_attention": layer.cross,
        "use_w_o": layer.w_o is not None}
    for b, field in enumerate(PADDING_FIELDS):
        opened[field] = [real is not None and b < layer.B and i < layer.T_k and not real[b][i]
                         for i in range(MAX_UI_TOKENS)]
    if layer.d_v is not None:
        opened["d_v"] = layer.d_v
    if layer.cross:
        opened["kv_tokens"] = layer.T_k
    if layer.causal_alignment is not None:
        opened["causal_alignment"] = layer.causal_alignment
    if layer.x is not None:
        opened["d_model"] = layer.d_model
        sources = {"w_q": layer.w_q, "w_k": layer.w_k, "w_v": layer.w_v, "w_o": layer.w_o,
                   **dict(zip(X_FIELDS, layer.x, strict=False)),
                   **dict(zip(KV_FIELDS, layer.x_kv if layer.cross else (), strict=False))}
    else:  # scalar and vector runs: the typed numbers as saved
        sources = {"queries": run.queries, "keys": run.keys, "values": run.values}
    for field, data in sources.items():
        if data is not None:
            opened[field] = _texts(data, MAX_WIDTH if field.startswith("w_") else MAX_UI_TOKENS)
    return opened


_RUN_ID_RULE = "(a run id is up to 64 letters, digits, '-' and '_')"


def _shown_id(run_id: str) -> str:
    """``run_id`` as a message quotes it: in quotes, cut at 80 characters (a URL can hold anything)."""
    return repr(run_id[:80] + ("…" if len(run_id) > 80 else ""))


def _restore_message(wanted: int, skipped: dict[str, list[str]]) -> str:
    """Why ``?runs=`` ids of ``wanted`` were not listed, by reason ("" when none was skipped); at
    most three ids are quoted for each reason."""
    count = sum(map(len, skipped.values()))
    if not count:
        return ""
    reasons = []
    for reason, ids in skipped.items():
        if not ids:
            continue
        quoted = [_shown_id(i) for i in ids[:3]] + ([f"{len(ids) - 3} more"] if len(ids) > 3 else [])
        one = len(ids) == 1
        reasons.append(in_words(quoted) + {
            "not run ids": f" {'is not a run id' if one else 'are not run ids'} {_RUN_ID_RULE}",
            "not found": f" {'was' if one else 'were'} not found in the store",
            "unreadable": " could not be read",
        }[reason])
    return (f"{count} of the {wanted} run ids in this page's address (?runs=) "
            f"{'is' if count == 1 else 'are'} not listed below: {'; '.join(reasons)}.")
