"""Run summaries and the runs directory's summary index: list a class's store without parsing it.

A :class:`RunSummary` is what the instructor's table, chart, filters and CSV need of a run: its
id, time, free text, settings and the three result summaries, not its matrices. Parsing and
checking one full record costs ~130 µs, so a listing that parses 10,000 of them takes seconds; a
summary is read from ``.summary-index.json`` in the runs directory instead.

The index is a cache, never a source of truth: each entry is keyed by its file's name and stat
(``mtime_ns``, size, inode), and an entry whose file has a different stat is ignored and the file
parsed again. Only a file that passed the store's full check gets an entry. The index is written
whole to a temp file and renamed over the old one, so readers see an old or a new index; several
processes may write it (the last writer wins, and a lost entry only costs a parse). A missing,
corrupt or foreign index, or one written by another version of the workbench (whose checks may
differ), is ignored and rewritten. Entries are type-checked as they are read, so
a tampered index cannot put anything but text, numbers and booleans on the page.

Left out: the full records (see :mod:`attention_core.store`); locking (not needed, see above).
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from attention_core import __version__
from attention_core.modes import run_title
from attention_core.records import ExperimentRecord, _refuse_constant

INDEX_NAME = ".summary-index.json"
INDEX_FORMAT = "attention-workbench-summary-index"
INDEX_VERSION = 2  # 2: summaries hold d_k and d_model
_TEXT = ("learner", "label", "prediction", "explanation", "notes")
_NUMBERS = ("total_future_weight", "min_row_sum", "max_row_sum_error")

StatKey = tuple[int, int, int]  # (st_mtime_ns, st_size, st_ino)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run without its matrices; attribute names match :class:`ExperimentRecord`'s.

    So code that reads ``id``, ``created_at``, the free text, ``causal``, ``mask_after_softmax``,
    ``failure_mode``, ``T``, ``d_k``, ``d_model`` (``None`` unless matrix mode), ``title``,
    ``total_future_weight``, ``min_row_sum``, ``max_row_sum_error`` or ``failed_checks`` (the
    table, the chart,
    :func:`~attention_core.store.export_csv`) takes either. ``created_datetime`` is parsed once,
    here, because listings sort by it.
    """

    id: str
    created_at: str
    learner: str | None
    label: str | None
    prediction: str | None
    explanation: str | None
    notes: str | None
    causal: bool
    mask_after_softmax: bool
    failure_mode: str
    T: int
    d_k: int
    d_model: int | None
    total_future_weight: float | None
    min_row_sum: float | None
    max_row_sum_error: float | None
    failed_checks: tuple[str, ...]
    created_datetime: datetime = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "created_datetime", datetime.fromisoformat(self.created_at))

    @property
    def title(self) -> str:
        """The run's one name on every page and export (:func:`~attention_core.modes.run_title`)."""
        return run_title(self.failure_mode, self.causal, self.T)

    @classmethod
    def of(cls, record: ExperimentRecord) -> RunSummary:
        """The summary of a full (already checked) record."""
        return cls(
            id=record.id, created_at=record.created_at, learner=record.learner,
            label=record.label, prediction=record.prediction, explanation=record.explanation,
            notes=record.notes, causal=record.causal, mask_after_softmax=record.mask_after_softmax,
            failure_mode=record.failure_mode, T=record.T, d_k=record.d_k, d_model=record.d_model,
            total_future_weight=record.total_future_weight, min_row_sum=record.min_row_sum,
            max_row_sum_error=record.max_row_sum_error, failed_checks=record.failed_checks,
        )

    def to_entry(self) -> dict:
        """The summary as a JSON-native dict, for the index."""
        entry = {name: getattr(self, name) for name in _ENTRY_KEYS}
        entry["failed_checks"] = list(self.failed_checks)
        return entry

    @classmethod
    def from_entry(cls, entry: Any) -> RunSummary:
        """Rebuild a summary from an index entry, checking every value's type.

        Raises
        ------
        ValueError
            The entry is not what :meth:`to_entry` writes (the entry is then ignored).
        """
        if type(entry) is not dict or entry.keys() != _ENTRY_KEY_SET:
            raise ValueError("not a summary entry")
        ok = (
            all(type(entry[k]) is str for k in ("id", "created_at", "failure_mode"))
            and all(entry[k] is None or type(entry[k]) is str for k in _TEXT)
            and type(entry["causal"]) is bool and type(entry["mask_after_softmax"]) is bool
            and type(entry["T"]) is int and type(entry["d_k"]) is int
            and (entry["d_model"] is None or type(entry["d_model"]) is int)
            and all(entry[k] is None or type(entry[k]) in (int, float) for k in _NUMBERS)
            and type(entry["failed_checks"]) is list
            and all(type(name) is str for name in entry["failed_checks"])
        )
        if not ok:
            raise ValueError("a summary entry with a value of the wrong type")
        summary = cls(**{**entry, "failed_checks": tuple(entry["failed_checks"])})
        if summary.created_datetime.tzinfo is None:  # would not sort beside the others
            raise ValueError("a summary entry without a UTC offset")
        return summary


_ENTRY_KEYS = tuple(f for f in RunSummary.__dataclass_fields__ if f != "created_datetime")
_ENTRY_KEY_SET = frozenset(_ENTRY_KEYS)


def read_index(directory: Path) -> dict[str, tuple[StatKey, RunSummary]]:
    """The entries of ``directory``'s summary index, by file name; ``{}`` when there is none.

    Never raises: a missing, unreadable, corrupt or foreign index is no index, and a malformed
    entry is left out (its file is then parsed).

    Notes
    -----
    Python's cyclic garbage collector is held off while the index is read: every object made
    here lives on, and at 100,000 runs the collector's repeated full passes over them took
    longer than the reading itself (3.0 s against 1.5 s). Nothing here makes a cycle.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_index(directory)
    finally:
        if enabled:
            gc.enable()


def _read_index(directory: Path) -> dict[str, tuple[StatKey, RunSummary]]:
    try:
        with open(directory / INDEX_NAME, "rb") as f:
            data = json.loads(f.read(), parse_constant=_refuse_constant)
    except (OSError, ValueError, RecursionError):
        return {}
    if (type(data) is not dict or data.get("format") != INDEX_FORMAT
            or data.get("version") != INDEX_VERSION or data.get("app_version") != __version__
            or type(data.get("entries")) is not dict):
        return {}
    entries = {}
    for name, item in data["entries"].items():
        try:
            key, run = item
            if type(key) is not list or len(key) != 3 or not all(type(k) is int for k in key):
                continue
            summary = RunSummary.from_entry(run)
        except (TypeError, ValueError):
            continue
        if summary.id + ".json" == name:
            entries[name] = (tuple(key), summary)
    return entries


def write_index(directory: Path, entries: dict[str, tuple[StatKey, RunSummary]]) -> bool:
    """Replace ``directory``'s summary index with ``entries`` atomically; ``False`` if it failed.

    Best effort: a read-only or full runs directory only means the next cold listing parses
    every file. The temp file is named like the store's (``.<pid>-….tmp``), so listings ignore
    it and :meth:`~attention_core.store.RunStore.cleanup_temp_files` removes a killed writer's.
    """
    bundle = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "app_version": __version__,
              "entries": {name: [list(key), summary.to_entry()]
                          for name, (key, summary) in entries.items()}}
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.getpid()}-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o644)
            json.dump(bundle, f, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        os.replace(tmp, directory / INDEX_NAME)
        tmp = None
        return True
    except (OSError, ValueError):
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


__all__ = ["INDEX_NAME", "RunSummary", "read_index", "write_index"]
