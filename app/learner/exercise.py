"""Copy as test: the exercise's test made from one of this page's saved runs (Self-attention,
"Shapes and loops"; issue 16).

A saved run and a language (TypeScript for vitest, Python for pytest) give the text of
:func:`attention_core.exercise.render_test`, shown in a text area. ``Copy as test`` copies it with
``navigator.clipboard`` in the browser (no server round trip, so the browser still sees the click
as the user's gesture); the clipboard needs a secure page (https, or localhost), so the text area
(select and copy) and ``Download test`` are there too, and the status line says which happened.
"""

from __future__ import annotations

import io

import panel as pn
import param
from bokeh.models import Button as BokehButton
from bokeh.models import CustomJS, Div, TextAreaInput

from app.learner.record import STATUS_CSS, status_html
from app.learner.state import LearnerState
from app.shared.html import html
from app.shared.static import read_text
from app.shared.widgets import insert_after, when_first
from attention_core.exercise import EXERCISE_FUNCTION, ExerciseCaseError, case_filename, render_test

LANGUAGE_NAMES = {"TypeScript (vitest)": "ts", "Python (pytest)": "py"}
MAX_TEXT = 1_000_000  # Bokeh's text area takes 500 characters by default; a 16-token test is ~10,000

# Code reads as code: monospace, lines kept whole (the area scrolls sideways).
CODE_CSS = read_text(__package__, "exercise_code.css")
# Only this page's own constant sentences go into the status line, never text from the run.
COPY_JS = read_text(__package__, "exercise_copy.js")


class ExerciseTestView(pn.viewable.Viewer):
    """``Test from run``, ``Test language``, ``Copy as test``, ``Download test`` and the ``Generated test``.

    The copy button, its status line and the text area are Bokeh models, not Panel widgets: the
    button's JS callback needs the other two, and Panel's ``js_on_click``/``jslink`` keep their
    widgets (and with them the session's document) in a class-level registry after the session ends.
    """

    state = param.ClassSelector(class_=LearnerState)
    run_name = param.Callable(default=lambda number, record: f"Run {number}: {record.title}",
                              doc="A saved run's name in the list, from its number (from 1) and record.")

    run = param.Integer(default=None, allow_None=True, doc="Index in state.saved of the run whose test is shown.")
    language = param.Selector(default="ts", objects=LANGUAGE_NAMES, doc="The test's language.")
    text = param.String(default="", doc="The generated test; empty when there is none.")
    message = param.String(default="", doc="Why there is no test, when there is none.")

    def __init__(self, **params):
        super().__init__(**params)
        self.run_select = pn.widgets.Select(label="Test from run", options=self._options(), width=380)
        self.run_select.param.watch(lambda event: setattr(self, "run", event.new), "value")
        self.language_choice = pn.widgets.RadioButtonGroup.from_param(self.param.language, label="Test language")
        self.area = TextAreaInput(
            title="Generated test", value="", rows=14, max_length=MAX_TEXT, sizing_mode="stretch_width",
            placeholder="The test of the chosen saved run appears here.", name="exercise-test-text",
            margin=(5, 10), stylesheets=[CODE_CSS])
        self.copy_status = Div(text="", stylesheets=[STATUS_CSS], name="exercise-test-status")
        self.copy = BokehButton(label="Copy as test", disabled=True, name="exercise-test-copy")
        self.copy.js_on_event("button_click", CustomJS(args={"area": self.area, "status": self.copy_status},
                                                       code=COPY_JS))
        self.download = pn.widgets.FileDownload(
            callback=self._file, filename="attention-test.ts", label="Download test", embed=False,
            disabled=pn.bind(lambda text: not text, self.param.text))
        self._choices = pn.Row(self.run_select, self.language_choice)
        self._layout = pn.Column(
            pn.pane.HTML(html("<h3>The exercise's test from a run</h3><p>A vitest or pytest test of "
                              "<code>{}</code> with the run's queries, keys and causal mask, expecting "
                              "the correct weights.</p>", EXERCISE_FUNCTION.signature), margin=(5, 10)),
            self._choices,
            pn.Row(pn.pane.Bokeh(self.copy), self.download, pn.pane.Bokeh(self.copy_status)),
            pn.pane.Bokeh(self.area, sizing_mode="stretch_width"), sizing_mode="stretch_width")
        self._show_runs()
        # Why a run has no test, made the first time one has none (few runs do).
        self.problem: pn.pane.HTML | None = None
        when_first(self, "message", self._make_problem)

    def _make_problem(self) -> None:
        self.problem = pn.pane.HTML(pn.bind(status_html, self.param.message, False),
                                    visible=pn.bind(bool, self.param.message), stylesheets=[STATUS_CSS])
        insert_after(self._layout, self._choices, self.problem)

    def _options(self) -> dict[str, int]:
        return {self.run_name(n, r): n - 1 for n, r in enumerate(self.state.saved, start=1)}

    @param.depends("state.saved", watch=True)
    def _show_runs(self) -> None:
        # The newest run is chosen after each save: its test is the one the learner is after.
        options = self._options()
        self.run_select.param.update(options=options, value=len(options) - 1 if options else None)
        self.run = self.run_select.value

    @param.depends("run", "language", watch=True)
    def _render(self) -> None:
        saved = self.state.saved
        if self.run is None or not 0 <= self.run < len(saved):
            self.param.update(text="", message="")
            return
        record = saved[self.run]
        try:
            text = render_test(record, self.language)
        except ExerciseCaseError as exc:
            self.param.update(text="", message=str(exc))
            return
        self.download.filename = case_filename(record, self.language)
        self.param.update(text=text, message="")

    @param.depends("text", watch=True)
    def _show_text(self) -> None:
        # Raw Bokeh models changed from a Panel callback reach the browser only through Panel's
        # unlocked() (the session may not hold the document lock here); a status line about the
        # copied text goes once the text changes.
        with pn.io.unlocked():
            self.area.value = self.text
            self.copy.disabled = not self.text
            self.copy_status.text = ""

    def _file(self) -> io.StringIO:
        return io.StringIO(self.text)

    def __panel__(self):
        return self._layout
