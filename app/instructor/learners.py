"""The learners view: one row per learner, which of the Self-attention lesson's checkpoints each
has reached.

The lesson names four checkpoints. Three leave evidence in the runs a learner saves:

- **predict**: a run with a prediction written;
- **experiment**: a correct run with the causal mask *and* a "mask after softmax" run saved
  (the lesson's contrast), plus which other failure modes the learner tried;
- **explain**: a run with an explanation attached by the page that saved it (written with that
  page's key, store version 6). A run's link shows the run to anyone but does not let them change
  it, and an imported run's explanation is not credited: its record cannot say who wrote it.

(The fourth, **implement**, happens in the learner's editor, not here.) Each checkpoint says when
it was reached: the time of the run that completed it. Learners on the class list who saved
nothing get a row too, so "who is missing what" includes them; runs without a learner name are
counted apart, never hidden.

The view counts with the store's ``GROUP BY`` (:meth:`~app.store.RunStore.learner_runs`, a row
per learner text) and merges spellings here (:func:`class_checkpoints`);
:func:`learner_checkpoints` counts the same from runs in Python, the reference the store's query
is tested against. Left out: widgets (``LearnersView`` below is the only view).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import panel as pn
import param

from app.shared.html import Markup, html, join
from app.shared.static import read_text
from app.store import LearnerTally, RunStore

CHECKPOINTS = ("predict", "experiment", "explain")
ANYONE = "Anyone"
MISSING = {f"Missing {c}": c for c in CHECKPOINTS}
COLUMNS = ("learner", "runs", "predict", "experiment", "other failure modes tried", "explain")


@dataclass
class LearnerCheckpoints:
    """What one learner has done, from their runs (``runs`` is 0 for a class-list name only)."""

    learner: str
    runs: int = 0
    predicted_at: datetime | None = None
    correct_causal_at: datetime | None = None
    mask_after_softmax_at: datetime | None = None
    explained_at: datetime | None = None
    other_modes: set[str] = field(default_factory=set)  # run titles, see attention_core.modes.run_title

    @property
    def experimented_at(self) -> datetime | None:
        """When both runs of the lesson's contrast existed (the later of the two), or None."""
        if self.correct_causal_at is None or self.mask_after_softmax_at is None:
            return None
        return max(self.correct_causal_at, self.mask_after_softmax_at)

    def reached(self, checkpoint: str) -> datetime | None:
        """When ``checkpoint`` (one of :data:`CHECKPOINTS`) was reached, or None."""
        return {"predict": self.predicted_at, "experiment": self.experimented_at,
                "explain": self.explained_at}[checkpoint]

    def still_needs(self) -> str:
        """What the experiment checkpoint still lacks, in the lesson's words ("" when done)."""
        lacking = [what for what, at in (("a correct causal run", self.correct_causal_at),
                                         ("a mask-after-softmax run", self.mask_after_softmax_at))
                   if at is None]
        return " and ".join(lacking)


def _earliest(current: datetime | None, at: datetime | None) -> datetime | None:
    return at if current is None or (at is not None and at < current) else current


def _class_book(class_list: Iterable[str]):
    """An empty book of learners holding the class list's names, and its ``entry(name)``: the
    learner ``name`` is (surrounding spaces dropped, case ignored), added as first seen."""
    learners: dict[str, LearnerCheckpoints] = {}

    def entry(name: str) -> LearnerCheckpoints:
        return learners.setdefault(name.strip().casefold(), LearnerCheckpoints(name.strip()))

    for name in class_list:
        if name.strip():
            entry(name)
    return learners, entry


def _by_name(learners: dict[str, LearnerCheckpoints]) -> list[LearnerCheckpoints]:
    return sorted(learners.values(), key=lambda r: r.learner.casefold())


def learner_checkpoints(runs: Iterable, class_list: Iterable[str] = ()) -> tuple[list[LearnerCheckpoints], int]:
    """Each learner's checkpoints, and how many runs carry no learner name.

    Parameters
    ----------
    runs : iterable of RunSummary or ExperimentRecord
        Anything with ``learner``, ``prediction``, ``failure_mode``, ``causal``, ``T``, ``title``
        and ``created_datetime`` (timezone-aware). A "mask after softmax" run counts for the
        experiment only when it had a future cell to mask (causal, T > 1). An explanation counts
        only with ``explained_by_owner`` (a store's summary says; a record alone cannot, so an
        :class:`~attention_core.records.ExperimentRecord`'s never counts).
    class_list : iterable of str
        Names expected in the class; each gets a row even without a run.

    Returns
    -------
    (list of LearnerCheckpoints, int)
        One entry per learner name (runs matched by their name with surrounding spaces dropped
        and case ignored, shown as first seen), sorted by name; and the count of unnamed runs.
    """
    learners, entry = _class_book(class_list)
    unnamed = 0
    for run in runs:
        if not (run.learner or "").strip():
            unnamed += 1
            continue
        row = entry(run.learner)
        row.runs += 1
        at = run.created_datetime
        if (run.prediction or "").strip():
            row.predicted_at = _earliest(row.predicted_at, at)
        if getattr(run, "explained_by_owner", False):
            row.explained_at = _earliest(row.explained_at, at)
        if run.failure_mode == "correct" and run.causal:
            row.correct_causal_at = _earliest(row.correct_causal_at, at)
        elif run.failure_mode == "mask_after_softmax" and run.causal and run.T > 1:
            row.mask_after_softmax_at = _earliest(row.mask_after_softmax_at, at)
        else:  # every other way to run it, by the name the pages give it ("…, nothing to mask")
            row.other_modes.add(run.title)
    return _by_name(learners), unnamed


