"""Projection ablations: change W_Q, W_K, W_V or W_O and see what moves, and what does not.

Review, "What the Projection Ablations Establish". :class:`AblationPanel` takes any object with a
``layer`` parameter (the learner's :class:`~attention_core.layer.LayerResult`), lets the learner
choose the matrix to change, the change (scale it, set it to zero, or edit a copy) and the
factor, and shows before and after side by side: the weights heat maps of one batch item on one
colour scale, the changed matrix, H and Y, and the chapter's statements as a live checklist.
Every number is :func:`attention_core.ablation.ablate`'s; nothing is recomputed here.

Left out: saving (the page hands its own save as ``on_save``) and layers without matrices (a
layer of typed queries and keys has no projection to change).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
import panel as pn
import param

from app.learner.contributions import vector_text
from app.learner.record import STATUS_CSS, status_html
from app.learner.state import change_text, number_text
from app.shared.compare import TABLE_CSS
from app.shared.grid import MatrixGrid
from app.shared.heatmap import HeatMap, file_name
from app.shared.html import Markup, each, html, join
from app.shared.numbers import format_number
from app.shared.parsing import parse_number
from app.shared.static import read_text
from attention_core import AttentionResult
from attention_core.ablation import ABLATION_CHANGES, ABLATION_TARGETS, Ablation, ablate
from attention_core.layer import MAX_BATCH, LayerResult

CHANGES: dict[str, str] = {"Scale by a factor": "scale", "Set to zero": "zero", "Edit a copy": "edit"}
"""The ``Change`` control's choices: what a learner reads, and the core's name for it."""

# A statement's outcome: mark, the word said, and its class (the checklist's colours).
OUTCOMES = {True: ("✓", "holds", "pass"), False: ("✗", "fails", "fail"),
            None: ("–", "not shown by this change", "na")}

NEEDS_MATRIX_MODE = ("Ablations change a projection matrix (W_Q, W_K, W_V or W_O), so they need "
                     "matrix mode: set Input mode to X and projections.")

# Markup: our own HTML, so that joining it to an escaped html(...) keeps it markup.
LEAD = Markup("<h3>Projection ablations</h3><p class='ablation-lead'>Change one projection matrix and "
               "compare one forward pass before and after (Review, <em>What the Projection Ablations "
               "Establish</em>). The chapter's statements are checked live below; they say what one "
               "forward pass does, not how a trained network would compensate.</p>")

_CSS = read_text(__package__, "ablation.css")


def targets_of(layer: LayerResult | None) -> list[str]:
    """The matrices ``layer`` has that an ablation can change, in the chapter's order."""
    if layer is None or layer.x is None:
        return []
    return [t for t in ABLATION_TARGETS if getattr(layer, t.lower()) is not None]


def copy_label(target: str, i: int, j: int) -> str:
    """The accessible name of a cell of the edited copy, ``i`` and ``j`` from 0:
    ``W_V copy row 2, column 1``."""
    return f"{target} copy row {i + 1}, column {j + 1}"


def copy_texts(matrix: np.ndarray) -> list[list[str]]:
    """``matrix`` as the texts of an editable copy, exactly (each text reads back as its number)."""
    return [[number_text(x) for x in row] for row in np.asarray(matrix, dtype=float)]


def parse_copy(target: str, texts: list[list[str]], shape: tuple[int, int]) -> tuple[np.ndarray | None, dict]:
    """The edited copy's texts as a matrix of ``shape``, or ``None`` and a message per bad cell.

    Returns
    -------
    matrix : numpy.ndarray of float64, shape ``shape``, or None
    errors : dict
        :func:`copy_label` → its message (``W_V copy row 2, column 1: 'x' is not a number; ...``),
        in reading order.
    """
    matrix, errors = np.zeros(shape), {}
    for i in range(shape[0]):
        for j in range(shape[1]):
            label = copy_label(target, i, j)
            text = texts[i][j] if i < len(texts) and j < len(texts[i]) else ""
            try:
                matrix[i, j] = parse_number(text, label)
            except ValueError as error:
                errors[label] = str(error)
    return (None if errors else matrix), errors



