"""The run store: one strict-JSON file per saved run, safe against crashes and a dirty directory.

A save writes a hidden temp file in the runs directory, fsyncs it, then hard-links it to
``<id>.json`` (``os.link`` fails rather than overwrite, so two savers never clobber a run) and
fsyncs the directory: a ``.json`` file is either complete or absent, even after SIGKILL or power
loss. The one change a saved run accepts is its explanation (the learner explains runs after
making them): :meth:`RunStore.update_explanation` writes the whole record again to a temp file
and renames it over the old one (``os.replace``), so a reader sees the old record or the new one.

Listing never fails on a bad file: corrupt, empty, foreign, newer-schema, oversized (judged by
``stat``, never read), non-regular and oddly named files are reported as problems and skipped.
Parsed files are cached by (name, mtime_ns, size, inode), so re-listing thousands of unchanged
runs reads nothing. :meth:`RunStore.list_summaries` lists runs without their matrices and, cold,
takes them from the summary index (:mod:`attention_core.summaries`) instead of parsing every file.
Exports (JSON bundle, CSV) are pure functions of the records.

Left out: locking between processes (not needed: a save is a new, uniquely named file, and
concurrent explanation updates of one run leave the last writer's whole record).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from attention_core.records import ID_PATTERN, SCHEMA_VERSION, ExperimentRecord, RecordError, check_text
from attention_core.summaries import INDEX_NAME, RunSummary, StatKey, read_index, write_index

RUNS_DIR_ENV = "ATTENTION_WORKBENCH_RUNS_DIR"
MAX_RECORD_BYTES = 2 * 1024 * 1024
# The summary index may lag this many runs behind the directory before a listing rewrites it: a
# cold listing then parses at most this many files, and a class saving runs does not make
# every refresh rewrite an index of thousands of entries.
INDEX_SLACK = 100
# A summary listing is answered from memory while the directory's mtime is unchanged (no file
# added, removed or renamed), for at most RESCAN_SECONDS (so a file edited in place still shows
# within that time), and only when the directory last changed RACY_SECONDS or more before that
# listing began: a change within the file system's timestamp granularity could otherwise keep
# the old mtime (git's "racy clean" problem).
RESCAN_SECONDS = 10.0
RACY_SECONDS = 2.0
EXPORT_FORMAT = "attention-workbench-runs"
# Later columns are appended ("mode", the run's title; then d_k and d_model) so that the older
# columns keep their places in spreadsheets built on them.
CSV_COLUMNS = ("id", "created_at", "learner", "label", "causal", "mask_after_softmax",
               "failure_mode", "T", "total_future_weight", "min_row_sum", "max_row_sum_error",
               "failed_checks", "prediction", "explanation", "notes", "mode", "d_k", "d_model")
_WHY_NOT_SAVED = {
    errno.ENOSPC: "the runs directory {} is full", errno.EDQUOT: "the runs directory {} is full",
    errno.EROFS: "the runs directory {} is read-only",
    errno.EACCES: "no permission to write to the runs directory {}",
    errno.EPERM: "no permission to write to the runs directory {}",
    errno.ENOENT: "the runs directory {} does not exist",
}


class StoreError(OSError):
    """A run could not be saved; ``str(error)`` is a sentence to show the learner.

    Parameters
    ----------
    message : str
        E.g. ``"Run not saved: the runs directory /srv/runs is full."``. ``errno`` is set to
        the underlying error's code when there is one.
    """


@dataclass
class Listing:
    """What :meth:`RunStore.list` found.

    Attributes
    ----------
    records : list of ExperimentRecord or RunSummary
        The readable runs, sorted by ``created_at`` then id (summaries from
        :meth:`RunStore.list_summaries`).
    problems : list of (str, str)
        ``(file name, reason)`` for every file skipped, sorted by file name.
    """

    records: list[ExperimentRecord] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def add(self, name: str, loaded: ExperimentRecord | RunSummary | str) -> None:
        """File ``name``'s record (or summary), or the reason it was skipped (a str)."""
        if isinstance(loaded, str):
            self.problems.append((name, loaded))
        else:
            self.records.append(loaded)

    def sort(self) -> None:
        """Records by ``created_at`` then id; problems by file name."""
        self.records.sort(key=lambda r: (r.created_datetime, r.id))
        self.problems.sort()


