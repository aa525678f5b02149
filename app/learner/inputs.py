"""What the learner sets: token count, each token's query/key/value and padding, the masks,
the failure mode (what it breaks), and the presets (a preset that shows the chosen mode is
offered over the heat maps: :class:`app.learner.checks.BannerView`).

Every widget is bound to :class:`app.learner.state.LearnerState`; the views only show the
state's messages. Left out: what the inputs compute (the heat maps, readouts and checks).
"""

from __future__ import annotations

import panel as pn
import param

from app.learner.state import (
    GRID_FIELDS,
    INPUT_MODES,
    KV_FIELDS,
    MAX_WIDTH,
    PADDING_FIELDS,
    PRESETS,
    TOKEN_FIELDS,
    X_FIELDS,
    LearnerState,
    item_of,
    padding_label,
)
from app.shared.grid import MatrixGrid
from app.shared.html import Markup, html
from app.shared.static import read_text
from app.shared.widgets import NO_SPIN_BUTTONS, insert_after, when_first
from app.shared.words import in_words
from attention_core import ALIGNMENTS, MAX_BATCH
from attention_core.checks import CHECK_TITLES
from attention_core.modes import FAILURE_MODES

ERROR_CSS = read_text(__package__, "inputs_error.css")
# In the Presets row; the other presets are offered over the maps, beside the mode they expose.
_SHOWN_PRESETS = ("worked_row", "large_scores", "all_equal", "four_token_trace", "wide_head")
# Review, "The Complete Layer": offered with the matrix inputs they need (the default page, in
# vector mode, keeps its inputs and both heat maps in one 1280×720 screen).
_LAYER_PRESETS = ("output_projection", "batch_padded", "cross_attention")
_NOTE_CSS = read_text(__package__, "inputs_note.css")


def alert_html(message: str) -> Markup:
    """A message a screen reader announces as it appears, escaped."""
    return html('<span role="alert">{}</span>', message) if message else Markup("")


def checked_int_input(state: param.Parameterized, name: str, label: str, setter) -> pn.widgets.IntInput:
    """A field for integer parameter ``name`` of ``state`` (its message: :func:`int_message`).

    Every typed number goes to ``setter``, which takes it or keeps the current one and says why
    in ``state.<name>_error``. No start/end on the field: with bounds the browser silently keeps
    an out-of-range number without sending it.
    """
    error = f"{name}_error"
    field = pn.widgets.IntInput(label=label, value=getattr(state, name), width=90, margin=(5, 10),
                                stylesheets=[NO_SPIN_BUTTONS])
    field.param.watch(lambda e: setter(e.new), "value")
    state.param.watch(lambda e: setattr(field, "value", e.new), name)

    def show_taken(event) -> None:
        if not event.new:  # a number was taken (a preset, a click) after a refused one
            field.value = getattr(state, name)

    state.param.watch(show_taken, error)
    return field


def int_message(state: param.Parameterized, name: str) -> pn.pane.HTML:
    """The pane showing ``state.<name>_error``, the message of :func:`checked_int_input`'s field
    (an alert), hidden while there is none."""
    error = state.param[f"{name}_error"]
    return pn.pane.HTML(pn.bind(alert_html, error), visible=pn.bind(bool, error), stylesheets=[ERROR_CSS],
                        margin=(0, 10))


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
                "<b>bidirectional</b> attention, as an encoder uses (Review, <em>Distinctions "
                "to Keep</em>: self-attention may be causal or bidirectional), so every token "
                "can read future tokens, and that is correct here. A decoder that needs the mask "
                "and forgets it is the failure mode <b>No mask</b>.</p>")
    return ""


def mode_html(failure_mode: str) -> Markup:
    """The chosen mode's description and the checks it breaks, by their titles."""
    mode = FAILURE_MODES[failure_mode]
    if not mode.breaks:
        return html("<p data-testid='mode-description'>{}</p>", mode.description)
    broken = ", ".join(CHECK_TITLES[name] for name in CHECK_TITLES if name in mode.breaks)
    return html("<p data-testid='mode-description'>{}</p><p data-testid='mode-breaks'>It breaks: "
                "<b>{}</b>.</p>", mode.description, broken)


def alignment_html(alignment: str) -> Markup:
    """What the chosen causal alignment means (queries and keys of different lengths)."""
    return html("<p data-testid='alignment-note'><b>Causal alignment</b> (T_q ≠ T_k): {}. The two "
                "differ, a known trap (pytorch/pytorch#103082); the heat maps show both masks.</p>",
                ALIGNMENTS[alignment])


