"""One instructor session's state: the filters, the sort, the table's page of runs, the selection.

The state never holds every run: the table's page is one store query (``WHERE`` the filters,
``ORDER BY`` the chosen column, ``LIMIT``/``OFFSET`` the page, and a ``COUNT``), re-run when a
filter, the sort or the page changes, or when the store's change token moved
(:meth:`~app.store.RunStore.change_token`, one indexed read per tick). ``revision`` moves
whenever the runs behind the filters may have changed; views that show many filtered runs (the
class picture) read them again then, with :meth:`InstructorState.filtered`; ``changes`` moves
only when the store's runs changed (views of the whole class, the ticked runs). The page needs full
records only to compare two runs and to export JSON, and reads just those. A run is named by its
title (:func:`attention_core.modes.run_title`), the name every page and the CSV give it. Left out:
widgets and layout (the views in this package).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, time, timedelta
from typing import NamedTuple, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import param

from app.logins import GuardedStore, store_problem
from app.oplog import event, logger
from app.store import RunFilter, RunStore, RunSummary, StoreError, export_csv, export_json
from app.store.exports import UnreadableRunError
from attention_core.modes import FAILURE_MODES, run_title
from attention_core.records import ExperimentRecord, RecordError

ALL_MODES = "All modes"
PAGE_SIZE = 20
# What the table can be sorted by (its column names) and the store column each one sorts.
SORTS = {"created": "created_at", "learner": "learner", "label": "label", "mode": "mode", "tokens": "T",
         "d_k": "d_k", "d_model": "d_model", "total future-token weight": "total_future_weight",
         "smallest row sum": "min_row_sum", "failed checks": "failed_checks"}
# The lesson's contrast first: every mode with the causal mask it asked for (correct, then the
# broken one), then the runs whose broken order had nothing to mask, then bidirectional runs.
_MODE_ORDER = (
    *(run_title(name, True, 3) for name in FAILURE_MODES),
    run_title("mask_after_softmax", True, 1),
    *(run_title(name, False, 3) for name in FAILURE_MODES),
)


T = TypeVar("T")


def page_count(runs: int) -> int:
    """How many table pages ``runs`` runs fill (1 when there are none)."""
    return max(1, -(-runs // PAGE_SIZE))


def mode_order(titles) -> list[str]:
    """Run titles in the lesson's order (see ``_MODE_ORDER``), any others alphabetically."""
    titles = set(titles)
    return [t for t in _MODE_ORDER if t in titles] + sorted(titles - set(_MODE_ORDER))


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, UTC when it is unknown (a browser may report anything)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


class Refresh(NamedTuple):
    """What a refresh read (:meth:`InstructorState.read_refresh`): the change token, which runs
    it read (``where``: filters, sort, page), the modes, how many runs pass the filters, the
    page's runs and the store's total."""

    token: int
    where: tuple
    modes: list[str]
    matching: int
    page_runs: list[RunSummary]
    total: int