def map_index(layer: LayerResult, item: int) -> int:
    """Which of ``layer.maps`` shows batch item ``item`` (from 1): the one flattened map when
    the batch was attended as one sequence."""
    return 0 if layer.flattened else min(max(item, 1), layer.B) - 1


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is not None and b is not None and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def _moved_rows(a: np.ndarray, b: np.ndarray) -> list[int]:
    """Rows (from 1) where ``a`` and ``b`` differ; NaN equals NaN."""
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return [int(i) + 1 for i in np.flatnonzero(~same.all(axis=-1))]


def _whose(a: Ablation, item: int) -> str:
    if a.before.flattened:
        return "the whole batch (attended as one sequence)"
    return f"batch item {item}" if a.before.B > 1 else "this input"


def weights_summary_html(a: Ablation, item: int) -> Markup:
    """Whether the weights shown moved: "exactly the same" or the rows that moved."""
    k = map_index(a.before, item)
    before, after = a.before.maps[k].weights, a.after.maps[k].weights
    if _same(before, after):
        return html("<p data-testid='ablation-weights' data-same='true'>Weights of {}: <b>every "
                    "weight is exactly the same before and after.</b> Both maps use one colour "
                    "scale, 0 to 1.</p>", _whose(a, item))
    moved = _moved_rows(before, after)
    rows = f"row{'' if len(moved) == 1 else 's'} {', '.join(str(r) for r in moved)}"  # as the statements say it
    return html("<p data-testid='ablation-weights' data-same='false'>Weights of {}: <b>the weights "
                "moved in {}.</b> Both maps use one colour scale, 0 to 1.</p>", _whose(a, item), rows)


def _matrix_table(caption: str, m: np.ndarray, testid: str) -> Markup:
    head = each("<th scope='col'>{}</th>", range(1, m.shape[1] + 1))
    rows = join(html("<tr><th scope='row'>{}</th>{}</tr>", i + 1,
                     each("<td>{}</td>", map(format_number, row)))
                for i, row in enumerate(m))
    return html("<table class='ablation-matrix' data-testid='{}'><caption>{}</caption><thead><tr>"
                "<th scope='col'>row</th>{}</tr></thead><tbody>{}</tbody></table>",
                testid, caption, head, rows)


def matrix_html(a: Ablation) -> Markup:
    """The changed matrix before and after, side by side."""
    original = getattr(a.before, a.target.lower())
    return html("<div class='ablation-side-by-side'>{}{}</div>",
                _matrix_table(f"{a.target} before", original, "ablation-matrix-before"),
                _matrix_table(f"{a.target} after: {change_text(a.change, a.factor)}", a.matrix,
                              "ablation-matrix-after"))


def weights_tables_html(a: Ablation, item: int) -> Markup:
    """The shown weights before and after as tables: the heat maps are square (T × T), so
    cross-attention's T × T_k weights are shown this way."""
    k = map_index(a.before, item)
    return html("<div class='ablation-side-by-side'>{}{}</div>",
                _matrix_table("Weights before", a.before.maps[k].weights, "ablation-weights-before"),
                _matrix_table("Weights after", a.after.maps[k].weights, "ablation-weights-after"))


def outputs_html(a: Ablation, item: int) -> Markup:
    """H (and Y, with W_O) of one batch item before and after, a row per token, and what moved."""
    b = min(max(item, 1), a.before.B) - 1
    columns = []  # (name, before rows, after rows)
    for name, what in (("H", "output"), ("Y", "y")):
        before, after = getattr(a.before, what), getattr(a.after, what)
        if before is not None and after is not None:
            columns.append((name, before[b], after[b]))
    if not columns:
        return Markup("<p>This layer has no values, so there is no H or Y to compare: only the "
                      "weights.</p>")
    head = join(html("<th scope='col'>{n} before</th><th scope='col'>{n} after</th>", n=name)
                for name, _, _ in columns)
    rows = []
    for i in range(a.before.T):
        cells = join(html("<td>{}</td><td>{}</td>", vector_text(before[i]), vector_text(after[i]))
                     for _, before, after in columns)
        moved = [name for name, before, after in columns if not _same(before[i], after[i])]
        rows.append(html("<tr><th scope='row'>{}</th>{}<td class='{}'>{}</td></tr>", i + 1, cells,
                         "moved" if moved else "same", ", ".join(moved) if moved else "nothing"))
    names = " and ".join(name for name, _, _ in columns)
    return html("<table class='ablation-outputs' data-testid='ablation-outputs' aria-label='{names} "
                "before and after'><caption>{names} of {whose}, before and after</caption><thead><tr>"
                "<th scope='col'>row (query)</th>{head}<th scope='col'>moved</th></tr></thead>"
                "<tbody>{rows}</tbody></table>", names=names, whose=_whose(a, item).replace(
                    "the whole batch (attended as one sequence)", f"batch item {item}"),
                head=head, rows=join(rows))