GROUP_TITLES = {"queries": "Query", "keys": "Key", "values": "Value", "x": "X", "w_q": "W_Q",
                "w_k": "W_K", "w_v": "W_V", "w_o": "W_O", **dict.fromkeys(X_FIELDS[1:], "X"),
                **dict.fromkeys(KV_FIELDS, "X_kv")}
_SIZE_CSS = ":host select { min-width: 4em; }"
_WIDTHS = list(range(1, MAX_WIDTH + 1))  # the choices of d_k, d_v and d_model
_SEQUENCE_FIELDS = (*X_FIELDS, *KV_FIELDS)  # grids whose rows are tokens, one per item
_TEXTS_AND_MESSAGES = {*GRID_FIELDS, "field_errors"}  # what an edit changes: no grid's shape or labels


GRID_COLUMNS = 8
MAX_GRIDS = 2 * MAX_BATCH + 3  # each item's X and X_kv, then W_Q, W_K, W_V and W_O in up to three


def group_title(state: LearnerState, field: str) -> str:
    """A grid's column-group title: ``W_Q``, ``X``, or with a batch ``X, item 2``."""
    title = GROUP_TITLES[field]
    return f"{title}, item {item_of(field)}" if state.batched and field in _SEQUENCE_FIELDS else title


def grid_layout(state: LearnerState) -> list[list[str]]:
    """The fields each grid shows, side by side: the token grid first (queries and keys, or
    each item's X and X_kv), then values or the W matrices, a field moving to the next grid
    when the current one would pass :data:`GRID_COLUMNS` numbers across."""
    grids: list[list[str]] = []
    for field in state.active_fields():
        current = grids[-1] if grids else None
        # X and X_kv have a grid each: their rows are tokens, a W's rows are the d_model
        # features, and W_O's the d_v ones.
        alone = (*_SEQUENCE_FIELDS, "w_o")
        joins = (current is not None and field not in alone and current[0] not in alone
                 and current[0].startswith("w_") == field.startswith("w_")
                 and sum(state.shape(f)[1] for f in current) + state.shape(field)[1] <= GRID_COLUMNS)
        if joins:
            current.append(field)
        else:
            grids.append([field])
    return grids


def grid_view(state: LearnerState, fields: list[str]) -> dict:
    """What a :class:`MatrixGrid` shows for ``fields`` side by side (rows: tokens, or d_model
    for the W matrices): labels, texts, column groups, and only those of the state's
    messages that name one of its cells."""
    layout = [(f, state.shape(f)) for f in fields]
    rows = layout[0][1][0] if layout else 0
    labels = [[state.cell_name(f, i, j) for f, (_, w) in layout for j in range(w)] for i in range(rows)]
    return dict(
        labels=labels, value=grid_texts_of(state, fields),
        groups=[[group_title(state, f), w] for f, (_, w) in layout],
        errors=grid_errors(state, labels))


def grid_texts_of(state: LearnerState, fields: list[str]) -> list[list[str]]:
    """The texts a :class:`MatrixGrid` of ``fields`` side by side shows, row by row."""
    layout = [(getattr(state, f), state.shape(f)) for f in fields]
    rows = layout[0][1][0] if layout else 0
    return [[texts[i][j] for texts, (_, w) in layout for j in range(w)] for i in range(rows)]


def grid_errors(state: LearnerState, labels: list[list[str]]) -> dict[str, str]:
    """Those of the state's messages that name one of the cells ``labels`` (a grid's rows of them)."""
    own = {label for row in labels for label in row}
    return {k: v for k, v in state.field_errors.items() if k in own}