def resolve_runs_dir(cli_value: str | os.PathLike | None = None) -> Path:
    """The runs directory: ``--runs-dir``, else ``$ATTENTION_WORKBENCH_RUNS_DIR``, else ``runs``.

    Parameters
    ----------
    cli_value : str or path-like, optional
        The ``--runs-dir`` option; empty or None falls through to the environment.

    Returns
    -------
    pathlib.Path
        Relative to the working directory when relative; ``~`` expanded. Not created.
    """
    return Path(cli_value or os.environ.get(RUNS_DIR_ENV) or "runs").expanduser()


class RunStore:
    """A directory of experiment records, one ``<id>.json`` file per run.

    Parameters
    ----------
    directory : str or path-like
        Created (with parents) unless ``create=False``.
    index_slack : int
        How many runs the summary index may lag behind before :meth:`list_summaries` rewrites
        it (default :data:`INDEX_SLACK`).

    Raises
    ------
    StoreError
        The directory cannot be created.
    """

    def __init__(self, directory: str | os.PathLike, *, create: bool = True,
                 index_slack: int = INDEX_SLACK) -> None:
        self.directory = Path(directory)
        self.index_slack = index_slack
        self._cache: dict[str, tuple[StatKey, ExperimentRecord | str]] = {}
        self._summaries: dict[str, tuple[StatKey, RunSummary | str]] = {}
        self._indexed: dict[str, StatKey] | None = None  # what the index file holds, once read
        # (directory mtime_ns, inode, wall-clock ns when the listing began, the listing)
        self._last_summaries: tuple[int, int, int, Listing] | None = None
        self._lock = threading.Lock()
        self._update_lock = threading.Lock()  # one explanation update at a time in this process
        if create:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise _store_error(error, self.directory, "Runs directory not created") from error

    def save(self, record: ExperimentRecord) -> Path:
        """Write ``record`` as ``<id>.json`` atomically and durably; never overwrite a run.

        Returns
        -------
        pathlib.Path
            The new file.

        Raises
        ------
        StoreError
            The directory is full, read-only, not writable or gone, or a run with this id
            already exists; no partial file is left behind.
        """
        data = record.to_json().encode("utf-8")
        final = self.directory / f"{record.id}.json"
        tmp = None
        try:
            # The writer's pid in the name lets cleanup_temp_files tell a dead writer's leftovers
            # from a live save in another process.
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{os.getpid()}-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o644)  # like a file made by open(): readable by the server
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, final)
        except FileExistsError as error:
            raise StoreError(f"Run not saved: a run with id {record.id} already exists") from error
        except OSError as error:
            raise _store_error(error, self.directory) from error
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass  # cleanup_temp_files removes it on the next start
        _fsync_directory(self.directory)
        return final

    def update_explanation(self, run_id: str, explanation: str | None) -> ExperimentRecord:
        """Replace the explanation of run ``run_id``; everything else in the record stays.

        The new record (same id, created_at, app_version, inputs, settings and results) is
        checked, written to a temp file in the runs directory and fsynced, then renamed over
        ``<id>.json`` (``os.replace``) and the directory fsynced: the file holds the old record
        or the new one, never a mix, and no run is ever added.

        Parameters
        ----------
        run_id : str
            An existing run's id.
        explanation : str or None
            The new explanation (already cleaned by the caller), ``None`` to remove it; at most
            ``TEXT_LIMITS["explanation"]`` characters.

        Returns
        -------
        ExperimentRecord
            The run as now stored.

        Raises
        ------
        ValueError
            ``run_id`` is not ``[A-Za-z0-9_-]{1,64}``, or ``explanation`` is not text a record
            can hold (:class:`RecordError`, naming the field).
        KeyError
            No such run (also when it is removed while being updated).
        RecordError
            The run's file is not a readable record.
        StoreError
            The file could not be written: ``"Explanation not saved: …"``; the old record is
            left as it was.
        """
        check_text("explanation", explanation)
        with self._update_lock:
            old = self.get(run_id)
            name = f"{run_id}.json"
            final = self.directory / name
            data = old.to_dict()
            data["explanation"] = explanation
            record = ExperimentRecord.from_dict(data)
            tmp = None
            try:
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{os.getpid()}-", suffix=".tmp")
                with os.fdopen(fd, "wb") as f:
                    os.fchmod(f.fileno(), 0o644)
                    f.write(record.to_json().encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())
                    st = os.fstat(f.fileno())  # a rename keeps inode, size and mtime: the new file's key
                if not final.exists():  # removed since it was read: replacing would add a run
                    raise KeyError(run_id)
                os.replace(tmp, final)
                tmp = None
            except OSError as error:
                raise _store_error(error, self.directory, "Explanation not saved") from error
            finally:
                if tmp is not None:
                    try:
                        os.unlink(tmp)
                    except OSError:
                        pass  # cleanup_temp_files removes it on the next start
            _fsync_directory(self.directory)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            with self._lock:
                # The new file has a new stat, so every other cache (another process's, the summary
                # index on disk) already treats its old entry as stale; this one holds the new record.
                self._last_summaries = None
                self._cache[name] = (key, record)
                self._summaries[name] = (key, RunSummary.of(record))
            return record

    def get(self, run_id: str) -> ExperimentRecord:
        """The run called ``run_id``.

        Raises
        ------
        ValueError
            ``run_id`` is not ``[A-Za-z0-9_-]{1,64}`` (so no path can escape the directory).
        KeyError
            No such run.
        RecordError
            The file is not a readable record (the reason says why).
        """
        if not isinstance(run_id, str) or not ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        name = f"{run_id}.json"
        try:
            st = os.lstat(self.directory / name)
        except FileNotFoundError:
            raise KeyError(run_id) from None
        loaded = self._load(name, st)
        if isinstance(loaded, str):
            raise RecordError(f"{name}: {loaded}")
        return loaded

    def list(self) -> Listing:
        """Every readable run, sorted by ``created_at`` then id, and the files skipped.

        Never raises for a bad file; an unreadable directory raises ``OSError``. Temp files
        (``.*.tmp``) and the summary index are ignored. Unchanged files are not read again
        (cached by stat).
        """
        listing, seen = Listing(), set()
        for name, st in _scan(self.directory):
            seen.add(name)
            loaded = st if isinstance(st, str) else self._load(name, st)
            listing.add(name, loaded)
        self._forget(seen)
        listing.sort()
        return listing

    def list_summaries(self) -> Listing:
        """Every readable run as a :class:`RunSummary`, sorted like :meth:`list`, and the files skipped.

        The same runs and problems as :meth:`list`, without reading the matrices: a file is
        parsed and fully checked only when neither this store's memory nor the summary index
        holds an entry with its current stat. The first call reads the index; a call that finds
        the index more than ``index_slack`` runs behind rewrites it (best effort). While no file
        was added, removed or renamed, the last listing is given again (see
        :data:`RESCAN_SECONDS`): one ``stat`` instead of one per run, for every session's poll.
        """
        began = time.time_ns()
        here = os.stat(self.directory)
        last = self._last_summaries
        if (last is not None and last[:2] == (here.st_mtime_ns, here.st_ino)
                and last[2] - here.st_mtime_ns >= RACY_SECONDS * 1e9
                and began - last[2] < RESCAN_SECONDS * 1e9):
            return Listing(list(last[3].records), list(last[3].problems))
        listing, seen = Listing(), set()
        if self._indexed is None:
            from_disk = read_index(self.directory)
            self._indexed = {name: key for name, (key, _) in from_disk.items()}
        else:
            from_disk = {}
        for name, st in _scan(self.directory):
            seen.add(name)
            if isinstance(st, str):
                loaded = st
            else:
                key = (st.st_mtime_ns, st.st_size, st.st_ino)
                cached = self._summaries.get(name)
                if cached is None or cached[0] != key:
                    cached = from_disk.get(name)
                if cached is not None and cached[0] == key and stat.S_ISREG(st.st_mode):
                    loaded = cached[1]
                else:
                    read = _read_record(self.directory, name, st)
                    loaded = read if isinstance(read, str) else RunSummary.of(read)
                with self._lock:
                    self._summaries[name] = (key, loaded)
            listing.add(name, loaded)
        self._forget(seen)
        listing.sort()
        self._update_index(listing.records)
        self._last_summaries = (here.st_mtime_ns, here.st_ino, began,
                                Listing(list(listing.records), list(listing.problems)))
        return listing

    def _update_index(self, summaries: list[RunSummary]) -> None:
        """Rewrite the summary index if it lags more than ``index_slack`` runs behind."""
        current = {f"{s.id}.json": self._summaries[f"{s.id}.json"][0] for s in summaries}
        indexed = self._indexed or {}
        behind = sum(1 for name, key in current.items() if indexed.get(name) != key)
        behind += sum(1 for name in indexed if name not in current)
        if behind == 0 or behind < self.index_slack:
            return
        entries = {name: (key, self._summaries[name][1]) for name, key in current.items()}
        if write_index(self.directory, entries):
            self._indexed = current

    def _forget(self, seen: set[str]) -> None:
        """Drop cached files that are gone from the directory."""
        with self._lock:
            for cache in (self._cache, self._summaries):
                for name in set(cache) - seen:
                    del cache[name]

    def read_records(self, run_ids: Iterable[str]) -> Listing:
        """The full records of ``run_ids``, read and checked afresh, in the order given.

        For exports of a summary listing: nothing is cached, so exporting a whole class does not
        keep every record in memory. A run that is gone or unreadable is a problem, not an error.
        """
        listing = Listing()
        for run_id in run_ids:
            name = f"{run_id}.json"
            try:
                st = os.lstat(self.directory / name)
            except OSError as error:
                listing.problems.append((name, f"could not be read ({error.strerror or error})"))
                continue
            listing.add(name, _read_record(self.directory, name, st))
        return listing

    def _load(self, name: str, st: os.stat_result) -> ExperimentRecord | str:
        """The record in file ``name`` or the reason it is skipped (cached by its stat)."""
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cache.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        loaded = _read_record(self.directory, name, st)
        with self._lock:
            self._cache[name] = (key, loaded)
        return loaded

    def cleanup_temp_files(self, older_than_seconds: float = 300.0) -> int:
        """Remove temp files (``.*.tmp``) left by interrupted saves; return how many.

        A temp file goes when the process that wrote it (its pid is in the name) is no longer
        running, or when it is older than ``older_than_seconds`` (a writer on another machine
        sharing the directory). A save in progress in a live process is left alone. Call it when
        the app starts.
        """
        removed, cutoff = 0, time.time() - older_than_seconds
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    stale = entry.stat(follow_symlinks=False).st_mtime < cutoff
                    if stale or not _writer_alive(entry.name):
                        os.unlink(entry.path)
                        removed += 1
                except OSError:
                    pass  # already gone, or not ours to remove
        return removed