class InstructorState(param.Parameterized):
    """One instructor session: the filters, the sort, the table's page of runs, the selection."""

    store = param.ClassSelector(class_=(RunStore, GuardedStore),
                                doc="The server's run store (shared), or that store behind the page's login.")
    learner = param.String(default="", doc="Keep runs whose learner contains this (any case).")
    label = param.String(default="", doc="Keep runs whose label contains this (any case).")
    mode = param.Selector(default=ALL_MODES, objects=[ALL_MODES],
                          doc="Keep runs with this title (run_title), or all.")
    start = param.CalendarDate(default=None, allow_None=True, doc="First day kept (local date).")
    end = param.CalendarDate(default=None, allow_None=True, doc="Last day kept (local date).")
    timezone = param.String(default="UTC", doc="IANA zone of the instructor's browser.")
    store_problem = param.String(default="", doc=(
        "Why the store could not be read at the last refresh, as the page says it ('' when it was)."))
    sort_by = param.Selector(default="created", objects=list(SORTS), label="Sort by",
                             doc="The table's column the runs are sorted by (see SORTS).")
    descending = param.Boolean(default=True, doc="Newest, largest or last in the alphabet first.")
    page = param.Integer(default=1, bounds=(1, None), doc="The table's page, from 1.")
    total = param.Integer(default=0, doc="How many runs the store holds.")
    matching = param.Integer(default=0, doc="How many runs pass the filters.")
    page_runs = param.List(default=[], doc="The runs on the table's page, in the table's order.")
    revision = param.Integer(default=0, doc="Moves whenever the runs passing the filters may have changed.")
    changes = param.Integer(default=0, doc="Moves whenever the store's runs changed (a save, an "
                                           "explanation, an import); not with the filters.")
    selected_ids = param.List(default=[], item_type=str,
                              doc="Selected run ids, at most two, oldest selection first.")

    def __init__(self, **params):
        super().__init__(**params)
        self._token: int | None = None
        # A store that cannot be read as the page opens: the page says so (store_problem) and
        # its next tick reads everything once it answers.
        self.read_or_say(self.refresh)

    @property
    def pages(self) -> int:
        """How many pages the runs passing the filters fill (1 when none pass)."""
        return page_count(self.matching)

    @property
    def sort(self) -> list[tuple[str, str]]:
        """The store's sort for the table: the chosen column, then the newest (oldest) first."""
        direction = "desc" if self.descending else "asc"
        return [(column, direction) for column in dict.fromkeys((SORTS[self.sort_by], "created_at"))]

    def refresh(self) -> None:
        """Re-read the table's page and the counts if the store's change token moved; otherwise
        touch nothing. (:meth:`read_refresh` then :meth:`show_refresh`.)"""
        self.show_refresh(self.read_refresh())

    def read_refresh(self) -> Refresh | None:
        """What :meth:`refresh` reads, or ``None`` when the store's change token has not moved:
        store reads only, nothing of this state changed, so a page's periodic tick runs it in a
        store thread (:mod:`app.shared.store_calls`). Raises what the store raises."""
        token = self.store.change_token()
        if token == self._token:
            return None
        where = run_filter, sort, page = self._where()
        found = self.store.query(run_filter, sort=list(sort), limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
        # Without filters the page's count is the store's: one count less as a page opens.
        total = found.total if run_filter is None else self.store.count()
        return Refresh(token, where, mode_order(self.store.modes()), found.total, found.runs, total)

    def show_refresh(self, read: Refresh | None) -> None:
        """Show what :meth:`read_refresh` read (nothing when it is ``None``). If the instructor
        moved meanwhile (a filter, the sort, the page), what was read is for a table no longer
        shown: it is dropped, and the next tick reads again."""
        if read is None or read.where != self._where():
            return
        self.param.mode.objects = [ALL_MODES, *read.modes]
        if self.mode not in self.param.mode.objects:  # its runs are gone: every mode, read now
            self.mode = ALL_MODES  # its watcher reads the page
            self.total = self.matching if self.run_filter() is None else self.store.count()
        else:
            self._show_page(read.matching, read.page_runs)
            self.total = read.total
        self._token = read.token  # only once read: a tick that failed half-way is tried again
        self.param.update(revision=self.revision + 1, changes=self.changes + 1)

    def _where(self) -> tuple[RunFilter | None, tuple[tuple[str, str], ...], int]:
        """The filters, the sort and the page: which runs the table shows."""
        return self.run_filter(), tuple(self.sort), self.page

    def run_filter(self) -> RunFilter | None:
        """The filters as the store's query takes them, or None when they keep every run.

        A local day is ``[its midnight, the next midnight)`` in the browser's zone.
        """
        learner, label = self.learner.strip(), self.label.strip()
        mode = None if self.mode == ALL_MODES else self.mode
        if not (learner or label or mode or self.start or self.end):
            return None
        here = zone(self.timezone)
        return RunFilter(
            learner=learner, label=label, mode=mode,
            created_from=datetime.combine(self.start, time(), tzinfo=here) if self.start else None,
            created_before=(datetime.combine(self.end + timedelta(days=1), time(), tzinfo=here)
                            if self.end else None))

    def filtered(self, newest: int | None = None) -> list[RunSummary]:
        """The runs passing the filters, oldest first: every one, or the ``newest`` ones (one query)."""
        if newest is None:
            return self.store.query(self.run_filter()).runs
        return self.store.query(self.run_filter(), sort=[("created_at", "desc")], limit=newest,
                                counted=False).runs[::-1]

    @param.depends("learner", "label", "mode", "start", "end", watch=True)
    def _filters_changed(self) -> None:
        self._first_page()
        self.revision += 1

    @param.depends("timezone", watch=True)
    def _timezone_changed(self) -> None:
        if self.start or self.end:  # local days begin at another instant
            self._filters_changed()

    @param.depends("sort_by", "descending", watch=True)
    def _first_page(self) -> None:
        if self.page == 1:
            self.read_or_say(self._read_page)
        else:
            self.page = 1  # its watcher reads the page

    @param.depends("page", watch=True)
    def _page_changed(self) -> None:
        self.read_or_say(self._read_page)

    def read_or_say(self, read: Callable[..., T], *args, **kwargs) -> T | None:
        """``read(*args, **kwargs)`` for a view following an instructor's move (a filter, a sort,
        a page, a selection), or ``None`` when the store cannot be read: then
        :attr:`store_problem` says so, the view keeps what it showed, and the next
        :meth:`refresh` that reads the store reads everything again. (The store logs the error.)"""
        try:
            return read(*args, **kwargs)
        except StoreError as error:
            self.store_problem = store_problem(error)
            self._token = None
            return None

    def _read_page(self) -> None:
        """The page's runs and the count passing the filters: one ``ORDER BY … LIMIT`` query. A
        page past the last (runs filtered away) becomes the last."""
        found = self.store.query(self.run_filter(), sort=self.sort, limit=PAGE_SIZE,
                                 offset=(self.page - 1) * PAGE_SIZE)
        self._show_page(found.total, found.runs)

    def _show_page(self, matching: int, runs: list[RunSummary]) -> None:
        last = page_count(matching)
        if self.page > last:
            self.matching = matching
            self.page = last  # its watcher reads that page
            return
        self.param.update(matching=matching, page_runs=runs)

    def select(self, run_id: str) -> None:
        """Add a run to the selection; a third selection drops the oldest."""
        if run_id in self.selected_ids:
            return
        self.selected_ids = [*self.selected_ids, run_id][-2:]

    @property
    def compared(self) -> list[ExperimentRecord]:
        """The selected runs still in the store, in full, in selection order."""
        compared = []
        for run_id in self.selected_ids:
            try:
                compared.append(self.store.get(run_id))
            except (KeyError, RecordError):
                pass  # not (or no longer) a readable run
        return compared

    def export(self, fmt: str, left_out: list[UnreadableRunError] | None = None) -> str:
        """The runs passing the filters, oldest first, as a JSON bundle (each record exactly as
        stored) or as CSV. A run that cannot be read (a store edited by hand) is left out, named
        in the bundle's ``skipped`` and put in ``left_out`` if given."""
        wanted = self.run_filter()
        left_out = [] if left_out is None else left_out
        runs = (self.store.iter_texts(wanted, left_out=left_out) if fmt == "json"
                else self.store.iter_summaries(wanted))
        counted = [0]

        def count(items):
            for item in items:
                counted[0] += 1
                yield item

        text = (export_json if fmt == "json" else export_csv)(count(runs), left_out)
        event(logger("store"), "export", format=fmt, runs=counted[0] - len(left_out) if fmt == "csv"
              else counted[0], source="instructor")
        return text
