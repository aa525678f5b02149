"""Check yourself: the course's self-check questions this page can answer, in the course's words.

Q1 of Self-Attention in Matrix Form ("Identify the softmax axis") with its three choices, its hint
and its solution; the learner's checked answer is saved with the next run
(:attr:`LearnerState.self_check`). Then the Self-attention lesson's four "Check your
understanding" questions and the Review chapter's "Check yourself" items the page can show. Each
has a "Show me" that sets the page up to show the answer (a preset, a failure mode, a row, cells
of the Weights map outlined: :attr:`LearnerState.highlight`) and says it with this run's numbers.

Left out, not faked: the Review's questions on the direct path with its quadratic dense cost and
on an observed weight versus a causal claim, which one run's numbers cannot answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import panel as pn
import param
from bokeh.models import RadioGroup

from app.learner.projections import shape_list
from app.learner.state import LearnerState
from app.shared.html import html
from app.shared.numbers import format_number
from attention_core import scaled_dot_product_attention
from attention_core.modes import FAILURE_MODES

SOFTMAX_AXIS = "softmax_axis"
Q1_TITLE = "Q1. Identify the softmax axis"
Q1_TEXT = ("A score tensor for one batch has shape (5,5). Row 3 belongs to one query, and its five "
           "columns refer to key positions. Along which axis must softmax operate?")
Q1_CHOICES = ("Across the five columns within each query row",
              "Down the five query rows within each key column",
              "Across all 25 scores at once")
Q1_CORRECT = 0
Q1_HINT = "Each query row must sum to 1 over the positions it can read."
Q1_SOLUTION = ("Softmax operates across columns, the final axis. This normalizes each query's scores "
               "into a distribution over key-value positions.")
LEFT_OUT = ("Not asked here: the Review's questions on the direct-path benefit with quadratic dense "
            "cost, and on separating an observed attention weight from a causal claim. One run's "
            "numbers cannot answer them.")


PREDICT_FIRST = ("The page is set up for this question. Write your prediction at the top first: the "
                 "answer quotes the weights, which wait for it.")


def _n(x: float) -> str:
    """A number as the readouts print it, without trailing zeros ("1", "0.731")."""
    return format_number(float(x), trim=True)


def _sum(xs) -> str:
    return " + ".join(_n(x) for x in xs)


def _setup(state: LearnerState, preset: str, failure_mode: str = "correct", row: int | None = None,
           highlight: tuple[int, int, int] | None = None, **more) -> None:
    """Load ``preset`` in ``failure_mode``, set ``more`` parameters, choose ``row`` and outline
    ``highlight`` (last: any earlier change drops a highlight)."""
    with pn.io.hold():
        state.apply_preset(preset, failure_mode=failure_mode)
        if more:
            state.param.update(**more)
        if row is not None:
            state.set_row(row)
        state.highlight = highlight


def _row_highlight(state: LearnerState, row: int) -> tuple[int, int, int]:
    return (row, 1, state.result.T_k)


# Each "Show me": it sets the page up, then says the answer with the numbers it now shows.

def _softmax_axis(state: LearnerState) -> str:
    _setup(state, "four_token_trace", row=3)
    state.highlight = _row_highlight(state, 3)
    r = state.result
    visible = r.weights[2][r.allowed[2]]
    return (f"Four-token trace, row 3 (query 3), outlined in the Weights map: softmax runs across its "
            f"columns, the keys. Its weights {_sum(visible)} sum to {_n(r.row_sums[2])} over the "
            f"{visible.size} keys it can read (key 4 is in its future: weight 0). Down column 1 the "
            f"weights sum to {_n(r.weights[:, 0].sum())}, not 1, and all {r.weights.size} weights "
            f"together sum to {_n(r.weights.sum())}, one per row.")


def _row_column_weight(state: LearnerState) -> str:
    _setup(state, "worked_row", row=2, highlight=(2, 2, 2))
    r = state.result
    return (f"Worked row: row 2 is token 2's query; column 2 is key 2, a source row 2 may read. "
            f"score[2][2] = q₂·k₂ / √d_k = {_n(r.scores[1, 1])}: how well query 2 matches key 2. "
            f"weight[2][2] = {_n(r.weights[1, 1])} (outlined): the share of row 2's attention that "
            "goes to token 2 after the mask and softmax.")


def _causal_rows_sum_to_1(state: LearnerState) -> str:
    _setup(state, "worked_row", row=2, highlight=(2, 1, 3))
    r = state.result
    broken = scaled_dot_product_attention(r.queries, r.keys, failure_mode="mask_after_softmax")
    return (f"Worked row, row 2 (outlined): the causal mask makes the score of column 3, token 2's "
            f"future, −∞ before softmax, so softmax normalises over the visible keys only: "
            f"{_sum(r.weights[1, :2])} = {_n(r.row_sums[1])}, and column 3 gets exactly 0. Masking "
            f"after softmax instead (Failure mode: Mask after softmax (broken)) leaves row 2 "
            f"summing to {_n(broken.row_sums[1])}.")


def _value_role(state: LearnerState) -> str:
    _setup(state, "worked_row", row=2, highlight=(2, 1, 2))
    r = state.result
    terms = " + ".join(f"{_n(w)}·{_n(v)}" for w, v in zip(r.weights[1, :2], r.values[:2], strict=True))
    keys_mixed = scaled_dot_product_attention(r.queries, r.keys, r.values, failure_mode="keys_as_values")
    return (f"Worked row, row 2: the keys only decide the weights, through the scores; the values are "
            f"what the row reads out. Row 2's output is {terms} = {_n(r.output[1])} (Contributions to "
            f"row 2 shows each term). Mixing the keys instead would give {_n(keys_mixed.output[1])}.")


def _future_leak(state: LearnerState) -> str:
    _setup(state, "worked_row", failure_mode="no_mask", row=2, highlight=(2, 3, 3))
    r = state.result
    return (f"Worked row without the mask (Failure mode: {FAILURE_MODES['no_mask'].title}): row 2 "
            f"reads token 3, the very token it is trained to predict next, with weight[2][3] = "
            f"{_n(r.weights[1, 2])} (outlined), its future-token weight. Trained so, the model can copy "
            "the answer instead of predicting it, and fails when generating, where no future exists.")


def _shapes(state: LearnerState) -> str:
    _setup(state, "batch_padded", use_w_o=True)
    layer = state.layer
    sizes = "; ".join(f"{name}: {symbols} = {'×'.join(map(str, n))}" for name, symbols, n in shape_list(layer))
    return (f"Batch of two with W_O: B = {layer.B}, T = {layer.T}, d_model = {layer.d_model}, "
            f"d_k = {layer.d_k}, d_v = {layer.d_v}. {sizes} (the Shapes list above the maps).")


def _qk_widths(state: LearnerState) -> str:
    _setup(state, "wide_head", row=2, use_values=True)
    r = state.result
    return (f"Wide head: each score is a dot product q·k, which pairs each component of a query with "
            f"the same component of a key, so both need d_k of them: here d_k = {r.d_k}. A value is "
            f"never multiplied with a query, only weighted and summed, so it may have another width: "
            f"here d_v = {r.d_v}, and row 2's output is {_n(r.output[1])}.")


def _output_projection(state: LearnerState) -> str:
    _setup(state, "output_projection", failure_mode="output_projection_transposed", row=3)
    layer = state.layer
    right = layer.recompute(failure_mode="correct")
    y, y_right = layer.y[0][2], right.y[0][2]
    return (f"Output projection W_O (d_v = d_model), here transposed (Failure mode: "
            f"{FAILURE_MODES['output_projection_transposed'].title}): Y = H W_O mixes all d_v "
            f"components of each row of H into each of Y's d_model components with learned weights. "
            f"Transposed, Y keeps its shape {layer.T} × {layer.d_model} but row 3 becomes "
            f"[{', '.join(map(_n, y))}] instead of [{', '.join(map(_n, y_right))}]: a reshape could not "
            "tell them apart, the orientation check can.")


def _batch_sharing(state: LearnerState) -> str:
    _setup(state, "batch_padded")
    layer = state.layer
    check = next(c for c in layer.checks if c.name == "batch_independence")
    return (f"A correct batch of {layer.B}: both items use the same W_Q, W_K and W_V (batch sharing of "
            f"parameters), yet each attends only within itself, in maps of its own. "
            f"{check.title}: {'passes' if check.passed else 'fails'}.")


def _batch_mixing(state: LearnerState) -> str:
    _setup(state, "batch_padded", failure_mode="batch_items_mixed", row=4)
    layer, r = state.layer, state.result
    T = layer.T
    state.highlight = (T + 1, 1, T)
    across = r.weights[T, :T]
    check = next(c for c in layer.checks if c.name == "batch_independence")
    return (f"{FAILURE_MODES['batch_items_mixed'].title}: the batch is flattened into one sequence of "
            f"{r.T} tokens, so row {T + 1} (item 2's first token) puts {_sum(across)} = "
            f"{_n(across.sum())} of its weight on item 1's tokens, columns 1–{T} (outlined), across "
            f"the red line: mixing batch data. {check.title}: "
            f"{'passes' if check.passed else 'fails'}.")


@dataclass(frozen=True)
class Show:
    """One "Show me": its button says ``Show me: <short>``; ``run`` sets the page up and returns
    what the answer says."""

    short: str
    run: Callable[[LearnerState], str]


@dataclass(frozen=True)
class Question:
    """A self-check question: ``id``, where the course asks it, its words, its "Show me"s."""

    id: str
    source: str
    text: str
    shows: tuple[Show, ...]


QUESTIONS: tuple[Question, ...] = (
    Question(SOFTMAX_AXIS, "Self-Attention in Matrix Form, Q1; Review, Check yourself",
             "Can you identify the softmax axis from the meaning of one query row?",
             (Show("the softmax axis", _softmax_axis),)),
    Question("row_column_weight", "Self-attention, Check your understanding",
             "For row i, what do column j, score[i][j], and weight[i][j] each mean?",
             (Show("row, column, score and weight", _row_column_weight),)),
    Question("causal_rows_sum_to_1", "Self-attention, Check your understanding",
             "Why do valid causal rows sum to 1 even though some columns are unavailable?",
             (Show("why causal rows sum to 1", _causal_rows_sum_to_1),)),
    Question("value_role", "Self-attention, Check your understanding",
             "What role does a value vector play that a key vector does not?",
             (Show("what a value does that a key does not", _value_role),)),
    Question("future_leak", "Self-attention, Check your understanding",
             "What information leak appears during next-token training if future positions are not masked?",
             (Show("the leak without a mask", _future_leak),)),
    Question("shapes", "Review, Check yourself",
             "Can you derive every intermediate shape from B, T, d_model, d_k, d_v?",
             (Show("every shape from B, T, d_model, d_k, d_v", _shapes),)),
    Question("qk_widths", "Review, Check yourself",
             "Can you explain why Q and K widths must match while V may differ?",
             (Show("why Q and K widths match", _qk_widths),)),
    Question("output_projection", "Review, Check yourself",
             "Can you explain the output projection without calling it merely a reshape?",
             (Show("the output projection is not a reshape", _output_projection),)),
    Question("batch", "Review, Check yourself",
             "Can you distinguish batch sharing of parameters from mixing batch data?",
             (Show("batch sharing", _batch_sharing), Show("batch mixing", _batch_mixing))),
)
"""The questions in the course's order: the lesson's, then the Review's."""


