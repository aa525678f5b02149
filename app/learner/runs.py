"""This page's saved runs: the table with ticks, the explanation attached to runs, downloads,
the comparison of two ticked runs, and the exercise's test made from a run (Copy as test).

The explanation is edited on saved runs (the order of the Self-attention lesson's
checkpoints: predict → experiment → explain):
``Save explanation`` replaces the ticked runs' explanation on disk and never adds a run.
Learner text is only ever shown escaped. No pandas: the learner page never loads it (only the
instructor page needs it), so the table is HTML and the ticks one labelled checkbox per run.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import panel as pn
import param

from app.learner.exercise import ExerciseTestView
from app.learner.record import MAX_TYPED, STATUS_CSS, limited, status_html
from app.learner.state import LearnerState, change_text, said_to_learner
from app.shared.compare import ComparisonView, failed_checks_text, run_size
from app.shared.html import Markup, html, join
from app.shared.numbers import format_result
from app.shared.static import read_text
from app.shared.widgets import insert_after, when_first
from app.shared.words import in_words
from app.store import NotOwnerError, StoreError, export_csv, export_json

EXPLAIN_QUESTION = ("What invariant did your evidence reveal, and how did the broken mode "
                    "violate it?")  # the Self-attention lesson's explain checkpoint

# The columns shown, in order. The run id is in the data (for tests and the page's own code)
# and on each table row (data-run-id), not shown.
RUN_COLUMNS = ("run", "saved (UTC)", "label", "learner", "mode", "future-token weight",
               "smallest row sum", "failed checks", "explanation")

TABLE_CSS = read_text(__package__, "runs_table.css")
_TICKS_CSS = read_text(__package__, "runs_ticks.css")


def runs_columns(records) -> dict[str, list[str]]:
    """Saved runs as table columns: one list of display text per column (``id`` and
    :data:`RUN_COLUMNS`), one entry per experiment record (run 1 first). Numbers are shown as the
    readouts show them; a missing future-token weight or row sum, or no explanation, as "—"."""

    return {
        "id": [r.id for r in records],
        "run": [str(n) for n in range(1, len(records) + 1)],
        "saved (UTC)": [r.created_at[11:19] for r in records],
        "label": [r.label or "" for r in records],
        "learner": [r.learner or "" for r in records],
        "mode": [r.title for r in records],
        "future-token weight": [format_result(r.total_future_weight) for r in records],
        "smallest row sum": [format_result(r.min_row_sum) for r in records],
        "failed checks": [failed_checks_text(r) for r in records],
        "explanation": [r.explanation or "—" for r in records],
    }


def open_links(saved_ids: list[str], keep: dict[str, str] | None = None) -> list[Markup]:
    """Each saved run's "Open" link, run 1 first: this page again with the run opened in the
    workbench (``?run=<id>``), the page's saved runs kept (``runs=…``) and the query parameters
    ``keep`` (the embed's ``instanceId``). What the links share is encoded once, not per row: at
    50 saved runs that was most of the time a save spent on its table (bench/README.md)."""
    before, after = urlencode(keep or {}), urlencode({"runs": ",".join(saved_ids)})
    return [html("<a href='?{}' aria-label='Open run {} in the workbench'>Open</a>",
                 "&".join(part for part in (before, urlencode({"run": run_id}), after) if part), number)
            for number, run_id in enumerate(saved_ids, start=1)]


def runs_table_html(records, keep: dict[str, str] | None = None, unlisted: bool = False) -> Markup:
    """The saved runs as an HTML table (name "Saved runs"), every cell's text escaped, each
    row ending with its "Open" link (:func:`open_links`, which keeps the query parameters ``keep``).
    ``unlisted``: this page's runs could not be listed, so an empty table does not say there are none."""
    columns = runs_columns(records)
    head = join(html("<th scope='col'>{}</th>", c) for c in (*RUN_COLUMNS, "open"))
    links = open_links(columns["id"], keep)
    rows = join(
        html("<tr data-run-id='{}'>{}<td>{}</td></tr>", run_id,
             join(html("<td>{}</td>", columns[c][i]) for c in RUN_COLUMNS), links[i])
        for i, run_id in enumerate(columns["id"]))
    empty = Markup("") if records else Markup("<caption>Not listed yet: the store did not answer.</caption>") \
        if unlisted else Markup("<caption>No saved runs yet.</caption>")
    return html("<table aria-label='Saved runs'>{}<thead><tr>{}</tr></thead><tbody>{}</tbody></table>",
                empty, head, rows)


def run_name(number: int, record) -> str:
    """A run as the Saved runs table counts it: "Run 2", with its label if it has one
    ("Run 2 “broken”", a label past 24 characters cut with "…")."""
    text = record.label or ""
    return f"Run {number}" + (f" “{text if len(text) <= 24 else text[:23] + '…'}”" if text else "")


def tick_label(number: int, record) -> str:
    """A run's checkbox label: "Run 2 “broken”: Mask after softmax (broken) · 3 tokens", with an
    ablation's change if it has one ("… · W_V: scaled by 2 · 4 tokens") (a label past 24
    characters cut with "…": the table beside it has all of it; the size as
    :func:`~app.shared.compare.run_size` says it)."""
    ablation = record.inputs.get("ablation")  # an ablation's run says which: it is not a plain run
    changed = "" if ablation is None else \
        f" · {ablation['target']}: {change_text(ablation['change'], ablation.get('factor'))}"
    return f"{run_name(number, record)}: {record.title}{changed} · {run_size(record)}"


def compared_hint(ticked: list[int]) -> str:
    """Say which two runs are compared; ``ticked`` are the ticked rows (from 0), in run order."""
    if len(ticked) < 2:
        return "Tick two saved runs to compare them side by side."
    a, b = ticked[0] + 1, ticked[1] + 1
    if len(ticked) == 2:
        return f"Comparing run {a} (A) with run {b} (B)."
    return (f"{len(ticked)} runs are ticked; only two can be compared, so this compares the first "
            f"two: run {a} (A) with run {b} (B). Untick runs to compare another pair.")


def _runs_words(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"run {numbers[0]}"
    return "runs " + in_words([str(n) for n in numbers])


def _replaced(saved, rows: list[int], text: str) -> list[int]:
    """The runs (from 1) among ``rows`` (from 0) whose explanation ``text`` would replace."""
    return [i + 1 for i in rows if saved[i].explanation and saved[i].explanation != text]


def _others(saved, rows: list[int], owned) -> list[int]:
    """The runs (from 1) among ``rows`` (from 0) that another page saved (not in ``owned``)."""
    return [i + 1 for i in rows if saved[i].id not in owned]


def not_owned_message(numbers: list[int]) -> str:
    """Why Save explanation refuses runs (from 1) another page saved, and what to do instead."""
    one = len(numbers) == 1
    return (f"Explanation not saved: {_runs_words(numbers)} {'was' if one else 'were'} saved by another page "
            "(this page shows them from a link, to read). Only the page that saved a run can explain it: "
            "open your own page to explain your runs.")


def explanation_target(saved, ticked: list[int], owned=None) -> str:
    """Where Save explanation writes, said before it is pressed: the ticked runs (from 0), or
    the latest run when none is ticked, which of them already hold an explanation, and which
    another page saved (not in ``owned``, the ids of this page's runs; ``None``: all are)."""
    if not saved:
        return "Save a run first: Save explanation attaches the explanation to saved runs."
    rows = [i for i in ticked if i < len(saved)] or [len(saved) - 1]
    where = _runs_words([i + 1 for i in rows])
    if not ticked:
        where += ", the latest run (no run is ticked; tick runs to choose others)"
    others = [] if owned is None else _others(saved, rows, set(owned))
    if others:
        one = len(others) == 1
        return (f"Save explanation writes to {where}; but {_runs_words(others)} {'was' if one else 'were'} "
                "saved by another page: it can be read here, not explained.")
    replaced = _replaced(saved, rows, "")
    held = "" if not replaced else (
        f"; it replaces the explanation {_runs_words(replaced)} already "
        f"{'has' if len(replaced) == 1 else 'have'}")
    return f"Save explanation writes to {where}{held}."


class SavedRunsView(pn.viewable.Viewer):
    """Saved runs with ticks, the ``Explanation`` of ticked runs, downloads, a comparison, and
    ``Copy as test`` (:class:`~app.learner.exercise.ExerciseTestView`)."""

    state = param.ClassSelector(class_=LearnerState)

    link_query = param.Dict(default={}, doc="Query parameters every Open link keeps (the embed's instanceId).")
    explanation_message = param.String(default="", doc="What the last Save explanation did.")
    explanation_ok = param.Boolean(default=True)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # One checkbox per run, named by its label, rather than a data grid: Panel's grids need
        # pandas, which the learner page does not otherwise load (cost in bench/README.md).
        self.ticks = pn.widgets.CheckBoxGroup(
            options=self._tick_options(), value=[], inline=True, margin=(0, 10),
            stylesheets=[_TICKS_CSS])
        self.table = pn.pane.HTML(
            pn.bind(runs_table_html, s.param.saved, self.param.link_query, s.param.unlisted),
            stylesheets=[TABLE_CSS], margin=(5, 10), sizing_mode="stretch_width")
        self.heading = pn.pane.HTML(
            pn.bind(lambda ticked: html("<h3>Saved runs</h3><p>{}</p>", compared_hint(sorted(ticked))),
                    self.ticks.param.value), margin=(5, 10))
        self.explanation = pn.widgets.TextAreaInput(
            label="Explanation", placeholder=limited(EXPLAIN_QUESTION, "explanation"),
            max_length=MAX_TYPED, height=80, width=620)
        no_runs = pn.bind(lambda saved: not saved, s.param.saved)
        self.save_explanation = pn.widgets.Button(label="Save explanation", disabled=no_runs)
        self.save_explanation.on_click(lambda _event: self.attach())
        self.target = pn.pane.HTML(
            pn.bind(lambda ticked, saved, owned: html("<p>{}</p>", explanation_target(saved, sorted(ticked), owned)),
                    self.ticks.param.value, s.param.saved, s.param.owned), margin=(0, 10))
        self.download_json = pn.widgets.FileDownload(
            callback=lambda: self._download("json"), filename="attention-runs.json",
            label="Download my runs (JSON)", embed=False, disabled=no_runs)
        self.download_csv = pn.widgets.FileDownload(
            callback=lambda: self._download("csv"), filename="attention-runs.csv",
            label="Download my runs (CSV)", embed=False, disabled=no_runs)
        self.compare = ComparisonView()
        self.exercise_test = ExerciseTestView(state=s, run_name=tick_label)
        self._last_stamp: datetime | None = None
        self.ticks.param.watch(self._show_ticked, "value")
        self._save_row = pn.Row(self.save_explanation)
        self._layout = pn.Column(
            self.heading, self.ticks, self.table, self.explanation, self.target, self._save_row,
            pn.Row(self.download_json, self.download_csv), self.compare, self.exercise_test,
            sizing_mode="stretch_width")
        # Why saved runs could not be shown, and what Save explanation did: each made the first
        # time there is something to say (most pages never have).
        self.restore_status: pn.pane.HTML | None = None
        self.explanation_status: pn.pane.HTML | None = None
        when_first(s, "restore_message", self._make_restore_status)
        when_first(self, "explanation_message", self._make_explanation_status)

    def _make_restore_status(self) -> None:
        s = self.state
        self.restore_status = pn.pane.HTML(
            pn.bind(status_html, s.param.restore_message, False),
            visible=pn.bind(bool, s.param.restore_message), stylesheets=[STATUS_CSS])
        insert_after(self._layout, self.heading, self.restore_status)

    def _make_explanation_status(self) -> None:
        self.explanation_status = pn.pane.HTML(
            pn.bind(status_html, self.param.explanation_message, self.param.explanation_ok),
            visible=pn.bind(bool, self.param.explanation_message), stylesheets=[STATUS_CSS])
        self._save_row.append(self.explanation_status)

    def _tick_options(self) -> dict[str, int]:
        return {tick_label(n, r): n - 1 for n, r in enumerate(self.state.saved, start=1)}

    @param.depends("state.saved", watch=True)
    def _show_runs(self) -> None:
        # A run keeps its index, so its tick stays.
        self.ticks.options = self._tick_options()
        self._compare()

    def _ticked(self) -> list[int]:
        return sorted(i for i in self.ticks.value if i < len(self.state.saved))

    def _show_ticked(self, *events) -> None:
        ticked = self._ticked()
        if len(ticked) == 1 and self.state.saved[ticked[0]].explanation:
            self.explanation.value = self.state.saved[ticked[0]].explanation  # edit it
        self._compare()

    def _compare(self) -> None:
        """Compare the first two ticked runs (by run number), or hide the comparison."""
        pair = self._ticked()[:2]
        self.compare.show([self.state.saved[i] for i in pair],
                          names=[run_name(i + 1, self.state.saved[i]) for i in pair])

    def attach(self) -> None:
        """Attach the Explanation to the ticked runs, or to the latest run if none is ticked."""
        saved, ticked = self.state.saved, self._ticked()
        if not saved:
            self.param.update(explanation_ok=False,
                              explanation_message="Explanation not saved: save a run first.")
            return
        latest = not ticked
        rows = ticked or [len(saved) - 1]
        text = self.explanation.value
        try:
            self.state.attach_explanation([saved[i].id for i in rows], text)
        except NotOwnerError as exc:  # a run shown from a link (?runs=): reading it is not changing it
            numbers = _others(saved, rows, set(self.state.owned)) or [
                i + 1 for i in rows if saved[i].id == exc.run_id]
            self.param.update(explanation_ok=False, explanation_message=not_owned_message(numbers))
            return
        except KeyError:
            self.param.update(explanation_ok=False, explanation_message=(
                "Explanation not saved: a run it was for is no longer in the store."))
            return
        except (ValueError, StoreError) as exc:
            why = said_to_learner(exc).removeprefix("Explanation not saved: ")
            self.param.update(explanation_ok=False,
                              explanation_message=f"Explanation not saved: {why}")
            return
        where = _runs_words([i + 1 for i in rows])
        if latest:
            where += ", the latest run (no run is ticked; tick runs to choose others)"
        replaced = _replaced(saved, rows, text)
        held = f"; it replaced the earlier explanation of {_runs_words(replaced)}" if replaced else ""
        self.param.update(explanation_ok=True, explanation_message=f"Explanation saved to {where}{held}.")

    def _stamp(self) -> str:
        """A UTC time stamp for a download's file name, different for every download."""
        now = datetime.now(UTC)
        if self._last_stamp is not None and now <= self._last_stamp:
            now = self._last_stamp + timedelta(microseconds=1)
        self._last_stamp = now
        return now.strftime("%Y%m%dT%H%M%S.%fZ")

    def _download(self, fmt: str) -> io.StringIO:
        stamp = self._stamp()
        records = list(self.state.saved)
        if fmt == "json":
            self.download_json.filename = f"attention-runs-{stamp}.json"
            return io.StringIO(export_json(records))
        self.download_csv.filename = f"attention-runs-{stamp}.csv"
        return io.StringIO(export_csv(records))

    def __panel__(self):
        return self._layout

