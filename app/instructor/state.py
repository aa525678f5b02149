"""One instructor session's state: the store's runs, the filters, the filtered runs, the selection.

The runs are :class:`~app.store.RunSummary` objects (no matrices), re-read from the store only
when its change token moved (:meth:`~app.store.RunStore.change_token`, one indexed read per
tick); the filters are one store query (:meth:`run_filter`, SQL on indexed columns) and the mode
choices the store's distinct titles. The page needs full records only to compare two runs and to
export JSON, and reads just those. A run is named by its title
(:func:`attention_core.modes.run_title`), the name every page and the CSV give it. Left out:
widgets and layout (the views in this package).
"""

from __future__ import annotations

import json
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import param

from app.store import RunFilter, RunStore, RunSummary, export_csv, export_json
from attention_core.modes import FAILURE_MODES, run_title
from attention_core.records import ExperimentRecord, RecordError

ALL_MODES = "All modes"
# The lesson's contrast first: every mode with the causal mask it asked for (correct, then the
# broken one), then the runs whose broken order had nothing to mask, then bidirectional runs.
_MODE_ORDER = (
    *(run_title(name, True, 3) for name in FAILURE_MODES),
    run_title("mask_after_softmax", True, 1),
    *(run_title(name, False, 3) for name in FAILURE_MODES),
)


def mode_order(titles) -> list[str]:
    """Run titles in the lesson's order (see ``_MODE_ORDER``), any others alphabetically."""
    titles = set(titles)
    return [t for t in _MODE_ORDER if t in titles] + sorted(titles - set(_MODE_ORDER))


def skip_sentence(file: str, reason: str) -> str:
    """Why a run is left out of an export, as one sentence naming the run and its file.

    ``reason`` is the store's short reason (``"not valid JSON: …"``, ``"could not be read (…)"``).
    """
    run = file.removesuffix(".json")
    verb = "is " if reason.startswith("not ") else ""
    return f"Run {run} was left out of this export: its file {file} {verb}{reason.rstrip('.')}."


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, UTC when it is unknown (a browser may report anything)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


class InstructorState(param.Parameterized):
    """One instructor session: the store's runs, the filters, the filtered runs, the selection."""

    store = param.ClassSelector(class_=RunStore, doc="The server's run store (shared).")
    records = param.List(default=[], doc="Every run's summary, oldest first.")
    problems = param.List(default=[], doc="(source, reason) for every run left out (none in a database).")
    learner = param.String(default="", doc="Keep runs whose learner contains this (any case).")
    label = param.String(default="", doc="Keep runs whose label contains this (any case).")
    mode = param.Selector(default=ALL_MODES, objects=[ALL_MODES],
                          doc="Keep runs with this title (run_title), or all.")
    start = param.CalendarDate(default=None, allow_None=True, doc="First day kept (local date).")
    end = param.CalendarDate(default=None, allow_None=True, doc="Last day kept (local date).")
    timezone = param.String(default="UTC", doc="IANA zone of the instructor's browser.")
    filtered = param.List(default=[], doc="The runs passing every filter, oldest first.")
    selected_ids = param.List(default=[], item_type=str,
                              doc="Selected run ids, at most two, oldest selection first.")

    def __init__(self, **params):
        super().__init__(**params)
        self._token: int | None = None
        self.refresh()

    def refresh(self) -> None:
        """Re-read the store's runs if its change token moved; otherwise touch nothing."""
        token = self.store.change_token()
        if token == self._token:
            return
        records = self.store.query().runs
        self._token = token
        modes = mode_order(self.store.modes())
        self.param.mode.objects = [ALL_MODES, *modes]
        if self.mode not in self.param.mode.objects:
            self.mode = ALL_MODES
        self.records = records

    def local_time(self, record: RunSummary | ExperimentRecord) -> datetime:
        return record.created_datetime.astimezone(zone(self.timezone))

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

    @param.depends("records", "learner", "label", "mode", "start", "end", "timezone",
                   watch=True, on_init=True)
    def _filter(self) -> None:
        # A query (WHERE on the store's indexed columns), not Python over every run.
        wanted = self.run_filter()
        kept = self.records if wanted is None else self.store.query(wanted).runs
        # Unchanged runs (a refresh with nothing new, a zone change without date filters): keep
        # the list, so the table and the chart are not rebuilt.
        if [r.id for r in kept] != [r.id for r in self.filtered]:
            self.filtered = kept

    def select(self, run_id: str) -> None:
        """Add a run to the selection; a third selection drops the oldest."""
        if run_id in self.selected_ids:
            return
        self.selected_ids = [*self.selected_ids, run_id][-2:]

    @property
    def compared(self) -> list[ExperimentRecord]:
        """The selected runs still in the store, in full, in selection order."""
        listed = {r.id for r in self.records}
        compared = []
        for run_id in self.selected_ids:
            if run_id in listed:
                try:
                    compared.append(self.store.get(run_id))
                except (KeyError, RecordError):
                    pass  # gone since the listing
        return compared

    def export(self, fmt: str) -> str:
        """The filtered runs as a JSON bundle (each record exactly as stored) or as CSV.

        A run listed but gone from the store by the time of the export is named in the bundle's
        ``skipped``, as a sentence.
        """
        if fmt == "json":
            wanted = [r.id for r in self.filtered]
            found: set[str] = set()
            skipped = [(name, skip_sentence(name, reason)) for name, reason in self.problems]

            def texts():
                for text in self.store.iter_texts(ids=wanted):
                    found.add(json.loads(text)["id"])
                    yield text
                # Read by export_json after the last run, so the runs found decide.
                skipped.extend((run_id, f"Run {run_id} was left out of this export: it is no longer in the "
                                        "store (removed after the page listed it).")
                               for run_id in wanted if run_id not in found)

            return export_json(texts(), skipped)
        return export_csv(self.filtered)