def class_checkpoints(tally: LearnerTally, class_list: Iterable[str] = ()) -> tuple[list[LearnerCheckpoints], int]:
    """:func:`learner_checkpoints` from the store's counts per learner text instead of every run.

    Parameters
    ----------
    tally : LearnerTally
        From :meth:`~app.store.RunStore.learner_runs`: one entry per stored learner text.
    class_list : iterable of str
        Names expected in the class; each gets a row even without a run.

    Returns
    -------
    (list of LearnerCheckpoints, int)
        As :func:`learner_checkpoints`: spellings of one name merged (surrounding spaces dropped,
        case ignored), shown as in the earliest run (two spellings first used at the same
        instant: the one first in code-point order); and the count of unnamed runs.
    """
    learners, entry = _class_book(class_list)
    for group in tally.learners:  # earliest first: the first spelling seen is the one shown
        row = entry(group.learner)
        row.runs += group.runs
        row.predicted_at = _earliest(row.predicted_at, group.predicted_at)
        row.explained_at = _earliest(row.explained_at, group.explained_at)
        row.correct_causal_at = _earliest(row.correct_causal_at, group.correct_causal_at)
        row.mask_after_softmax_at = _earliest(row.mask_after_softmax_at, group.mask_after_softmax_at)
        row.other_modes |= group.other_modes
    return _by_name(learners), tally.unnamed


def _when(at: datetime | None, tz) -> str:
    return "" if at is None else at.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def table_rows(learners: list[LearnerCheckpoints], tz) -> list[dict]:
    """The learners as the table and the CSV show them, times in ``tz``."""
    return [{
        "learner": r.learner, "runs": r.runs,
        "predict": _when(r.predicted_at, tz) or "missing",
        "experiment": _when(r.experimented_at, tz) or f"missing {r.still_needs()}",
        "other failure modes tried": "; ".join(sorted(r.other_modes)),
        "explain": _when(r.explained_at, tz) or "missing",
    } for r in learners]


def learners_csv(rows: list[dict]) -> str:
    """The learners view as CSV (one header line, then one line per learner)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def learners_table(rows: list[dict]) -> Markup:
    """The learners as an HTML table (every text escaped; a class is small enough to list whole)."""
    head = join(html("<th scope='col'>{}</th>", c) for c in COLUMNS)
    body = join(
        html("<tr><th scope='row'>{}</th>{}</tr>", row["learner"], join(
            html("<td class='{}'>{}</td>", "missing" if str(row[c]).startswith("missing") else "", row[c])
            for c in COLUMNS[1:])) for row in rows)
    return html("<div class='learners-scroll'><table class='learners' aria-label='Learners and their checkpoints'>"
                "<thead><tr>{}</tr></thead><tbody>{}</tbody></table></div>", head, body)


_TABLE_CSS = read_text(__package__, "learners_table.css")


class LearnersView(pn.viewable.Viewer):
    """The learners table: checkpoints per learner, a class list, a filter, a CSV download.

    ``store`` holds the runs to count (all of them, whatever the page's filters), and
    ``timezone`` is a callable giving the instructor's zone; ``refresh()`` recounts (one store
    query, :meth:`~app.store.RunStore.learner_runs`), e.g. when new runs arrive, and counts at
    once unless ``count_now`` is false.
    """

    class_list = param.String(default="", doc="Names expected in the class, one per line.")
    show = param.Selector(default=ANYONE, objects=[ANYONE, *MISSING], doc="Which learners to list.")

    def __init__(self, store: RunStore, timezone, count_now: bool = True, **params):
        super().__init__(**params)
        self._store, self._timezone = store, timezone
        self.table = pn.pane.HTML("", stylesheets=[_TABLE_CSS], sizing_mode="stretch_width")
        self.summary = pn.pane.HTML("")
        self.download = pn.widgets.FileDownload(
            callback=lambda: io.StringIO(learners_csv(self._rows())), filename="class-learners.csv",
            label="Export learners CSV", embed=False)
        self.rows: list[dict] = []
        self.param.watch(lambda *e: self.refresh(), ["class_list", "show"])
        if count_now:  # else the caller calls refresh(), e.g. to say itself why the store could not
            self.refresh()

    def _rows(self) -> list[dict]:
        names = self.class_list.splitlines()
        learners, self._unnamed = class_checkpoints(self._store.learner_runs(), names)
        if self.show != ANYONE:
            learners = [r for r in learners if r.reached(MISSING[self.show]) is None]
        return table_rows(learners, self._timezone())

    def refresh(self) -> None:
        """Recount every learner's checkpoints from the runs."""
        rows = self._rows()
        self.rows = rows
        self.table.object = learners_table(rows)
        apart = (f" {self._unnamed} run{'s' if self._unnamed != 1 else ''} without a learner name "
                 "counted apart." if self._unnamed else "")
        self.summary.object = html("<p>{} learner{} listed.{}</p>", len(rows), "s" if len(rows) != 1 else "", apart)

    def __panel__(self):
        return pn.Column(
            pn.pane.HTML("<h3>Learners</h3><p>Checkpoints of the Self-attention lesson per "
                         "learner: predict (a prediction written), experiment (a correct causal "
                         "run and a mask-after-softmax run saved), explain (an explanation "
                         "attached by the page that saved the run; an imported run's is not "
                         "counted).</p>"),
            # A FlexBox, not a Row: at 640 px the two inputs wrap instead of widening the page.
            pn.FlexBox(pn.widgets.TextAreaInput.from_param(
                           self.param.class_list, label="Class list (one name per line)", height=90),
                       pn.widgets.Select.from_param(self.param.show, label="Show learners")),
            self.summary, self.table, self.download, sizing_mode="stretch_width")
