"""Every difference between SQLite and PostgreSQL the store knows of, in one place.

The rest of :mod:`app.store` is plain SQLAlchemy Core and runs unchanged on both: this module
makes the engine (SQLite: a busy timeout, foreign keys on, write transactions begun
``IMMEDIATE``, and the WAL journal once the file is known to be a store; PostgreSQL: a connect
and a lock timeout, and connections checked before use), writes "contains, in
any case" and "more than whitespace" the same way on both, keeps text PostgreSQL cannot hold
out of its columns, and turns a driver's error into a sentence a learner or an instructor can
act on.

Left out: the tables (:mod:`app.store.schema`), the queries (:mod:`app.store.runs`).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from pathlib import Path

from sqlalchemy import Text, create_engine, event, func, type_coerce
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.sql import ColumnElement

STORE_ENV = "ATTENTION_WORKBENCH_STORE"
DEFAULT_STORE = "sqlite:///runs.db"
# How long a store call waits on another session's lock (SQLite's writer; a PostgreSQL lock)
# before giving up as "busy" (seconds). Below serve's default --shutdown-grace (10 s), so a save
# waiting on a held store when the server is stopped ends, and its page is told, before the grace.
BUSY_TIMEOUT_S = 8.0
# How long a connection to a PostgreSQL store may take to open (seconds; libpq's connect_timeout).
CONNECT_TIMEOUT_S = 5


class StoreError(OSError):
    """The store could not do what was asked; ``str(error)`` is a sentence to show a person.

    E.g. ``"Run not saved: the store /srv/class/runs.db is read-only."``; ``errno`` is set when
    the cause has one (``ENOSPC``, ``EROFS``, ``EACCES``). :meth:`for_learner` is the sentence
    a learner's page shows.
    """

    #: Set by :func:`store_error`: the sentence without the store's address or the driver's words.
    learner_text: str | None = None

    def for_learner(self) -> str:
        """This error as a learner's page says it: what failed and why in plain words, without
        the store's address (a file path, or a server with its user) or the database driver's
        own text, which are the operator's to read (the server's log has them, see
        :func:`store_error`)."""
        return self.learner_text or str(self)


class StoreOpenError(StoreError):
    """The store cannot be opened at all: missing, corrupt, foreign, newer, or unreachable."""


def sqlite_url(path: str | os.PathLike) -> str:
    """The store URL of the SQLite file at ``path`` (absolute, so a later ``chdir`` cannot move it)."""
    return f"sqlite:///{Path(path).expanduser().absolute()}"


def resolve_store_url(cli_value: str | None = None) -> str:
    """``--store``, else ``$ATTENTION_WORKBENCH_STORE``, else ``sqlite:///runs.db`` (working directory).

    Raises
    ------
    StoreOpenError
        Not a database URL SQLAlchemy can read, or a database other than SQLite/PostgreSQL.
    """
    text = cli_value or os.environ.get(STORE_ENV) or DEFAULT_STORE
    parse_url(text)
    return text


def parse_url(text: str | URL) -> URL:
    """``text`` as a SQLAlchemy URL of a SQLite or PostgreSQL store (``StoreOpenError`` otherwise).

    A URL with a second ``@`` after ``://`` is refused without being shown: it is a password
    holding ``@`` not percent-encoded, which SQLAlchemy would read as the host and database, the
    rest of the password then shown in every message naming them (``shown`` hides only what it
    reads as the password)."""
    if isinstance(text, str) and text.partition("://")[2].count("@") > 1:
        raise StoreOpenError(
            "the store URL holds more than one '@' (shown here as "
            f"{_masked(text)!r}): percent-encode its password (an '@' as %40, '/' as %2F, ':' as "
            "%3A, '#' as %23), e.g. postgresql+psycopg://user:p%40ss@host/dbname")
    try:
        url = make_url(text)
    except ArgumentError:
        raise StoreOpenError(
            f"{_masked(str(text))!r} is not a store URL (e.g. sqlite:///runs.db or "
            "postgresql+psycopg://user@host/dbname)") from None
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreOpenError(f"the store must be SQLite or PostgreSQL, not {url.get_backend_name()} "
                             f"({shown(url)})")
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        raise StoreOpenError("an in-memory SQLite store would lose every run: give a file, "
                             "e.g. sqlite:///runs.db")
    return url


def _masked(text: str) -> str:
    """``text`` with everything between ``://`` and its last ``@`` (who, and any password) as
    ``***``: a URL SQLAlchemy could not read, or read wrongly, shown without its password."""
    scheme, sep, rest = text.partition("://") if "://" in text else ("", "", text)
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if "@" in rest else text


def shown(url: URL) -> str:
    """The URL as people may see it: the password hidden, a SQLite file as its path."""
    if url.get_backend_name() == "sqlite":
        return str(Path(url.database).absolute())
    return url.render_as_string(hide_password=True)


def make_engine(url: URL) -> Engine:
    """An engine for ``url`` with this store's connection settings (see the module docstring).

    Raises
    ------
    StoreOpenError
        The driver for the URL is not installed.
    """
    try:
        if url.get_backend_name() == "sqlite":
            engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
            event.listen(engine, "connect", _sqlite_on_connect)
            event.listen(engine, "begin", _sqlite_begin)
        else:
            # pre_ping: a PostgreSQL restarted under a running class is reconnected, not an error
            engine = create_engine(url, pool_pre_ping=True, connect_args=_postgresql_limits(url))
    except (NoSuchModuleError, ImportError) as error:
        raise StoreOpenError(f"no database driver for {shown(url)}: {error}") from None
    return engine


def _postgresql_limits(url: URL) -> dict[str, object]:
    """libpq settings bounding how long a store call waits, unless the URL sets its own: a new
    connection to a host that does not answer is given up after :data:`CONNECT_TIMEOUT_S`, and a
    table another session locked after :data:`BUSY_TIMEOUT_S`, as SQLite's busy timeout does;
    either then fails as a :class:`StoreError` instead of holding a save for minutes. (A server
    that stops answering an open connection is not bounded here: the call waits in its thread.)"""
    limits: dict[str, object] = {}
    if "connect_timeout" not in url.query:
        limits["connect_timeout"] = CONNECT_TIMEOUT_S
    if "options" not in url.query:
        limits["options"] = f"-c lock_timeout={int(BUSY_TIMEOUT_S * 1000)}"
    return limits


def _sqlite_on_connect(dbapi_connection: sqlite3.Connection, connection_record) -> None:
    # The driver's own transaction handling would begin a deferred transaction lazily; begin
    # them ourselves (_sqlite_begin) so a write transaction holds the write lock from its start.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()
    dbapi_connection.create_function("workbench_contains", 2, _contains, deterministic=True)


def prepare_store(engine: Engine) -> None:
    """Settings a store keeps in its database, set once the database is known to be a store (a
    foreign or corrupt file is never written to): SQLite's WAL journal, so readers never wait
    for a writer."""
    if engine.dialect.name != "sqlite":
        return
    raw = engine.raw_connection()  # outside any transaction: the journal mode cannot change in one
    try:
        raw.driver_connection.execute("PRAGMA journal_mode = WAL")
    except sqlite3.Error:
        pass  # a read-only file keeps its journal mode; saving says why it cannot
    finally:
        raw.close()


def _sqlite_begin(connection) -> None:
    # IMMEDIATE takes the write lock at BEGIN, waiting out the busy timeout: a deferred
    # transaction that read first and then wrote would fail at once with "database is locked".
    options = connection.get_execution_options()
    if options.get("store_write", False):
        # FULL: the WAL is synced at every commit (a saved run survives a power cut); NORMAL for
        # an import's files, synced at the checkpoint or at the next FULL commit (see relaxed_commit).
        level = "NORMAL" if options.get("store_relaxed", False) else "FULL"
        connection.exec_driver_sql(f"PRAGMA synchronous = {level}")
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        connection.exec_driver_sql("BEGIN")


def relaxed_commit(connection) -> None:
    """Let this write transaction commit without waiting for the disk (an import's file: atomic,
    and durable at the import's closing commit, which waits for everything before it).

    SQLite: ``synchronous = NORMAL`` (set as the transaction begins, from the connection's
    ``store_relaxed`` option); PostgreSQL: ``SET LOCAL synchronous_commit = off``. Neither can
    corrupt the store or half-apply a transaction; a power cut may undo the last few such commits.
    """
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql("SET LOCAL synchronous_commit = off")


def _contains(haystack: str | None, needle: str) -> bool:
    return haystack is not None and needle.casefold() in haystack.casefold()


def contains_any_case(column: ColumnElement, text: str, dialect_name: str) -> ColumnElement:
    """A condition: ``column`` contains ``text`` in any case (``text`` a bound parameter, its
    ``%`` and ``_`` plain characters). SQLite: Python's ``casefold`` (SQLite's own ``lower``
    knows only ASCII, and its LIKE stops at a NUL); PostgreSQL: ``strpos`` of Unicode ``lower``."""
    if dialect_name == "sqlite":
        return func.workbench_contains(column, text) == 1
    return func.strpos(func.lower(column), func.lower(column_text(text, dialect_name))) > 0


# What Python's str.strip() drops (every character whose isspace() is true); a test keeps it so.
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
              "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def has_text(column: ColumnElement, dialect_name: str) -> ColumnElement:
    """A condition: ``column`` holds something besides whitespace, as ``bool(text.strip())`` says
    in Python (NULL: false). SQLite's ``trim(X, Y)`` and PostgreSQL's ``btrim`` both drop any
    character of :data:`WHITESPACE` from both ends (a UTF-8 database: a character, not a byte)."""
    trim = func.trim if dialect_name == "sqlite" else func.btrim
    return trim(column, WHITESPACE) != ""


def record_time_text(column: ColumnElement, dialect_name: str) -> ColumnElement:
    """A stored time as a record writes ``created_at`` (UTC, microseconds, ``+00:00``), formatted
    by the database, so an export of every run parses and formats no datetime in Python. SQLite
    holds the naive UTC time as SQLAlchemy's text ``YYYY-MM-DD HH:MM:SS.ffffff``; PostgreSQL a
    ``timestamptz``, shown in UTC by ``to_char``."""
    if dialect_name == "sqlite":
        return func.replace(type_coerce(column, Text), " ", "T").concat("+00:00")
    return func.to_char(func.timezone("UTC", column), 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')


def column_text(text: str | None, dialect_name: str) -> str | None:
    """``text`` as a column of ``dialect_name`` can hold it: PostgreSQL's text cannot hold NUL, so
    a NUL becomes U+FFFD there (in the filter and sort copies only: the record keeps it)."""
    if text is None or dialect_name != "postgresql" or "\x00" not in text:
        return text
    return text.replace("\x00", "\ufffd")


_SQLITE_WHY = (
    ("readonly", "is read-only", errno.EROFS),
    ("read-only", "is read-only", errno.EROFS),
    ("disk is full", "is full", errno.ENOSPC),
    ("database or disk is full", "is full", errno.ENOSPC),
    ("unable to open", "cannot be opened (missing folder, or no permission)", errno.EACCES),
    ("disk i/o error", "could not be written (disk I/O error)", errno.EIO),
    ("database is locked", "is busy (another process held it too long); try again", errno.EBUSY),
    ("not a database", "is not a database file (corrupt, or another program's file)", None),
    ("malformed", "is damaged (database disk image is malformed)", None),
)


def _file_system_says(path: Path, why: str | None, code: int | None) -> tuple[str | None, int | None]:
    """``(why, errno)`` from the file system holding ``path``: read-only or full, else as given.

    Asked by making (and at once dropping) a temporary file beside the store: a file system the
    kernel turned read-only after an error still shows as writable to ``statvfs``.
    """
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as error:
        if error.errno == errno.EROFS:
            return "is read-only", errno.EROFS
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return "is full", errno.ENOSPC
    return why, code


def store_error(error: Exception, url: URL, what: str, cls: type[StoreError] = StoreError) -> StoreError:
    """A :class:`StoreError` saying ``"<what>: the store <where> <why>."`` for a driver error."""
    where = shown(url)
    why, code, plain = None, None, None
    message = str(getattr(error, "orig", None) or error)
    lowered = message.lower()
    if url.get_backend_name() == "sqlite":
        for needle, text, number in _SQLITE_WHY:
            if needle in lowered:
                why, code = text, number
                break
        if code in (errno.EIO, errno.EACCES, errno.EBUSY, None):
            # SQLite reports a write refused by the file system as an I/O error: ask it why.
            why, code = _file_system_says(Path(url.database), why, code)
    elif "lock timeout" in lowered:  # lock_timeout (_postgresql_limits): another session held a lock
        why = f"is busy (another session held it longer than {BUSY_TIMEOUT_S:g} s); try again"
        code = errno.EBUSY
    elif "authentication failed" in lowered or "no pg_hba.conf entry" in lowered:
        # Reached, and it said no: the URL's user or password (or the server's pg_hba.conf).
        why = f"refused the login ({message.strip().splitlines()[0]})"
        plain = "cannot be reached just now"  # a learner cannot fix it: as unreachable
    elif isinstance(error, DBAPIError) and error.connection_invalidated or "connection" in lowered:
        why = f"cannot be reached ({message.strip().splitlines()[0]})"
        plain = "cannot be reached just now"
    if why is None:
        why = f"failed: {message.strip().splitlines()[0] if message.strip() else type(error).__name__}"
        plain = "failed (the server's log says why)"
    result = cls(f"{what}: the store {where} {why}.")
    result.errno = code
    # The SQLite reasons are plain words already; the driver's are not, and name the server.
    result.learner_text = f"{what}: the store {why if plain is None else plain}."
    return result


__all__ = ["BUSY_TIMEOUT_S", "CONNECT_TIMEOUT_S", "DEFAULT_STORE", "STORE_ENV", "WHITESPACE", "StoreError",
           "StoreOpenError", "column_text", "contains_any_case", "has_text", "make_engine", "parse_url",
           "prepare_store", "record_time_text", "relaxed_commit", "resolve_store_url", "shown", "sqlite_url",
           "store_error"]