class InputsView(pn.viewable.Viewer):
    """Tokens, the input mode and sizes (d_k, d_v, d_model), the token grid (each token's
    query, key, value components, or its row of X, and ``Padding i``), the W grid in matrix
    mode, the masks, the ``Failure mode`` choice with what it breaks, and the presets."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.tokens = checked_int_input(s, "tokens", "Tokens", s.set_tokens)
        self.input_mode = pn.widgets.Select.from_param(
            s.param.input_mode, label="Input mode", options={v: k for k, v in INPUT_MODES.items()},
            description=None, width=320, margin=(5, 10))
        self.d_k = pn.widgets.Select.from_param(s.param.d_k, label="Head width d_k", options=_WIDTHS,
                                                description=None, width=100, margin=(5, 10),
                                                stylesheets=[_SIZE_CSS])
        self.d_v = pn.widgets.Select.from_param(s.param.d_v, label="Value width d_v", options=_WIDTHS,
                                                description=None, width=100, margin=(5, 10),
                                                visible=s.param.use_values, stylesheets=[_SIZE_CSS])
        # Up to three grids: a grid holds at most GRID_COLUMNS numbers across, so the widest
        # inputs (d_k = d_v = 4) still fit the sidebar at 1280 px. The sidebar's width, so a
        # grid whose long numbers widen it past that scrolls sideways on its own.
        # Made when first needed (the default page has two; a batch with cross-attention and W_O
        # up to MAX_GRIDS): each is a Bokeh model tree every session would otherwise carry.
        self.grids: list[MatrixGrid] = []
        self._grid_fields: list[list[str]] = []
        # Every grid, in order, the ones made later too: a layout shows this column, never a
        # copy of ``grids`` (the embed once showed only the grids of its first paint).
        self.grid_column = pn.Column(margin=0, sizing_mode="stretch_width")
        s.param.watch(self._sync_grids, ["input_mode", "tokens", "d_k", "d_v", "d_model", *GRID_FIELDS,
                                          "use_values", *PADDING_FIELDS, "field_errors", "batch_size",
                                          "cross_attention", "kv_tokens", "use_w_o"])
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
        self.presets = [self._preset_button(key) for key in (*_SHOWN_PRESETS, "reset")]
        self._sizes = pn.Row(self.d_k, self.d_v, margin=0)
        self._preset_row = pn.FlexBox(*self.presets, margin=(0, 6))
        self._layout = pn.Column(
            pn.Row(self.tokens, self.failure_mode, margin=0), self.mode_note,
            self.input_mode, self._sizes,
            self.grid_column, self.toggles, self.mask_note,
            pn.pane.HTML("<b>Presets</b>", margin=(5, 10, 0, 10)),
            self._preset_row,
            margin=0, sizing_mode="stretch_width")
        self._sync_grids()
        # Why a typed token count was refused, made the first time one is.
        self.tokens_message: pn.pane.HTML | None = None
        when_first(s, "tokens_error", self.make_tokens_message)
        # The layer's controls (d_model, the batch, cross-attention, W_O, the causal alignment
        # and the layer's presets) show only in matrix mode: made the first time the page is in
        # it, so a page that stays in vectors does not hold them (bench/page_memory.py says how much).
        self.layer_controls: pn.Column | None = None
        when_first(s, "input_mode", self.make_layer_controls, "matrices".__eq__)

    def make_tokens_message(self) -> None:
        """Make the token count's message (:attr:`tokens_message`) and put it under the failure
        mode's note, once."""
        if self.tokens_message is None:
            self.tokens_message = int_message(self.state, "tokens")
            insert_after(self._layout, self.mode_note, self.tokens_message)

    def _preset_button(self, key: str, **params) -> pn.widgets.Button:
        button = pn.widgets.Button(label=PRESETS[key]["label"] if key in PRESETS else "Reset",
                                   margin=(3, 4), **params)
        button.on_click(lambda _e: self.state.apply_preset(key))
        return button

    def make_layer_controls(self) -> None:
        """Make the matrix mode's controls and add them to the layout, once: ``d_model`` beside
        the head widths, the layer's controls (:attr:`layer_controls`: batch size, keys T_k,
        cross-attention, W_O) under them, the causal alignment and its note under the masks, and
        the layer's presets before ``Reset``. Each shows only in matrix mode."""
        if self.layer_controls is not None:
            return
        s = self.state
        in_matrices = pn.bind(lambda m: m == "matrices", s.param.input_mode)
        self.d_model = pn.widgets.Select.from_param(
            s.param.d_model, label="Model width d_model", options=_WIDTHS, description=None, width=110,
            margin=(5, 10), visible=in_matrices, stylesheets=[_SIZE_CSS])
        # Review, "The Complete Layer": the batch, cross-attention and W_O are the layer's, over X.
        self.batch_size = pn.widgets.Select.from_param(
            s.param.batch_size, label="Batch size", options=list(range(1, MAX_BATCH + 1)),
            description=None, width=100, margin=(5, 10), visible=in_matrices, stylesheets=[_SIZE_CSS])
        self.kv_tokens = pn.widgets.Select.from_param(
            s.param.kv_tokens, label="Keys T_k", options=list(range(1, s.param.tokens.bounds[1] + 1)),
            description=None, width=110, margin=(5, 10), stylesheets=[_SIZE_CSS],
            visible=pn.bind(lambda m, c: m == "matrices" and c, s.param.input_mode, s.param.cross_attention))
        self.cross_attention = labelled_checkbox(s, "cross_attention", "Cross-attention", visible=in_matrices)
        self.use_w_o = labelled_checkbox(s, "use_w_o", "Output projection W_O", visible=in_matrices)
        self.causal_alignment = pn.widgets.RadioBoxGroup.from_param(
            s.param.causal_alignment, options={v.split(":")[0]: k for k, v in ALIGNMENTS.items()},
            inline=True, margin=(0, 10),
            visible=pn.bind(self._alignment_needed, s.param.input_mode, s.param.cross_attention,
                            s.param.causal, s.param.tokens, s.param.kv_tokens))
        self.alignment_note = pn.pane.HTML(
            pn.bind(alignment_html, s.param.causal_alignment), stylesheets=[_NOTE_CSS], margin=(0, 10),
            sizing_mode="stretch_width", visible=self.causal_alignment.param.visible)
        self.layer_controls = pn.Column(
            pn.Row(self.batch_size, self.kv_tokens, margin=0),
            pn.Row(self.cross_attention, self.use_w_o, margin=0),
            margin=0, visible=in_matrices)
        layer_presets = [self._preset_button(key, visible=in_matrices) for key in _LAYER_PRESETS]
        self.presets[-1:-1] = layer_presets
        self._sizes.append(self.d_model)
        insert_after(self._layout, self._sizes, self.layer_controls)
        self.toggles.extend([self.causal_alignment, self.alignment_note])
        self._preset_row.objects = list(self.presets)

    def _sync_grids(self, *events) -> None:
        s = self.state
        changed = {event.name for event in events}
        if changed and changed <= _TEXTS_AND_MESSAGES:
            # Only texts or messages changed (an edit): every grid keeps its fields, shape and labels.
            self._sync_texts(changed)
            return
        layout = grid_layout(s)
        for n in range(len(self.grids), len(layout)):
            # A small right margin: the widest grid (d_k = 4 and padding) fits the sidebar.
            grid = MatrixGrid(margin=(5, 2, 5, 10), sizing_mode="stretch_width")
            grid.param.watch(lambda e, n=n: self._grid_edited(self._grid_fields[n], e.new), "value")
            grid.param.watch(lambda e, n=n: self._padding_ticked(self._grid_fields[n], e.new), "checks")
            self.grids.append(grid)
            self.grid_column.append(grid)
        self._grid_fields = layout + [[]] * (len(self.grids) - len(layout))
        for grid, fields in zip(self.grids, self._grid_fields, strict=True):
            if not fields:
                grid.visible = False
                continue
            # The grid of an item's keys (its X, its X_kv, or the queries and keys): a row per
            # key token, each with its padding tick.
            item = next((b for b in range(1, s.batch_size + 1) if s.key_field(b) == fields[0]), None)
            names = [group_title(s, f) for f in fields]
            tokens = fields[0] in TOKEN_FIELDS or fields[0] in _SEQUENCE_FIELDS
            whose = "of each token" if tokens else \
                "(one row per column of H)" if fields[0] == "w_o" else "(one row per column of X)"
            padding = getattr(s, PADDING_FIELDS[item - 1]) if item else []
            grid.param.update(
                **grid_view(s, fields), visible=True, corner="token" if tokens else "row",
                caption=f"{in_words(names)} {whose}",
                checks=list(padding[:s.key_tokens]) if item else [],
                check_labels=[padding_label(item, i, s.batched) for i in range(s.key_tokens)] if item else [],
                check_title="Padding" if item else "")

    def _sync_texts(self, changed: set[str]) -> None:
        """Give each grid the texts of its fields among ``changed`` and, if ``field_errors`` is
        among them, its messages (on an edit most grids have neither)."""
        s = self.state
        for grid, fields in zip(self.grids, self._grid_fields, strict=True):
            update = {}
            if changed.intersection(fields):
                update["value"] = grid_texts_of(s, fields)
            if fields and "field_errors" in changed:
                update["errors"] = grid_errors(s, grid.labels)
            if update:
                grid.param.update(**update)

    @staticmethod
    def _alignment_needed(mode: str, cross: bool, causal: bool, tokens: int, kv_tokens: int) -> bool:
        return mode == "matrices" and cross and causal and tokens != kv_tokens

    def _grid_edited(self, fields: list[str], texts: list[list[str]]) -> None:
        """Hand each field its columns of what the grid sent (its cells left to right)."""
        blocks, start = {}, 0
        for field in fields:
            width = self.state.shape(field)[1]
            blocks[field] = [row[start:start + width] for row in texts]
            start += width
        self.state.set_texts(blocks)

    def _padding_ticked(self, fields: list[str], checks: list) -> None:
        s = self.state
        item = next((b for b in range(1, s.batch_size + 1) if fields and s.key_field(b) == fields[0]), None)
        if item is None:
            return
        for i, ticked in enumerate(checks[:s.key_tokens]):
            s.set_padding(i, bool(ticked), item)

    def __panel__(self):
        return self._layout
