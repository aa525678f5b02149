"""Bring runs into a store: record files, folders of them, and export bundles.

Each file is read and every record in it validated against the JSON Schema (and the shape rules)
and its results computed again from its inputs and settings
(:func:`~attention_core.recompute.recomputed_record`: a record whose results disagree is refused,
naming the first field that differs; one that agrees is stored with the core's numbers) before
anything is written; a record whose free text holds a control character or a bidi override
(:func:`~app.shared.parsing.hidden_character`) is not valid either. A file is taken whole or not at
all: one record not valid, or one whose id is in the store with different content (refused, never
overwritten), keeps the whole file out, and each such record is named; otherwise its records go
into the store in one transaction (:meth:`~app.store.runs.RunStore.import_records`). A run
already in the store with the same content is skipped. A bad file (unreadable, not JSON, neither a record nor
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
from app.shared.parsing import TEXT_LIMITS, hidden_character
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
        ``("runs[3]", "not an experiment record: inputs.queries: …")`` (``where`` is ``""`` for a
        file of one record).
    held_back : list of str
        Run ids of valid records not imported because others in the file were not valid or refused.
    notes : list of str
        E.g. a ``created_at`` read as UTC.
    """

    name: str
    error: str | None = None
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def read(self) -> bool:
        """Whether the file could be read (even if none of its records went in)."""
        return self.error is None

    @property
    def taken(self) -> bool:
        """Whether every record of the file was imported or skipped (nothing refused)."""
        return self.read and not (self.invalid or self.refused)

    def lines(self) -> list[str]:
        """What to tell a person about this file, one sentence a line."""
        if self.error is not None:
            return [f"{self.name}: {self.error}"]
        parts = [f"imported {len(self.imported):,}" if self.taken else "nothing imported (a file is taken whole)"]
        if self.held_back:
            parts.append(f"held back {len(self.held_back):,} valid")
        if self.skipped:
            parts.append(f"skipped {len(self.skipped):,} already in the store")
        if self.refused:
            shown = ", ".join(self.refused[:5]) + (", …" if len(self.refused) > 5 else "")
            parts.append(f"refused {len(self.refused):,} whose id is in the store with different content ({shown})")
        if self.invalid:
            parts.append(f"{len(self.invalid):,} not valid")
        out = [f"{self.name}: " + ", ".join(parts)]
        out += [f"{self.name}{' ' if where else ''}{where}: {reason}" for where, reason in self.invalid[:20]]
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
    def all_taken(self) -> bool:
        """Every file was read and taken whole (the command exits non-zero otherwise)."""
        return all(f.taken for f in self.files)

    def summary(self) -> str:
        """One closing sentence with the totals."""
        imported, passed = self.total("imported"), sum(len(p.names) for p in self.passed_over)
        held, kept_out = self.total("held_back"), sum(f.read and not f.taken for f in self.files)
        return (f"imported {imported:,} run{'' if imported == 1 else 's'}, skipped {self.total('skipped'):,} "
                f"already in the store, refused {self.total('refused'):,} (same id, different content), "
                f"{self.total('invalid'):,} not valid, {self.unread:,} of {len(self.files):,} files not read"
                + (f", {kept_out:,} file{'' if kept_out == 1 else 's'} refused whole ({held:,} valid "
                   f"run{'' if held == 1 else 's'} held back)" if kept_out else "")
                + (f", {passed:,} passed over (not .json)" if passed else ""))


def _records_in(document: object) -> list[tuple[str, object]]:
    """``(where, data)`` of each record in a parsed file (``where`` ``""`` for a lone record)."""
    if isinstance(document, dict) and document.get("format") == EXPORT_FORMAT:
        runs = document.get("runs")
        if not isinstance(runs, list):
            raise ValueError("an export bundle without a list of runs")
        return [(f"runs[{n}]", data) for n, data in enumerate(runs)]
    if isinstance(document, dict) and "schema_version" in document:
        return [("", document)]
    raise ValueError("neither an experiment record nor an export bundle "
                     f"(a bundle has \"format\": \"{EXPORT_FORMAT}\")")


def read_records(name: str, data: bytes) -> FileReport | tuple[FileReport, list[ExperimentRecord]]:
    """Parse, validate and recompute one file's content; the report so far and its records (as
    :func:`~attention_core.recompute.recomputed_record` gives them), none when one is not valid
    (each such named in ``invalid``, the others' ids in ``held_back``).

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
        found = _records_in(document)
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
            record = ExperimentRecord.from_dict(item)
            hidden = next(filter(None, (hidden_character(f, getattr(record, f)) for f in TEXT_LIMITS)), None)
            if hidden:
                raise RecordError(hidden)
            records.append(recomputed_record(record))
        except RecordError as error:
            report.invalid.append((where, str(error)))
    if report.invalid:  # the file is not taken: none of its records, and no "imported as UTC"
        report.held_back = [r.id for r in records]
        report.notes.clear()
        return report, []
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
        report.held_back = outcome.held_back
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
          unread=report.unread, held_back=report.total("held_back"))


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