def statements_html(a: Ablation) -> Markup:
    """The chapter's statements for this target as a checklist: holds, fails, or not shown by
    this change, each with the core's message."""
    items = join(
        html("<li class='check-{cls}' data-statement='{name}'><span aria-hidden='true'>{mark}</span> "
             "<b>{word}</b>: {title} <span class='why'>{message}</span></li>", cls=cls, name=s.name,
             mark=mark, word=word, title=s.title, message=s.message)
        for s in a.statements for mark, word, cls in [OUTCOMES[s.passed]])
    return html("<h4>What this ablation establishes</h4>"
                "<ol class='checklist' aria-label='Statements of the projection ablations'>{}</ol>", items)


def message_html(message: str, showing_last: bool) -> Markup:
    """A bad input's message, announced, and that the view still shows the last valid ablation."""
    if not message:
        return Markup("")
    end = "" if message.endswith(".") else "."
    still = " The before and after below still show the last valid ablation." if showing_last else ""
    return html("<div class='notice warning' role='alert' data-testid='ablation-message'>{}{}{}</div>",
                message, end, still)


def _show_map(heatmap: HeatMap, r: AttentionResult, when: str) -> None:
    """Draw ``r``'s weights as the page's Weights map does: forbidden cells hatched."""
    after = r.mode.mask == "after"
    forbidden = ~r.allowed if r.mode.mask != "none" else np.isneginf(r.masked_scores)
    heatmap.update(r.weights, forbidden, scores=r.scores, weights=r.weights,
                   masked_label="zeroed" if after else "masked",
                   masked_note="zeroed after softmax" if after else "masked",
                   filename=file_name("weights", when, "ablation", f"T{r.T}"))