def check_answer(choice: int | None) -> dict | None:
    """Q1's answer ``choice`` (an index of :data:`Q1_CHOICES`) as the record's ``self_check``, or
    ``None`` when nothing was chosen."""
    if choice is None:
        return None
    return {"question": SOFTMAX_AXIS, "choice": Q1_CHOICES[choice], "correct": choice == Q1_CORRECT}


def feedback_html(answer: dict | None) -> str:
    """What Check says about ``answer`` (:func:`check_answer`), the solution after it."""
    if answer is None:
        return html("<p class='self-check-feedback' role='status'>Choose one of the three first.</p>")
    verdict = "Correct." if answer["correct"] else html("Not this one: you chose “{}”.", answer["choice"])
    return html("<div class='self-check-feedback' role='status' data-testid='q1-feedback'><p><b>{}</b> "
                "It is saved with your next run.</p><p><b>Solution.</b> {}</p></div>", verdict, Q1_SOLUTION)


class SelfCheckPanel(pn.viewable.Viewer):
    """A "Check yourself" card, collapsed; its questions are built the first time it is opened."""

    state = param.ClassSelector(class_=LearnerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.card = pn.Card(title="Check yourself", collapsed=True, sizing_mode="stretch_width",
                            margin=(10, 10))
        self.card.param.watch(self._build, "collapsed")
        self.answers: dict[str, pn.pane.HTML] = {}
        self.buttons: dict[str, pn.widgets.Button] = {}

    def _build(self, event) -> None:
        if event.new or self.answers:
            return
        intro = pn.pane.HTML(html(
            "<p>The course's self-check questions this page can answer. Each <b>Show me</b> loads an "
            "input, chooses a row and outlines cells of the Weights map; what it changes is yours "
            "to change again.</p>"), sizing_mode="stretch_width", margin=(0, 10))
        parts = [intro, self._q1()]
        for q in QUESTIONS:
            answer = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), visible=False)
            self.answers[q.id] = answer
            buttons = []
            for show in q.shows:
                button = pn.widgets.Button(label=f"Show me: {show.short}",
                                           margin=(0, 10, 5, 10))
                button.on_click(lambda _e, show=show, q=q: self._show(q, show))
                self.buttons[show.short] = button
                buttons.append(button)
            parts.append(pn.Column(
                pn.pane.HTML(html("<p><b>{}</b> <span class='self-check-source'>({})</span></p>", q.text, q.source),
                             sizing_mode="stretch_width", margin=(0, 10)),
                pn.Row(*buttons, margin=0), answer, margin=(0, 0, 10, 0), sizing_mode="stretch_width"))
        parts.append(pn.pane.HTML(html("<p>{}</p>", LEFT_OUT), sizing_mode="stretch_width", margin=(0, 10)))
        self.card[:] = parts

    def _q1(self) -> pn.Column:
        # A Bokeh RadioGroup, not Panel's: Panel's chooses the first option for the learner.
        self.choices = RadioGroup(labels=list(Q1_CHOICES), active=None, name="self-check-q1-choices")
        self.feedback = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10))
        check = pn.widgets.Button(label="Check my answer", color="primary", margin=(5, 10))
        check.on_click(self._check)
        hint = pn.pane.HTML(html("<p><b>Hint.</b> {}</p>", Q1_HINT), visible=False, margin=(0, 10))
        show_hint = pn.widgets.Button(label="Show the hint", margin=(5, 10))
        show_hint.on_click(lambda _e: setattr(hint, "visible", True))
        solution = pn.pane.HTML(html("<p><b>Solution.</b> {}</p>", Q1_SOLUTION), visible=False, margin=(0, 10))
        show_solution = pn.widgets.Button(label="Show the solution", margin=(5, 10))
        show_solution.on_click(lambda _e: setattr(solution, "visible", True))
        return pn.Column(
            pn.pane.HTML(html("<h3 id='self-check-q1'>{}</h3><p>{}</p><p>Choose one:</p>", Q1_TITLE, Q1_TEXT),
                         sizing_mode="stretch_width", margin=(0, 10)),
            pn.pane.Bokeh(self.choices, margin=(0, 20)),
            pn.Row(check, show_hint, show_solution, margin=0), self.feedback, hint, solution,
            margin=(0, 0, 10, 0), sizing_mode="stretch_width")

    def _check(self, _event=None) -> None:
        answer = check_answer(self.choices.active)
        if answer is not None:
            self.state.self_check = answer
        self.feedback.object = feedback_html(answer)

    def _show(self, question: Question, show: Show) -> None:
        text = show.run(self.state)
        if not self.state.revealed:  # ?predict=first: the answers quote the weights, which wait
            text = PREDICT_FIRST
        pane = self.answers[question.id]
        pane.object = html("<p class='self-check-answer' role='status' data-testid='answer-{}'>{}</p>",
                           question.id, text)
        pane.visible = True

    @param.depends("state.revealed", watch=True)
    def _hide_answers(self) -> None:
        # An answer given before the reveal says to predict; one given after tells the weights:
        # either is out of date once the prediction is written or cleared.
        for pane in self.answers.values():
            pane.visible = False

    def __panel__(self):
        return self.card


__all__ = ["Q1_CHOICES", "QUESTIONS", "Question", "SelfCheckPanel", "Show", "check_answer", "feedback_html"]