def _scan(directory: Path) -> Iterator[tuple[str, os.stat_result | str]]:
    """(name, lstat or the reason it could not be taken) of every file a listing looks at."""
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name == INDEX_NAME or (name.startswith(".") and name.endswith(".tmp")):
                continue
            try:
                yield name, entry.stat(follow_symlinks=False)
            except OSError as error:  # vanished or unreadable between scandir and stat
                yield name, f"could not be read ({error.strerror or error})"


def _writer_alive(temp_name: str) -> bool:
    """Whether the process named in a temp file's ``.<pid>-`` prefix still runs (unknown: yes)."""
    pid_text = temp_name[1:].split("-", 1)[0]
    if not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists but not ours to signal
    return True


def _read_record(directory: Path, name: str, st: os.stat_result) -> ExperimentRecord | str:
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not (name.endswith(".json") and ID_PATTERN.fullmatch(name[:-5])):
        return "not a run file (run files are named <id>.json)"
    if st.st_size == 0:
        return "empty file"
    if st.st_size > MAX_RECORD_BYTES:
        return f"larger than {MAX_RECORD_BYTES // 1024 // 1024} MiB ({st.st_size} bytes), not read"
    try:
        fd = os.open(directory / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
                return "not a regular file"
            data = f.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            return f"larger than {MAX_RECORD_BYTES // 1024 // 1024} MiB, not read"
        record = ExperimentRecord.from_json(data)
    except OSError as error:
        return f"could not be read ({error.strerror or error})"
    except RecordError as error:
        return str(error)
    if record.id != name[:-5]:
        return f"holds run {record.id}, which does not match its file name"
    return record


def _store_error(error: OSError, directory: Path, what: str = "Run not saved") -> StoreError:
    why = _WHY_NOT_SAVED.get(error.errno)
    where = directory.absolute()
    why = why.format(where) if why else f"{where} could not be written ({error.strerror})"
    result = StoreError(f"{what}: {why}.")
    result.errno = error.errno
    return result


def _fsync_directory(directory: Path) -> None:
    """Make the new name durable; best effort (some file systems cannot fsync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def export_json(records: Iterable[ExperimentRecord],
                problems: Sequence[tuple[str, str]] = ()) -> str:
    """A strict-JSON bundle of ``records``, lossless (free text exactly as saved).

    Parameters
    ----------
    records : iterable of ExperimentRecord
        In the order to write them.
    problems : sequence of (str, str), optional
        ``(file name, reason)`` pairs from :attr:`Listing.problems`, kept as ``skipped``.

    Returns
    -------
    str
        ``{"format": "attention-workbench-runs", "schema_version": 2, "exported_at": <UTC ISO
        8601>, "runs": [record, ...], "skipped": [{"file": ..., "reason": ...}, ...]}`` with a
        final newline; no ``NaN``/``Infinity`` tokens. One run per line. Each record is written
        as it is stored, in its own schema version (a version-1 run stays version 1);
        ``schema_version`` is the newest record version the bundle may hold.
    """
    return "".join(iter_export_json(records, problems))


def iter_export_json(records: Iterable[ExperimentRecord],
                     problems: Sequence[tuple[str, str]] = ()) -> Iterator[str]:
    """:func:`export_json` in pieces, a run at a time, for writing a large class as it is read.

    Notes
    -----
    Each record is encoded by its own :meth:`ExperimentRecord.to_json` (no copy of its data,
    and the C encoder; an indented bundle would use the pure-Python one, ~10× slower).
    """
    head = json.dumps({"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION,
                       "exported_at": datetime.now(UTC).isoformat(timespec="microseconds")})
    yield head[:-1] + ', "runs": ['
    separator = "\n"
    for record in records:
        yield separator + record.to_json()
        separator = ",\n"
    skipped = [{"file": name, "reason": reason} for name, reason in problems]
    yield ("\n" if separator != "\n" else "") + '], "skipped": ' + json.dumps(
        skipped, allow_nan=False, ensure_ascii=False) + "}\n"


def _csv_text(value: str | None) -> str:
    if value is None:
        return ""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _csv_number(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def export_csv(records: Iterable[ExperimentRecord]) -> str:
    """One CSV row per run (columns :data:`CSV_COLUMNS`, RFC 4180 quoting, ``\\r\\n`` lines).

    Parameters
    ----------
    records : iterable of ExperimentRecord or RunSummary

    Returns
    -------
    str
        A header row, then one row per run. Booleans are ``true``/``false``; a number that was
        not finite is an empty cell; failed checks are joined by ``;``; ``mode`` is the run's
        title (:func:`~attention_core.modes.run_title`), as the pages name it; ``d_k`` is the
        head width and ``d_model`` the width of X, empty unless the run was in matrix mode.

    Notes
    -----
    Free-text cells (learner, label, prediction, explanation, notes) starting with ``=``,
    ``+``, ``-``, ``@``, tab or CR get a leading ``'`` so spreadsheets do not run them as
    formulas (OWASP "CSV injection"); number cells are never changed. The JSON export keeps
    text exactly as saved.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for r in records:
        writer.writerow([
            r.id, r.created_at, _csv_text(r.learner), _csv_text(r.label),
            str(r.causal).lower(), str(r.mask_after_softmax).lower(), r.failure_mode, r.T,
            _csv_number(r.total_future_weight), _csv_number(r.min_row_sum),
            _csv_number(r.max_row_sum_error), ";".join(r.failed_checks),
            _csv_text(r.prediction), _csv_text(r.explanation), _csv_text(r.notes), r.title,
            r.d_k, "" if r.d_model is None else r.d_model,
        ])
    return out.getvalue()


__all__ = ["CSV_COLUMNS", "INDEX_SLACK", "MAX_RECORD_BYTES", "RUNS_DIR_ENV", "Listing", "RunStore",
           "RunSummary", "StoreError", "export_csv", "export_json", "iter_export_json",
           "resolve_runs_dir"]