class AblationPanel(pn.viewable.Viewer):
    """The projection-ablation control and its before/after view.

    Parameters
    ----------
    layer_source : param.Parameterized
        Any object with a ``layer`` parameter holding a :class:`~attention_core.layer.LayerResult`
        or ``None``; the panel recomputes whenever it changes.
    on_save : callable, optional
        ``on_save(ablation) -> str``, called by ``Save ablation as a run`` with the current
        :class:`~attention_core.ablation.Ablation`; the message it returns is shown. Without it
        the button is hidden.

    The controls are the parameters ``target``, ``change``, ``factor`` (as typed), ``copy`` (the
    edited copy's texts) and ``item`` (the batch item shown; the source's own ``item``, when it
    has one, is followed and this control hidden); ``ablation`` is the last valid
    ablation and ``message`` says why the current controls give none (naming the control or the
    cell), ``""`` when they do.
    """

    layer_source = param.ClassSelector(class_=param.Parameterized, doc="Holds the ``layer`` parameter.")
    on_save = param.Callable(default=None, doc="Called with the Ablation; returns the message to show.")
    target = param.Selector(default="W_V", objects=list(ABLATION_TARGETS), doc="The matrix changed.")
    change = param.Selector(default="scale", objects=list(ABLATION_CHANGES), doc="How it is changed.")
    factor = param.String(default="2", doc="The scale factor, as typed.")
    copy = param.List(default=[], item_type=list, doc="The edited copy's texts, rows of strings.")
    copy_errors = param.Dict(default={}, doc="Message per bad cell of the copy (its label).")
    item = param.Integer(default=1, bounds=(1, MAX_BATCH), doc="The batch item shown (from 1).")
    ablation = param.ClassSelector(class_=Ablation, default=None, allow_None=True,
                                   doc="The last valid ablation of the layer.")
    message = param.String(default="", doc="Why the controls give no ablation now, or ''.")
    save_message = param.String(default="", doc="What on_save answered last.")
    save_ok = param.Boolean(default=True, doc="Whether that answer is not a refusal (its colour).")
    save_pending = param.Boolean(default=False, doc="The save still waits on the store (\"Saving…\").")
    active = param.Boolean(default=True, doc=(
        "Whether the panel is shown and follows the layer: while False a new layer is left for "
        "later and taken when it turns True (the learner page hides the panel until a prediction "
        "is written)."))

    def __init__(self, layer_source: param.Parameterized | None = None, *,
                 on_save: Callable[[Ablation], str] | None = None, **params):
        super().__init__(layer_source=layer_source, on_save=on_save, **params)
        self._quiet = False
        self._behind = False  # a layer arrived while not active
        # A source that has its own batch item choice (the learner state) is followed, so the
        # page has one such control, not two.
        self._follows_item = layer_source is not None and "item" in layer_source.param
        if self._follows_item:
            layer_source.param.watch(lambda e: self._follow_item(e.new), "item")
        self._copied_from: np.ndarray | None = None  # the matrix the copy's texts were taken from
        self.target_select = pn.widgets.Select.from_param(
            self.param.target, label="Ablation target", description=None, width=130, margin=(5, 10))
        self.change_select = pn.widgets.Select.from_param(
            self.param.change, label="Change", options=CHANGES, description=None, width=160, margin=(5, 10))
        self.factor_input = pn.widgets.TextInput.from_param(
            self.param.factor, label="Factor", description=None, width=90, margin=(5, 10),
            visible=pn.bind(lambda change: change == "scale", self.param.change))
        self.item_select = pn.widgets.Select.from_param(
            self.param.item, label="Batch item shown", options=[1], description=None, width=130,
            margin=(5, 10), visible=False)
        self.grid = MatrixGrid(margin=(5, 10), corner="row", visible=False, sizing_mode="stretch_width")
        self.grid.param.watch(lambda e: setattr(self, "copy", [list(r) for r in e.new]), "value")
        self.needs_matrices = pn.pane.HTML("", margin=(0, 10), sizing_mode="stretch_width")
        self.alert = pn.pane.HTML("", stylesheets=[_CSS], margin=(0, 10), sizing_mode="stretch_width")
        self.before_map = HeatMap("Weights before", "ablation-weights-before", kind="weights", size=220)
        self.after_map = HeatMap("Weights after", "ablation-weights-after", kind="weights", size=220)
        self.weights_text = pn.pane.HTML("", stylesheets=[TABLE_CSS, _CSS], margin=(0, 10),
                                         sizing_mode="stretch_width")
        self.details = pn.pane.HTML("", stylesheets=[TABLE_CSS, _CSS], margin=(0, 10),
                                    sizing_mode="stretch_width")
        self.save_button = pn.widgets.Button(label="Save ablation as a run", margin=(5, 10),
                                             visible=on_save is not None)
        self.save_button.on_click(self._save)
        # In Save run's colours: a refused save under this button is as plain to see as under that one.
        self.save_status = pn.pane.HTML(
            pn.bind(status_html, self.param.save_message, self.param.save_ok, self.param.save_pending),
            stylesheets=[_CSS, STATUS_CSS], margin=(5, 10))
        self.body = pn.Column(
            pn.Row(self.target_select, self.change_select, self.factor_input, self.item_select, margin=0),
            self.grid, self.alert, self.weights_text,
            pn.Row(self.before_map, self.after_map, margin=0),
            self.details, pn.Row(self.save_button, self.save_status, margin=0),
            margin=0, sizing_mode="stretch_width")
        self._layout = pn.Column(pn.pane.HTML(LEAD, stylesheets=[_CSS], margin=(0, 10),
                                              sizing_mode="stretch_width"),
                                 self.needs_matrices, self.body, margin=0, sizing_mode="stretch_width")
        if self._follows_item:
            self._follow_item(layer_source.item)
        self._layer_changed()

    def _follow_item(self, item: int) -> None:
        layer = self.layer
        self.item = min(max(int(item), 1), layer.B if layer is not None else MAX_BATCH)

    @property
    def layer(self) -> LayerResult | None:
        return None if self.layer_source is None else self.layer_source.layer

    @contextmanager
    def _syncing(self):
        """Set several controls as one change: the ablation is computed once, after."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def _reset_copy(self) -> None:
        original = getattr(self.layer, self.target.lower())
        self._copied_from = original
        self.copy = copy_texts(original)

    @param.depends("active", watch=True)
    def _catch_up(self) -> None:
        if self.active and self._behind:
            self._layer_changed()

    @param.depends("layer_source.layer", watch=True)
    def _layer_changed(self) -> None:
        if not self.active:  # hidden: nothing to show it to until it is active again
            self._behind = True
            return
        self._behind = False
        layer, targets = self.layer, targets_of(self.layer)
        with self._syncing():
            if targets:
                self.param.target.objects = targets
                if self.target not in targets:
                    self.target = "W_V" if "W_V" in targets else targets[0]
                self.item_select.options = list(range(1, layer.B + 1))
                self.item = min(self.layer_source.item if self._follows_item else self.item, layer.B)
                # The copy follows its matrix when that changes, and keeps its edits otherwise
                # (an edit of X or of another matrix).
                if not _same(self._copied_from, getattr(layer, self.target.lower())):
                    self._reset_copy()
        self.item_select.visible = bool(targets) and layer.B > 1 and not self._follows_item
        self.needs_matrices.object = (
            "" if targets else html("<p data-testid='ablation-needs-matrices'>{}</p>",
                                    "No valid input yet." if layer is None else NEEDS_MATRIX_MODE))
        self.needs_matrices.visible = not targets
        self.body.visible = bool(targets)
        self._compute()

    @param.depends("target", watch=True)
    def _target_changed(self) -> None:
        if self._quiet or not targets_of(self.layer):
            return
        with self._syncing():
            self._reset_copy()
        self._compute()

    @param.depends("change", "factor", "copy", watch=True)
    def _compute(self) -> None:
        """Ablate the layer as the controls say; on bad input keep the last valid ablation and
        say what is wrong in ``message``."""
        if self._quiet:
            return
        layer = self.layer
        if not targets_of(layer):
            self.param.update(ablation=None, message="", copy_errors={})
            return
        factor, matrix, errors, ablation = None, None, {}, self.ablation
        try:
            if self.change == "scale":
                factor = parse_number(self.factor, "Factor")
            elif self.change == "edit":
                matrix, errors = parse_copy(self.target, self.copy, getattr(layer, self.target.lower()).shape)
        except ValueError as error:  # the factor, named by parse_number
            message = str(error)
        else:
            if errors:
                message = next(iter(errors.values()))
                if len(errors) > 1:
                    message += f" ({len(errors) - 1} more cell{'s' if len(errors) > 2 else ''} as well)"
            else:
                try:
                    ablation, message = ablate(layer, self.target, self.change, factor=factor,
                                               matrix=matrix), ""
                except ValueError as error:  # e.g. scores that overflow float64
                    message = f"The ablated layer cannot be computed: {error}"
        self.param.update(ablation=ablation, message=message, copy_errors=errors)

    @param.depends("target", "change", "copy", "copy_errors", watch=True)
    def _show_grid(self) -> None:
        layer = self.layer
        if self.change != "edit" or not targets_of(layer):
            self.grid.visible = False
            return
        rows, columns = getattr(layer, self.target.lower()).shape
        self.grid.param.update(
            labels=[[copy_label(self.target, i, j) for j in range(columns)] for i in range(rows)],
            value=[list(r) for r in self.copy], groups=[[f"{self.target} (copy)", columns]],
            caption=f"Edited copy of {self.target}", errors=dict(self.copy_errors), visible=True)

    @param.depends("ablation", "message", "item", watch=True)
    def _show(self) -> None:
        a = self.ablation
        self.alert.object = message_html(self.message, a is not None)
        self.alert.visible = bool(self.message)
        if a is None:
            self.weights_text.object = self.details.object = ""
            self.before_map.visible = self.after_map.visible = False
            return
        k = map_index(a.before, self.item)
        before, after = a.before.maps[k], a.after.maps[k]
        square = before.T == before.T_k
        if square:
            _show_map(self.before_map, before, "before")
            _show_map(self.after_map, after, "after")
        self.before_map.visible = self.after_map.visible = square
        self.weights_text.object = weights_summary_html(a, self.item) + (
            Markup("") if square else weights_tables_html(a, self.item))
        self.details.object = join([matrix_html(a), outputs_html(a, self.item), statements_html(a)])

    def _save(self, _event=None) -> None:
        """Hand the current ablation to ``on_save`` and show its answer; refuse while the
        controls give none."""
        if self.on_save is None:
            return
        if self.ablation is None or self.message:
            why = self.message or "there is no ablation to save yet"
            self.param.update(save_ok=False, save_pending=False,
                              save_message=f"Not saved: fix the ablation first ({why}).")
            return
        self.param.update(save_ok=True, save_pending=False)  # on_save's page may say otherwise
        self.save_message = str(self.on_save(self.ablation) or "")

    def __panel__(self):
        return self._layout
