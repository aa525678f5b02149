"""Bring runs into a store: record files, folders of them, and export bundles.

Each file is read and every record in it validated against the JSON Schema (and the shape rules)
and its results computed again from its inputs and settings
(:func:`~attention_core.recompute.recomputed_record`: a record whose results disagree is refused,
naming the first field that differs; one that agrees is stored with the core's numbers) before
anything is written; then the file's valid records go into the store in one transaction
(:meth:`~app.store.runs.RunStore.import_records`), so a file is never half-imported. A run
already in the store with the same content is skipped; the same id with different content is
refused and reported, never overwritten. A bad file (unreadable, not JSON, neither a record nor
a bundle, empty, too large) is reported with its reason and the other files are still imported. A
``created_at`` without a UTC offset (another tool's record) is read as UTC, with a note. A key
given twice in one object counts as its last (as Python's ``json`` reads it); the record is
checked and recomputed as read, so no hidden first value reaches the store.

:func:`import_paths` is the command line's; :func:`import_data` is one file's (an upload's).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.oplog import event, logger
from app.store.dialects import StoreError
from app.store.exports import EXPORT_FORMAT
from app.store.runs import RunStore
from attention_core.recompute import recomputed_record
from attention_core.records import ID_PATTERN, ExperimentRecord, RecordError, _refuse_constant

# A bundle of 100,000 runs is ~300 MB; a file much larger than that is not one of ours.
MAX_IMPORT_BYTES = 1024 * 1024 * 1024
# Why a file holds no run, in the command's and the upload's words alike.
EMPTY = "the file is empty"
NOT_JSON = "not a JSON record or export bundle (.json)"
_NAIVE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?", re.ASCII)


@dataclass
class FileReport:
    """What importing one file did.

    Attributes
    ----------
    name : str
        The file as given (a path, or an upload's file name).
    error : str or None
        Why the file could not be read at all (nothing of it imported).
    imported, skipped, refused : list of str
        Run ids: added; already in the store with the same content; already in the store with
        different content (not overwritten).
    invalid : list of (str, str)
        ``(where, reason)`` for records in the file that are not valid experiment records, e.g.
        ``("runs[3]", "not an experiment record: inputs.queries: …")``.
    notes : list of str
        E.g. a ``created_at`` read as UTC.
    """

    name: str
    error: str | None = None
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def read(self) -> bool:
        """Whether the file could be read (even if none of its records went in)."""
        return self.error is None

    def lines(self) -> list[str]:
        """What to tell a person about this file, one sentence a line."""
        if self.error is not None:
            return [f"{self.name}: {self.error}"]
        parts = [f"imported {len(self.imported):,}"]
        if self.skipped:
            parts.append(f"skipped {len(self.skipped):,} already in the store")
        if self.refused:
            shown = ", ".join(self.refused[:5]) + (", …" if len(self.refused) > 5 else "")
            parts.append(f"refused {len(self.refused):,} whose id is in the store with different content ({shown})")
        if self.invalid:
            parts.append(f"{len(self.invalid):,} not valid")
        out = [f"{self.name}: " + ", ".join(parts)]
        out += [f"{self.name} {where}: not imported: {reason}" for where, reason in self.invalid[:20]]
        if len(self.invalid) > 20:
            out.append(f"{self.name}: … and {len(self.invalid) - 20:,} more records not valid")
        out += [f"{self.name}: {note}" for note in self.notes[:20]]
        if len(self.notes) > 20:
            out.append(f"{self.name}: … and {len(self.notes) - 20:,} more notes like these")
        return out


@dataclass
class PassedOver:
    """The files in a folder given to an import that were passed over: not ``.json`` files.

    Attributes
    ----------
    folder : str
        The folder as given.
    names : list of str
        The files passed over, relative to ``folder``, in name order (any case).
    """

    folder: str
    names: list[str]

    def lines(self) -> list[str]:
        """One sentence: how many files, and the first few names."""
        n, shown = len(self.names), ", ".join(self.names[:5]) + (", …" if len(self.names) > 5 else "")
        return [f"{self.folder}: passed over {n:,} file{'s' if n != 1 else ''} that {'are' if n != 1 else 'is'} "
                f"not .json: {shown}"]


@dataclass
class ImportReport:
    """Every file's :class:`FileReport`, the folders' files passed over, and the totals."""

    files: list[FileReport] = field(default_factory=list)
    passed_over: list[PassedOver] = field(default_factory=list)

    def total(self, what: str) -> int:
        """How many runs were ``imported``, ``skipped``, ``refused`` or ``invalid`` in all."""
        return sum(len(getattr(f, what)) for f in self.files)

    @property
    def unread(self) -> int:
        return sum(not f.read for f in self.files)

    @property
    def nothing_read(self) -> bool:
        """No file could be read (the command then exits non-zero)."""
        return not any(f.read for f in self.files)

    def summary(self) -> str:
        """One closing sentence with the totals."""
        imported, passed = self.total("imported"), sum(len(p.names) for p in self.passed_over)
        return (f"imported {imported:,} run{'' if imported == 1 else 's'}, skipped {self.total('skipped'):,} "
                f"already in the store, refused {self.total('refused'):,} (same id, different content), "
                f"{self.total('invalid'):,} not valid, {self.unread:,} of {len(self.files):,} files not read"
                + (f", {passed:,} passed over (not .json)" if passed else ""))


def _records_in(document: object) -> tuple[list[tuple[str, object]], bool]:
    """``(where, data)`` of each record in a parsed file, and whether it is a bundle."""
    if isinstance(document, dict) and document.get("format") == EXPORT_FORMAT:
        runs = document.get("runs")
        if not isinstance(runs, list):
            raise ValueError("an export bundle without a list of runs")
        return [(f"runs[{n}]", data) for n, data in enumerate(runs)], True
    if isinstance(document, dict) and "schema_version" in document:
        return [("", document)], False
    raise ValueError("neither an experiment record nor an export bundle "
                     f"(a bundle has \"format\": \"{EXPORT_FORMAT}\")")


def read_records(name: str, data: bytes) -> FileReport | tuple[FileReport, list[ExperimentRecord]]:
    """Parse, validate and recompute one file's content; the report so far and its valid records
    (as :func:`~attention_core.recompute.recomputed_record` gives them).

    Returns a bare :class:`FileReport` (with ``error``) when the file cannot be read at all:
    :data:`EMPTY` for an empty file; :data:`NOT_JSON` for one that is not JSON and not named
    ``.json`` (notes, a picture); ``not valid JSON (…)``, with the parser's reason, for a ``.json``
    file that is not. A file of any name holding a record or a bundle is read.
    """
    report = FileReport(name)
    if not data.strip():
        report.error = EMPTY
        return report
    try:
        document = json.loads(data, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError, NaN
        # A parser's position in a file that was never JSON (notes, a picture) helps nobody.
        report.error = f"not valid JSON ({error})" if name.lower().endswith(".json") else NOT_JSON
        return report
    try:
        found, bundle = _records_in(document)
    except ValueError as error:
        report.error = str(error)
        return report
    records = []
    for where, item in found:
        label = where or "record"
        if isinstance(item, dict) and isinstance(item.get("created_at"), str) \
                and _NAIVE_TIME.fullmatch(item["created_at"]):
            who = item.get("id") if isinstance(item.get("id"), str) and ID_PATTERN.fullmatch(item["id"]) else label
            report.notes.append(f"run {who}: created_at {item['created_at']} has no UTC offset; imported as UTC")
            item = {**item, "created_at": item["created_at"] + "+00:00"}
        try:
            records.append(recomputed_record(ExperimentRecord.from_dict(item)))
        except RecordError as error:
            if not bundle:
                report.error = str(error)
                report.notes.clear()
                return report
            report.invalid.append((label, str(error)))
    return report, records


def import_data(store: RunStore, name: str, data: bytes, *, relaxed: bool = False) -> FileReport:
    """Import one file's content (a record or an export bundle) into ``store``, in one transaction
    (``relaxed``: committed without waiting for the disk; see :meth:`RunStore.sync`).

    Raises
    ------
    StoreError
        The store could not be written; nothing of this file was added.
    """
    read = read_records(name, data)
    if isinstance(read, FileReport):
        return read
    report, records = read
    if records:
        outcome = store.import_records(records, relaxed=relaxed)
        report.imported, report.skipped, report.refused = outcome.imported, outcome.skipped, outcome.refused
    return report


def files_to_import(paths: Iterable[str | os.PathLike], *,
                    on_passed_over: Callable[[PassedOver], None] | None = None,
                    ) -> Iterator[tuple[str, Path | None, str | None]]:
    """``(name, path, problem)`` for each file the paths name: a file as given, a folder's
    ``*.json`` files (subfolders too, hidden ones and symbolic links to folders left out), in
    name order; ``problem`` says why a path gives no file. A folder's other files (not hidden)
    are passed over, and ``on_passed_over`` is told which before the folder's first file."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found, others = [], []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                shown = [f for f in files if not f.startswith(".")]
                found += [Path(root) / f for f in shown if f.endswith(".json")]
                others += [(Path(root) / f).relative_to(path).as_posix() for f in shown if not f.endswith(".json")]
            if others and on_passed_over is not None:
                on_passed_over(PassedOver(str(path), sorted(others, key=str.casefold)))
            if not found:
                yield str(path), None, "a folder without .json files"
            for file in sorted(found):
                yield str(file), file, None
        elif path.exists():
            yield str(path), path, None
        else:
            yield str(path), None, "no such file or folder"


def import_paths(store: RunStore, paths: Iterable[str | os.PathLike], *, on_file=None) -> ImportReport:
    """Import every file that ``paths`` name (see :func:`files_to_import`), a transaction each.

    ``on_file(report)`` is called after each file (the command line prints as it goes), and
    with a :class:`PassedOver` for each folder that holds files other than ``.json`` ones. Each
    file's transaction commits without waiting for the disk, and one closing commit waits for
    them all: a crash loses no file half-imported, and at worst the last few whole files (the
    same command brings them in again; what is there is skipped).

    Raises
    ------
    StoreError
        The store could not be written; files before this one stay imported.
    """
    result = ImportReport()

    def passed_over(note: PassedOver) -> None:
        result.passed_over.append(note)
        if on_file is not None:
            on_file(note)

    for name, path, problem in files_to_import(paths, on_passed_over=passed_over):
        if problem is None:
            try:
                if not path.is_file():
                    problem = "not a regular file"
                elif path.stat().st_size > MAX_IMPORT_BYTES:
                    problem = f"larger than {MAX_IMPORT_BYTES // 1024 ** 3} GiB"
                else:
                    data = path.read_bytes()
            except OSError as error:
                problem = f"could not be read ({error.strerror or error})"
        report = FileReport(name, error=problem) if problem else import_data(store, name, data, relaxed=True)
        result.files.append(report)
        if on_file is not None:
            on_file(report)
    if result.total("imported"):
        store.sync()
    return result


def log_import(report: ImportReport, source: str) -> None:
    """Log one line for an import from ``source`` (``upload`` or ``cli``): its totals, never a
    file's name (a learner may have named it)."""
    event(logger("store"), "import", source=source, files=len(report.files), imported=report.total("imported"),
          skipped=report.total("skipped"), refused=report.total("refused"), invalid=report.total("invalid"),
          unread=report.unread)


def unimported_runs_notice(store: RunStore, folder: Path, store_option: str = "") -> str | None:
    """A sentence telling how to import the run files of an earlier workbench in ``folder``, or
    None when it holds none that the store lacks. ``store_option`` is the ``--store …`` to repeat."""
    try:
        ids = [e.name[:-5] for e in os.scandir(folder)
               if e.name.endswith(".json") and ID_PATTERN.fullmatch(e.name[:-5])]
    except OSError:
        return None
    if not ids:
        return None
    try:
        missing = len(ids) - len(store.existing_ids(ids))
    except StoreError:
        return None
    if not missing:
        return None
    option = f" {store_option}" if store_option else ""
    return (f"{folder} holds {missing:,} run file{'s' if missing > 1 else ''} from an earlier workbench that "
            f"{'are' if missing > 1 else 'is'} not in the store {store.where}: bring them in with "
            f"`attention-workbench import {folder}{option}` (the files are left as they are).")


__all__ = ["EMPTY", "MAX_IMPORT_BYTES", "NOT_JSON", "FileReport", "ImportReport", "PassedOver", "files_to_import",
           "import_data", "log_import", "import_paths", "read_records", "unimported_runs_notice"]
