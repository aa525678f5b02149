"""The instructor page (``/instructor``): every learner's runs, the class picture, compare, export.

One :class:`InstructorState` per browser session holds the store's listing, the filters and the
selection (:mod:`.state`); the views only read it and write the parameters their widgets stand
for: the filters and the table (:mod:`.table`), the class picture (:mod:`.chart`), and the page
that assembles them with the exports and the comparison (:mod:`.page`). Every run is named by its
title (:func:`attention_core.modes.run_title`), as on the learner page and in the CSV. Learner
text (learner, label, prediction, explanation, notes) reaches the page only as Tabulator
``textarea`` cells (escaped, wrapping), HTML built by :func:`app.shared.html.html` (which
escapes it), or Bokeh hover fields (which Bokeh escapes); exports write it exactly as saved
(the CSV neutralises formulas). The login page (``login.html``) is :mod:`app.auth`'s.

Left out: editing or deleting runs (learners edit their own explanations on their page), charts
beyond the two summaries.
"""

from app.instructor.chart import ClassChartView
from app.instructor.columns import created_texts, shorten
from app.instructor.page import ExportView, InstructorPage, create_instructor
from app.instructor.state import ALL_MODES, InstructorState, mode_order
from app.instructor.table import COLUMNS, FiltersView, RunsTableView, run_details, runs_frame

__all__ = ["ALL_MODES", "COLUMNS", "ClassChartView", "ExportView", "FiltersView", "InstructorPage", "InstructorState",
           "RunsTableView", "create_instructor", "created_texts", "mode_order", "run_details",
           "runs_frame", "shorten"]
