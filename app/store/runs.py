"""The run store: one row per saved run in SQLite or PostgreSQL, through SQLAlchemy Core.

See :mod:`app.store` for the interface in short. Every value from a request, a URL, a filter or
an imported file reaches SQL as a bound parameter; the only names put into SQL text are columns
picked from :data:`SORTABLE` by name.

Records enter the store checked (built by the core, or validated on import) and leave it as the
exact text they were stored as; reading one back parses that text without validating it again
(the store is where records are trusted, as a file written by this workbench was before).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import and_, case, func, not_, or_, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from app.oplog import event, logger
from app.store import schema
from app.store.dialects import (
    StoreError,
    StoreOpenError,
    column_text,
    contains_any_case,
    make_engine,
    parse_url,
    record_time_text,
    relaxed_commit,
    shown,
    store_error,
)
from app.store.exports import UnreadableRunError, csv_row, csv_rows, leave_out
from app.store.schema import meta, runs
from app.store.summary import RunSummary
from attention_core.records import (
    ID_PATTERN,
    READABLE_VERSIONS,
    ExperimentRecord,
    RecordError,
    _refuse_constant,
    check_text,
)

# Columns a query may sort by (the instructor page's sortable columns); anything else is refused.
SORTABLE = ("created_at", "id", "learner", "label", "mode", "failure_mode", "causal", "mask_after_softmax",
            "T", "d_k", "d_model", "total_future_weight", "min_row_sum", "max_row_sum_error",
            "failed_checks", "has_prediction", "has_explanation")
DEFAULT_SORT = (("created_at", "asc"),)
# Bound parameters per IN (…): well under SQLite's and PostgreSQL's limits.
_CHUNK = 500
_log = logger("store")
# A store that is down fails every read the same way (an instructor page reads it every second,
# each page opened reads it): each distinct failure is logged once per this many seconds, with how
# many times it came meanwhile (``repeated``).
ERROR_LOG_EVERY_S = 60.0
# The key hash stays in the store: no page or export needs it.
_SUMMARY_COLUMNS = [c for c in runs.c if c.name not in ("record", "page_key_hash")]
PAGE_RUNS = 200  # the most runs RunStore.page_runs gives back: a page's latest
# A CSV row's columns after the id and the time, in csv_row's order ("mode" is the run's title).
_CSV_SOURCE = [runs.c[name] for name in (
    "learner", "label", "causal", "mask_after_softmax", "failure_mode", "T", "total_future_weight",
    "min_row_sum", "max_row_sum_error", "failed_checks", "prediction", "explanation", "notes", "mode", "d_k",
    "d_model", "B", "T_k", "d_v", "has_w_o", "cross_attention", "causal_alignment", "ablation_target")]


@dataclass(frozen=True)
class RunFilter:
    """Which runs a query keeps; every field left at its default keeps all.

    Attributes
    ----------
    learner, label : str
        Keep runs whose learner (label) contains this text, in any case.
    mode : str or None
        Keep runs with this title (:func:`~attention_core.modes.run_title`).
    failure_mode : str or None
        Keep runs of this failure mode (a :data:`~attention_core.modes.FAILURE_MODES` name).
    causal, has_prediction, has_explanation, has_failed_checks : bool or None
        A prediction or explanation of only whitespace counts as none.
    created_from, created_before : datetime or None
        Timezone-aware; keep runs created at or after ``created_from`` and before
        ``created_before`` (a local day is ``[its midnight, the next midnight)``).
    ids : sequence of str or None
        Keep only these run ids (at most 500; export by ids uses ``iter_*(ids=…)`` instead).
    """

    learner: str = ""
    label: str = ""
    mode: str | None = None
    failure_mode: str | None = None
    causal: bool | None = None
    has_prediction: bool | None = None
    has_explanation: bool | None = None
    has_failed_checks: bool | None = None
    created_from: datetime | None = None
    created_before: datetime | None = None
    ids: Sequence[str] | None = None


@dataclass(frozen=True)
class RunPage:
    """One page of a query: its runs (summaries, in the asked order) and how many runs match in all
    (``None`` when the query was asked not to count them)."""

    runs: list[RunSummary]
    total: int | None


@dataclass(frozen=True)
class LearnerRuns:
    """What the runs saved under one learner string show (the learners view's counts).

    Times are aware UTC datetimes, each the ``created_at`` of the earliest run of that kind
    (``None``: no such run). The kinds are the Self-attention lesson's checkpoints, as
    :func:`app.instructor.learners.learner_checkpoints` counts them.

    Attributes
    ----------
    learner : str
        The learner text exactly as stored (one learner typed in two ways is two entries).
    runs : int
    first_at : datetime
        Its earliest run.
    predicted_at, explained_at : datetime or None
        A run with a prediction (an explanation) that is not only whitespace; an explanation
        only when written with the key of the page that saved the run (``explained_by_owner``:
        never an imported run's, whose record cannot say who wrote it).
    correct_causal_at : datetime or None
        A correct run with the causal mask.
    mask_after_softmax_at : datetime or None
        A "mask after softmax" run with a future cell to mask (causal, T > 1).
    other_modes : frozenset of str
        The titles (:func:`~attention_core.modes.run_title`) of its runs that are neither of the two.
    """

    learner: str
    runs: int
    first_at: datetime
    predicted_at: datetime | None
    explained_at: datetime | None
    correct_causal_at: datetime | None
    mask_after_softmax_at: datetime | None
    other_modes: frozenset[str]


@dataclass(frozen=True)
class LearnerTally:
    """:meth:`RunStore.learner_runs`: one entry per learner string, and the runs without a name."""

    learners: list[LearnerRuns]
    unnamed: int


class NotOwnerError(PermissionError):
    """A run may be changed only with the key of the page that saved it; this one was not given.

    ``run_id`` is the run's id. Raised by :meth:`RunStore.update_explanation` for a run saved by
    another page, imported, or stored before store version 6 (no page holds its key).
    """

    def __init__(self, run_id: str) -> None:
        super().__init__(f"Explanation not saved: run {run_id} was saved by another page (or imported); only "
                         "the page that saved a run can explain it.")
        self.run_id = run_id


@dataclass(frozen=True)
class ImportOutcome:
    """What importing one file's records did: ids by outcome, in the file's order.

    ``refused`` are ids already in the store with different content (never overwritten); when
    there is one, nothing is added, and the runs that would have been are ``held_back``.
    """

    imported: list[str]
    skipped: list[str]
    refused: list[str]
    held_back: list[str] = field(default_factory=list)


def _record_row(record: ExperimentRecord, text: str, dialect: str, key_hash: str | None = None) -> dict:
    """A run's row; ``key_hash`` that of the page saving it (None: imported)."""
    return {
        "id": record.id, "created_at": record.created_datetime,
        "learner": column_text(record.learner, dialect), "label": column_text(record.label, dialect),
        "mode": record.title, "failure_mode": record.failure_mode,
        "causal": record.causal, "mask_after_softmax": record.mask_after_softmax, "T": record.T,
        "d_k": record.d_k, "d_model": record.d_model, "B": record.B, "T_k": record.T_k, "d_v": record.d_v,
        "has_w_o": record.has_w_o, "cross_attention": record.cross_attention,
        "causal_alignment": record.causal_alignment, "ablation_target": record.ablation_target,
        "total_future_weight": record.total_future_weight, "min_row_sum": record.min_row_sum,
        "max_row_sum_error": record.max_row_sum_error, "failed_checks": ";".join(record.failed_checks),
        "has_prediction": _has_text(record.prediction), "has_explanation": _has_text(record.explanation),
        "prediction": column_text(record.prediction, dialect),
        "explanation": column_text(record.explanation, dialect), "notes": column_text(record.notes, dialect),
        "schema_version": record.schema_version, "record": text,
        "page_key_hash": key_hash, "explained_by_owner": key_hash is not None and _has_text(record.explanation),
    }


def _has_text(text: str | None) -> bool:
    """Whether a prediction or explanation is there: text beyond whitespace, as the learners view
    (the Self-attention lesson's checkpoints) counts it."""
    return bool((text or "").strip())


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):  # 1e400: valid JSON, but no float64 (Python reads it as inf)
        raise ValueError(f"{token} is beyond float64")
    return value


def stored_record(text: str, run_id: str | None = None) -> ExperimentRecord:
    """The record stored as ``text`` (parsed, not validated again: it was checked on its way in).

    Checked only as far as it costs little beside the parse (an export of 100,000 runs reads
    them all): strict JSON with every number within float64, an object with exactly a record's
    keys, a schema version this workbench reads and, given ``run_id``, that id.

    Raises
    ------
    RecordError
        The text is not a record's JSON (a store edited by hand).
    """
    try:
        return _parsed(text, run_id)
    except ValueError as error:
        raise RecordError(f"a stored run is not a readable record ({error})") from None


def _parsed(text: str, run_id: str | None) -> ExperimentRecord:
    """:func:`stored_record`, raising ``ValueError`` with the reason alone."""
    try:
        record = ExperimentRecord(**json.loads(text, parse_constant=_refuse_constant, parse_float=_finite))
    except TypeError as error:  # not an object, or not a record's keys
        raise ValueError(f"not a record's keys: {error}") from None
    except RecursionError:
        raise ValueError("nested too deep") from None
    if type(record.schema_version) is not int or record.schema_version not in READABLE_VERSIONS:
        raise ValueError(f"schema version {record.schema_version!r}")
    if run_id is not None and record.id != run_id:
        raise ValueError(f"its text is run {record.id!r}'s")
    return record


def _read_or_leave_out(text: str, run_id: str, left_out: list | None) -> ExperimentRecord | None:
    """:func:`stored_record`, or ``None`` with the run put in ``left_out`` (raised without a list)."""
    try:
        return _parsed(text, run_id)
    except ValueError as error:
        leave_out(UnreadableRunError(run_id, f"not a record's strict JSON ({error})"), left_out)
        return None


_FIRST_TIMES = ("first_at", "predicted_at", "explained_at", "correct_causal_at", "mask_after_softmax_at")


def _earliest(times: Iterable[datetime | None]) -> datetime | None:
    return min((t for t in times if t is not None), default=None)


def _check_id(run_id: object) -> str:
    if not isinstance(run_id, str) or not ID_PATTERN.fullmatch(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    return run_id


_KEY_HASH = re.compile(r"[0-9a-f]{64}")


def _check_key_hash(key_hash: object) -> str | None:
    if key_hash is not None and not (isinstance(key_hash, str) and _KEY_HASH.fullmatch(key_hash)):
        raise ValueError(f"not a page key's SHA-256 (64 hex digits): {str(key_hash)[:80]!r}")
    return key_hash


def _plain_ids(run_ids: Iterable) -> list[str]:
    """The run ids among ``run_ids``, once each, in order (anything else names no run)."""
    return [i for i in dict.fromkeys(run_ids) if isinstance(i, str) and ID_PATTERN.fullmatch(i)]


def _chunks(items: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class RunStore:
    """The runs of a workbench (or a class), in the database at ``url``.

    Parameters
    ----------
    url : str
        A SQLAlchemy URL: ``sqlite:///runs.db`` (a file; relative to the working directory) or
        ``postgresql+psycopg://user:password@host/dbname``.
    create : bool
        Make the tables in an empty database (default). With ``False`` a missing SQLite file or
        an empty database is refused (``export`` reads; it never creates a store).

    Raises
    ------
    StoreOpenError
        The URL is not SQLite/PostgreSQL, the file is missing (``create=False``), corrupt or
        another program's database, the store was made by a newer workbench, or the server
        cannot be reached. The message names the store (its password hidden) and says why.

    Notes
    -----
    One engine (connection pool) per store; forked worker processes (``serve --num-procs``) drop
    the connections they inherited and open their own.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = parse_url(url)
        self.where = shown(self.url)
        if self.url.get_backend_name() == "sqlite" and not create and not Path(self.url.database).is_file():
            raise StoreOpenError(f"Store not opened: there is no store at {self.where} (no such file).")
        self.engine = make_engine(self.url)
        self.dialect = self.engine.dialect.name
        try:
            self.version = schema.open_store(self.engine, create=create)
        except schema.SchemaProblem as problem:
            self.engine.dispose()
            raise StoreOpenError(f"Store not opened: {self.where}: {problem}.") from None
        except SQLAlchemyError as error:
            self.engine.dispose()
            raise store_error(error, self.url, "Store not opened", StoreOpenError) from None
        # SQLite takes one writer at a time; this process's writers queue here, in order, instead
        # of in SQLite's busy handler, which sleeps ever longer between tries and serves no order.
        self._write_lock = threading.Lock() if self.dialect == "sqlite" else None
        self._modes: tuple[int, list[str]] | None = None  # the distinct titles, and the change token read before them
        self._errors_logged: dict[str, tuple[float, int]] = {}  # failure → (last logged, since then)
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (s := ref()) is not None and s._after_fork())

    def _after_fork(self) -> None:
        """In a forked worker: connections of its own, and a write queue of its own."""
        self.engine.dispose(close=False)
        if self._write_lock is not None:
            self._write_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RunStore({self.where!r})"

    def close(self) -> None:
        """Close the store's connections (it opens new ones if used again)."""
        self.engine.dispose()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def ping(self) -> None:
        """Read one row of the store's own table now, as a balancer's health check asks.

        A SQLite store whose file is gone fails here even while a pooled connection still reads
        the deleted file: a new connection would make an empty database, not reopen the store.

        Raises
        ------
        StoreError
            The store does not answer (the message says why, its password hidden).
        """
        database = self.url.database
        if self.dialect == "sqlite" and database not in (None, "", ":memory:") and not Path(database).is_file():
            raise StoreError(f"Store not answering: the store {self.where} is gone (no such file).")
        try:
            with self.engine.connect() as conn:
                conn.execute(select(meta.c.name).limit(1)).first()
        except SQLAlchemyError as error:
            raise store_error(error, self.url, "Store not answering") from None

    # --- transactions ----------------------------------------------------------------------

    @contextmanager
    def _write(self, what: str, *, relaxed: bool = False) -> Iterator[Connection]:
        """A write transaction; a driver error becomes ``StoreError("<what>: …")``. ``relaxed``:
        commit without waiting for the disk (:func:`~app.store.dialects.relaxed_commit`)."""
        try:
            options = {"store_write": True, "store_relaxed": relaxed}
            with self._write_lock or nullcontext(), self.engine.connect().execution_options(**options) as conn, \
                    conn.begin():
                if relaxed:
                    relaxed_commit(conn)
                yield conn
        except IntegrityError:
            raise
        except SQLAlchemyError as error:
            raise self._failed(error, what) from None

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as error:
            raise self._failed(error, "Runs not read") from None

    def _failed(self, error: SQLAlchemyError, what: str) -> StoreError:
        """The :class:`StoreError` for a driver ``error``, logged for the operator (the same
        failure at most once per :data:`ERROR_LOG_EVERY_S`)."""
        failure = store_error(error, self.url, what)
        text, now = str(failure), time.monotonic()
        last, unlogged = self._errors_logged.get(text, (None, 0))
        if last is not None and now - last < ERROR_LOG_EVERY_S:
            self._errors_logged[text] = (last, unlogged + 1)
            return failure
        if len(self._errors_logged) >= 100:  # a bound, not a policy
            self._errors_logged.clear()
        self._errors_logged[text] = (now, 0)
        event(_log, "store error", logging.ERROR, store=self.dialect, error=text,
              **({"repeated": unlogged} if unlogged else {}))
        return failure

    @staticmethod
    def _changed(conn: Connection) -> None:
        shard = f"changes:{random.randrange(schema.CHANGE_SHARDS)}"
        conn.execute(update(meta).where(meta.c.name == shard).values(value=meta.c.value + 1))

    # --- one run ---------------------------------------------------------------------------

    def save(self, record: ExperimentRecord, *, key_hash: str | None = None) -> None:
        """Store ``record`` as a new run, durably (committed when this returns); never overwrite.

        ``key_hash`` is the SHA-256 (64 lowercase hex digits) of the key of the page saving it
        (:func:`app.learner.page_key.key_hash`): only that key can change the run later
        (:meth:`update_explanation`) and :meth:`page_runs` lists it. ``None``: no page can.

        Raises
        ------
        ValueError
            ``key_hash`` is not 64 lowercase hex digits.
        StoreError
            ``"Run not saved: …"``: a run with this id exists, or the store is read-only, full,
            unreachable or damaged. Nothing is half-written.
        """
        row = _record_row(record, record.to_json(), self.dialect, _check_key_hash(key_hash))
        try:
            with self._write("Run not saved") as conn:
                conn.execute(runs.insert().values(**row))
                self._changed(conn)
        except IntegrityError:
            raise StoreError(f"Run not saved: a run with id {record.id} already exists.") from None
        event(_log, "run saved", run=record.id, mode=record.failure_mode, T=record.T, store=self.dialect)

    def get(self, run_id: str) -> ExperimentRecord:
        """The run called ``run_id``.

        Raises
        ------
        ValueError
            ``run_id`` is not ``[A-Za-z0-9_-]{1,64}``.
        KeyError
            No such run.
        RecordError
            The stored text is not a record (only a store edited by hand).
        StoreError
            The store cannot be read.
        """
        _check_id(run_id)
        with self._read() as conn:
            text = conn.execute(select(runs.c.record).where(runs.c.id == run_id)).scalar()
        if text is None:
            raise KeyError(run_id)
        return stored_record(text)

    def update_explanation(self, run_id: str, explanation: str | None, *, key_hash: str | None) -> ExperimentRecord:
        """Replace the explanation of run ``run_id``; everything else in the record stays.

        Only the page that saved the run may: ``key_hash`` must be the one it was saved with
        (:meth:`save`). Reading a run takes its id alone (its link); changing it takes the key.

        Parameters
        ----------
        run_id : str
        explanation : str or None
            Already cleaned by the caller; ``None`` removes it. At most 2000 characters.
        key_hash : str or None
            The SHA-256 (hex) of the changing page's key; ``None`` (no key) is refused.

        Returns
        -------
        ExperimentRecord
            The run as now stored (its own schema version kept).

        Raises
        ------
        ValueError
            A bad id or key hash, or text a record cannot hold (:class:`RecordError`, naming the
            field).
        KeyError
            No such run.
        NotOwnerError
            ``key_hash`` is not the key hash the run was saved with (another page's run, an
            imported one, or one stored before keys); the run is left as it was.
        StoreError
            ``"Explanation not saved: …"``; the run is left as it was.
        """
        check_text("explanation", explanation)
        _check_id(run_id)
        _check_key_hash(key_hash)
        with self._write("Explanation not saved") as conn:
            row = conn.execute(select(runs.c.record, runs.c.page_key_hash)
                               .where(runs.c.id == run_id).with_for_update()).first()
            if row is None:
                raise KeyError(run_id)
            if key_hash is None or row.page_key_hash is None or not hmac.compare_digest(row.page_key_hash, key_hash):
                event(_log, "explanation refused", logging.WARNING, run=run_id, why="not the saving page's key")
                raise NotOwnerError(run_id)
            record = stored_record(row.record)
            data = record.to_dict()
            data["explanation"] = explanation
            record = ExperimentRecord(**data)
            conn.execute(update(runs).where(runs.c.id == run_id).values(
                explanation=column_text(explanation, self.dialect), has_explanation=_has_text(explanation),
                explained_by_owner=_has_text(explanation), record=record.to_json()))
            self._changed(conn)
        event(_log, "explanation attached" if explanation else "explanation removed", run=run_id, store=self.dialect)
        return record

    def page_runs(self, key_hash: str, *, limit: int = PAGE_RUNS) -> list[ExperimentRecord]:
        """The runs saved with ``key_hash`` (one page's, :meth:`save`), the latest ``limit`` of
        them, oldest first (by ``created_at``, then id): what a page lists as its Saved runs when
        it opens, including a run committed just before its server died, before the page heard.

        Raises
        ------
        ValueError
            ``key_hash`` is not 64 lowercase hex digits, or ``limit`` is below 1.
        RecordError
            A stored text is not a record (only a store edited by hand).
        StoreError
            The store cannot be read.
        """
        if _check_key_hash(key_hash) is None or limit < 1:
            raise ValueError("page_runs needs a page key's hash and a limit of 1 or more")
        latest = (select(runs.c.id, runs.c.record).where(runs.c.page_key_hash == key_hash)
                  .order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(limit))
        with self._read() as conn:
            rows = conn.execute(latest).all()
        return [stored_record(text, run_id) for run_id, text in reversed(rows)]

    # --- many runs -------------------------------------------------------------------------

    def _where(self, f: RunFilter | None) -> list:
        if f is None:
            return []
        where = []
        for name in ("learner", "label"):
            text = getattr(f, name).strip()
            if text:
                where.append(contains_any_case(runs.c[name], text, self.dialect))
        for name in ("mode", "failure_mode"):
            if getattr(f, name):
                where.append(runs.c[name] == column_text(getattr(f, name), self.dialect))
        for name in ("causal", "has_prediction", "has_explanation"):
            if getattr(f, name) is not None:
                where.append(runs.c[name] == bool(getattr(f, name)))
        if f.has_failed_checks is not None:
            where.append(runs.c.failed_checks != "" if f.has_failed_checks else runs.c.failed_checks == "")
        if f.created_from is not None:
            where.append(runs.c.created_at >= f.created_from)
        if f.created_before is not None:
            where.append(runs.c.created_at < f.created_before)
        if f.ids is not None:
            ids = list(f.ids)
            if len(ids) > _CHUNK:
                raise ValueError(f"a filter takes at most {_CHUNK} ids, got {len(ids)}")
            where.append(runs.c.id.in_(_plain_ids(ids)))
        return where

    @staticmethod
    def _order(sort: Sequence[tuple[str, str]]) -> list:
        order = []
        for name, direction in sort:
            if name not in SORTABLE:
                raise ValueError(f"cannot sort runs by {name!r}; sortable: {', '.join(SORTABLE)}")
            if direction not in ("asc", "desc"):
                raise ValueError(f"sort direction must be 'asc' or 'desc', not {direction!r}")
            column = runs.c[name]
            ordered = column.asc() if direction == "asc" else column.desc()
            # The same place for missing values on both dialects (PostgreSQL puts NULL last, SQLite
            # first); said only where a value can be missing, so an index still serves the order.
            order.append(ordered.nulls_last() if column.nullable else ordered)
        # Ties by id, in the last column's direction: (created_at, id) is one index either way.
        last = sort[-1][1] if sort else "asc"
        return [*order, runs.c.id.asc() if last == "asc" else runs.c.id.desc()]

    def query(self, filters: RunFilter | None = None, *, sort: Sequence[tuple[str, str]] = DEFAULT_SORT,
              limit: int | None = None, offset: int = 0, counted: bool = True) -> RunPage:
        """The runs that pass ``filters``, sorted, one page of them, and how many pass in all.

        Parameters
        ----------
        filters : RunFilter, optional
        sort : sequence of (column, "asc" | "desc")
            Columns from :data:`SORTABLE`; ties are broken by id. Default: oldest first.
        limit, offset : int
            The page (``ORDER BY … LIMIT … OFFSET``); ``limit=None`` gives every run.
        counted : bool
            Count the runs that pass (a second scan of them); ``False`` leaves ``total`` None.

        Raises
        ------
        ValueError
            An unknown sort column or direction, a negative limit or offset.
        StoreError
            The store cannot be read.
        """
        if (limit is not None and limit < 0) or offset < 0:
            raise ValueError("limit and offset must be 0 or more")
        where, order = self._where(filters), self._order(sort)
        with self._read() as conn:
            total = (conn.execute(select(func.count()).select_from(runs).where(*where)).scalar_one()
                     if counted else None)
            statement = select(*_SUMMARY_COLUMNS).order_by(*order)
            if limit is None:
                statement = statement.where(*where).offset(offset)
            else:
                # The page's ids first, then their rows: sorting and skipping carry the sort
                # columns and the id, not every column of every run before the page.
                page_ids = select(runs.c.id).where(*where).order_by(*order).offset(offset).limit(limit)
                statement = statement.where(runs.c.id.in_(page_ids.scalar_subquery()))
            page = [RunSummary.from_row(row) for row in conn.execute(statement).mappings()]
        return RunPage(page, total)

    def count(self, filters: RunFilter | None = None) -> int:
        """How many runs pass ``filters`` (all runs without)."""
        with self._read() as conn:
            return conn.execute(select(func.count()).select_from(runs).where(*self._where(filters))).scalar_one()

    def modes(self) -> list[str]:
        """The distinct run titles in the store (for a mode filter's choices), unordered.

        Read again only once the change token moved: every instructor page asks as it opens, and
        PostgreSQL's ``DISTINCT`` reads every run's title.
        """
        token = self.change_token()
        if self._modes is None or self._modes[0] != token:
            with self._read() as conn:
                self._modes = (token, [m for (m,) in conn.execute(select(runs.c.mode).distinct())])
        return list(self._modes[1])

    def learner_runs(self, filters: RunFilter | None = None) -> LearnerTally:
        """Per distinct learner text: its runs and when it first reached each of the Self-attention
        lesson's checkpoints; one ``GROUP BY learner, mode`` query read from one index (every column it
        needs, not the runs' rows), its few groups then added up per learner here.

        Runs whose learner is missing or only whitespace are counted in ``unnamed``. Names are
        not merged here: the learners view merges spellings (surrounding spaces, case) over
        these few entries.

        Returns
        -------
        LearnerTally
            ``learners`` sorted by ``first_at``, then learner text.

        Raises
        ------
        StoreError
            The store cannot be read.
        """
        c = runs.c
        correct_causal = and_(c.failure_mode == "correct", c.causal)
        contrast = and_(c.failure_mode == "mask_after_softmax", c.causal, c.T > 1)

        def first(condition: ColumnElement) -> ColumnElement:
            return func.min(case((condition, c.created_at)))

        statement = select(
            c.learner, c.mode, func.count().label("runs"), func.min(c.created_at).label("first_at"),
            first(c.has_prediction).label("predicted_at"),
            # Credited only when written with the key of the page that saved the run.
            first(c.explained_by_owner).label("explained_at"),
            first(correct_causal).label("correct_causal_at"),
            first(contrast).label("mask_after_softmax_at"),
            func.count(case((not_(or_(correct_causal, contrast)), 1))).label("others"),
        ).where(*self._where(filters)).group_by(c.learner, c.mode)
        with self._read() as conn:
            rows = conn.execute(statement).mappings().all()
        unnamed, named = 0, {}
        for row in rows:
            if (row["learner"] or "").strip():
                named.setdefault(row["learner"], []).append(row)
            else:
                unnamed += row["runs"]
        learners = [LearnerRuns(
            learner=learner, runs=sum(g["runs"] for g in groups),
            **{name: _earliest(g[name] for g in groups) for name in _FIRST_TIMES},
            other_modes=frozenset(g["mode"] for g in groups if g["others"]),
        ) for learner, groups in named.items()]
        return LearnerTally(sorted(learners, key=lambda r: (r.first_at, r.learner)), unnamed)

    def change_token(self) -> int:
        """A number that changes whenever a run is saved, explained or imported (one indexed read).

        An open page polls it and re-queries only when it moved.
        """
        with self._read() as conn:
            total = select(func.sum(meta.c.value)).where(meta.c.name.startswith("changes:"))
            return int(conn.execute(total).scalar_one())

    def note_once(self, what: str) -> bool:
        """Record in the store that ``what`` happened; True the first time, in any process.

        For what the workbench says once per store (the hint to import an old ``runs/`` folder,
        ``what`` naming the folder): a row ``once:<sha1 of what>`` of the meta table, holding
        the Unix time it was first noted.

        Raises
        ------
        StoreError
            ``"Not noted: …"``: the store cannot be written (the caller may say it again).
        """
        name = f"once:{hashlib.sha1(what.encode('utf-8', 'surrogateescape')).hexdigest()}"
        try:
            with self._write("Not noted") as conn:
                conn.execute(meta.insert().values(name=name, value=int(time.time())))
        except IntegrityError:
            return False
        return True

    def existing_ids(self, run_ids: Iterable[str]) -> set[str]:
        """Which of ``run_ids`` are in the store."""
        wanted = _plain_ids(run_ids)
        found: set[str] = set()
        with self._read() as conn:
            for chunk in _chunks(wanted):
                found.update(conn.execute(select(runs.c.id).where(runs.c.id.in_(chunk))).scalars())
        return found

    def _stream(self, columns: list, filters: RunFilter | None, ids: Sequence[str] | None,
                sort: Sequence[tuple[str, str]], batch: int) -> Iterator[Row]:
        """Rows of ``id`` and ``columns``: by ``ids`` in their order (missing ids left out), else
        every run passing ``filters`` in ``sort`` order; fetched ``batch`` at a time."""
        if ids is not None:
            ids = _plain_ids(ids)
            with self._read() as conn:
                for chunk in _chunks(ids):
                    got = {row.id: row for row in conn.execute(
                        select(runs.c.id, *columns).where(runs.c.id.in_(chunk)))}
                    yield from (got[i] for i in chunk if i in got)
            return
        statement = select(runs.c.id, *columns).where(*self._where(filters)).order_by(*self._order(sort))
        with self._read() as conn:
            yield from conn.execution_options(stream_results=True, yield_per=batch).execute(statement)

    def iter_texts(self, filters: RunFilter | None = None, *, ids: Sequence[str] | None = None,
                   sort: Sequence[tuple[str, str]] = DEFAULT_SORT, batch: int = 1000,
                   left_out: list[UnreadableRunError] | None = None) -> Iterator[str]:
        """Each run's stored record text, exactly as ``export`` writes it, streamed.

        By ``ids`` (in that order; ids not in the store are left out) or by ``filters`` and
        ``sort`` (all runs, oldest first, without either). Given a ``left_out`` list (an
        export), each text is read first (:func:`stored_record`) and one that cannot be is put
        there as an :class:`~app.store.exports.UnreadableRunError` instead of being yielded.
        """
        for row in self._stream([runs.c.record], filters, ids, sort, batch):
            if left_out is None or _read_or_leave_out(row.record, row.id, left_out) is not None:
                yield row.record

    def iter_records(self, filters: RunFilter | None = None, *, ids: Sequence[str] | None = None,
                     sort: Sequence[tuple[str, str]] = DEFAULT_SORT, batch: int = 1000,
                     left_out: list[UnreadableRunError] | None = None) -> Iterator[ExperimentRecord]:
        """:meth:`iter_texts` as :class:`ExperimentRecord` objects (one that cannot be read raises
        :class:`RecordError`, or goes to ``left_out`` if given)."""
        for row in self._stream([runs.c.record], filters, ids, sort, batch):
            if left_out is None:
                yield stored_record(row.record, row.id)
            elif (record := _read_or_leave_out(row.record, row.id, left_out)) is not None:
                yield record

    def iter_summaries(self, filters: RunFilter | None = None, *, ids: Sequence[str] | None = None,
                       sort: Sequence[tuple[str, str]] = DEFAULT_SORT, batch: int = 1000) -> Iterator[RunSummary]:
        """Like :meth:`iter_records`, as summaries read from the columns (no JSON parsed): the CSV."""
        columns = [c for c in _SUMMARY_COLUMNS if c.name != "id"]
        for row in self._stream(columns, filters, ids, sort, batch):
            yield RunSummary.from_row(row._mapping)

    def iter_csv_rows(self, filters: RunFilter | None = None, *, ids: Sequence[str] | None = None,
                      sort: Sequence[tuple[str, str]] = DEFAULT_SORT, batch: int = 1000,
                      left_out: list[UnreadableRunError] | None = None) -> Iterator[list]:
        """Each run's CSV row (:func:`~app.store.exports.csv_row`) straight from the CSV's columns,
        no summary built: ``iter_csv(store.iter_csv_rows(…))`` is the text of
        ``iter_export_csv(store.iter_summaries(…))``, for the ``export`` of a whole class. A run
        with a number that is ``inf`` or ``nan`` goes to ``left_out`` (raises without one)."""
        columns = [record_time_text(runs.c.created_at, self.dialect), *_CSV_SOURCE]
        yield from csv_rows(self._stream(columns, filters, ids, sort, batch), lambda row: csv_row(*row), left_out)

    # --- import ----------------------------------------------------------------------------

    def import_records(self, records: Sequence[ExperimentRecord], *, relaxed: bool = False) -> ImportOutcome:
        """Add ``records`` (already validated) in one transaction: all of them or none.

        A run whose id is already in the store is skipped when its content is the same and
        refused when it differs (the stored run is never overwritten); within ``records`` the
        first of an id counts the same way. One refused run keeps the others out too (in
        ``held_back``): a file is never half imported. ``relaxed``: commit without waiting for the disk
        (many files in a row; call :meth:`sync` after the last).

        Raises
        ------
        StoreError
            ``"Runs not imported: …"``; nothing of ``records`` was added.
        """
        for attempt in range(3):
            try:
                return self._import_once(records, relaxed)
            except IntegrityError:
                # Another process added one of these ids after we looked: look again.
                if attempt == 2:
                    raise StoreError("Runs not imported: other imports kept adding the same runs; "
                                     "try again.") from None
        raise AssertionError("unreachable")

    def sync(self) -> None:
        """Wait until every commit so far is on disk: one ordinary commit, which waits for all
        before it (after :meth:`import_records` with ``relaxed=True``)."""
        with self._write("Runs not imported") as conn:
            self._changed(conn)

    def _import_once(self, records: Sequence[ExperimentRecord], relaxed: bool) -> ImportOutcome:
        imported, skipped, refused, rows = [], [], [], []
        with self._write("Runs not imported", relaxed=relaxed) as conn:
            stored: dict[str, object] = {}
            ids = list(dict.fromkeys(r.id for r in records))
            for chunk in _chunks(ids):
                for run_id, text in conn.execute(select(runs.c.id, runs.c.record).where(runs.c.id.in_(chunk))):
                    stored[run_id] = text
            for record in records:
                held = stored.get(record.id)
                if held is None:
                    text = record.to_json()
                    rows.append(_record_row(record, text, self.dialect))
                    stored[record.id] = record
                    imported.append(record.id)
                    continue
                same = (held == record if isinstance(held, ExperimentRecord)
                        else json.loads(held) == record.to_dict())
                (skipped if same else refused).append(record.id)
            if refused:
                return ImportOutcome([], skipped, refused, held_back=imported)
            for chunk in _chunks(rows):
                conn.execute(runs.insert(), list(chunk))
            if rows:
                self._changed(conn)
        return ImportOutcome(imported, skipped, refused)


__all__ = ["DEFAULT_SORT", "PAGE_RUNS", "SORTABLE", "ImportOutcome", "LearnerRuns", "LearnerTally",
           "NotOwnerError", "RunFilter", "RunPage", "RunStore", "StoreError", "StoreOpenError", "stored_record"]
