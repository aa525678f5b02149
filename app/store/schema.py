"""The store's tables, their version, and the steps that bring an older store up to date.

Two tables, named ``workbench_*`` so a class's PostgreSQL database can hold other things too:

- ``workbench_runs``: one row per run. ``record`` is the run's strict-JSON experiment record,
  exactly the text ``export`` writes; the other columns are copies of what the instructor page
  filters, sorts, counts and draws by (and what the CSV holds), each taken from the record when
  it is saved, indexed where a filter or a sort uses it.
- ``workbench_meta``: ``store_version`` (the version of these tables) and ``changes:0`` …
  ``changes:15``, counters of which every save, explanation and import raises one in its own
  transaction; their sum is the cheap "anything new?" of an open instructor page. Sixteen rows, not
  one, so concurrent saves on PostgreSQL do not queue on one row's lock. And ``once:<sha1>`` rows,
  one per thing said once per store (:meth:`~app.store.RunStore.note_once`), e.g. the hint to
  import an old ``runs/`` folder; and ``ended_login:<login id>`` rows, one per instructor login
  ended by *Log out* (:mod:`app.store.logins`), read by every server process of the class.

A store is opened by :func:`open_store`: a new, empty database gets the tables; a store at an
older version is upgraded on the spot by the steps in :data:`UPGRADES`, in one transaction; a
newer one, and a database holding other tables but not ours, are refused with a message. Version
1 is the first release's; version 2 indexes each sort column with created_at and id; version 3
counts a prediction or explanation of only whitespace as none and indexes what the learners view
counts; version 4 puts learner and label in the index of the default order (newest first);
version 5 adds the sizes of the complete layer (record schema version 3) that the CSV holds:
``B``, ``T_k``, ``d_v``, ``has_w_o``, ``cross_attention``, ``causal_alignment``, ``ablation_target``;
version 6 adds who may change a run: ``page_key_hash``, the SHA-256 (hex) of the key of the page
that saved it (never the key itself; none for imported runs and for runs saved before version 6,
which no page can change), and ``explained_by_owner``, whether its explanation was written with
that key (what the learners view credits; false for every run stored before version 6, whose
explanations nobody can vouch for).

Left out: the queries (:mod:`app.store.runs`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    bindparam,
    false,
    inspect,
    literal_column,
    not_,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateColumn

from app.store.dialects import has_text, prepare_store

metadata = MetaData()
CHANGE_SHARDS = 16


class UTCDateTime(TypeDecorator):
    """An aware UTC datetime on both dialects (SQLite keeps no offset: stored as UTC, read as UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("a store time must be timezone-aware")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# BigInteger on PostgreSQL; SQLite's autoincrementing key must be declared INTEGER.
_SEQ = BigInteger().with_variant(Integer(), "sqlite")

runs = Table(
    "workbench_runs", metadata,
    Column("seq", _SEQ, primary_key=True, autoincrement=True),  # order of arrival in this store
    Column("id", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("learner", String(100)),
    Column("label", String(100)),
    Column("mode", String(100), nullable=False),  # the run's title, run_title(): the mode filter
    Column("failure_mode", String(32), nullable=False),
    Column("causal", Boolean, nullable=False),
    Column("mask_after_softmax", Boolean, nullable=False),
    Column("T", Integer, nullable=False),
    Column("d_k", Integer, nullable=False),
    Column("d_model", Integer),
    # Store version 5 (the complete layer). Defaults, and T_k nullable, because SQLite adds a NOT
    # NULL column only with a default; every run's row has each of them filled.
    Column("B", Integer, nullable=False, server_default=literal_column("1")),  # batch items
    Column("T_k", Integer),  # keys per item: T unless cross-attention
    Column("d_v", Integer),  # None without values
    Column("has_w_o", Boolean, nullable=False, server_default=false()),
    Column("cross_attention", Boolean, nullable=False, server_default=false()),
    Column("causal_alignment", String(16)),  # top_left, bottom_right or None
    Column("ablation_target", String(8)),  # W_Q ... W_O, None without an ablation
    Column("total_future_weight", Float),
    Column("min_row_sum", Float),
    Column("max_row_sum_error", Float),
    Column("failed_checks", String(2200), nullable=False),  # names joined by ";", "" when none
    Column("has_prediction", Boolean, nullable=False),  # text beyond whitespace (str.strip())
    Column("has_explanation", Boolean, nullable=False),
    Column("prediction", Text),
    Column("explanation", Text),
    # Store version 6: the SHA-256 (64 hex digits) of the saving page's key; only a page holding
    # that key may change the run (RunStore.update_explanation). None: imported, or older.
    Column("page_key_hash", String(64)),
    # Its explanation was written with the owner's key (saved with the run or attached by the
    # page): the learners view credits only these. A default: SQLite adds a NOT NULL column so.
    Column("explained_by_owner", Boolean, nullable=False, server_default=false()),
    Column("notes", Text),
    Column("schema_version", Integer, nullable=False),  # the record's, not the tables'
    Column("record", Text, nullable=False),
)

# Every column a filter or a sort of the instructor page uses, each followed by created_at and id:
# the table's order within equal values (its page is then read from the index alone, without a
# sort of every run), and created_at with id the default order. Text filters are "contains",
# which no B-tree index serves; their sorts are.
_INDEXED = ("learner", "label", "mode", "failure_mode", "causal", "T", "d_k", "total_future_weight",
            "min_row_sum", "failed_checks", "has_prediction", "has_explanation")
# The table's default order, holding the text filters' columns too: a "contains" filter (which no
# B-tree can seek) on the newest runs, the table's first page and the class picture, walks this
# index alone instead of looking up each run's row (a SQLite row holds its whole record).
_NEWEST_INDEX = Index("ix_workbench_runs_newest_texts", runs.c.created_at, runs.c.id, runs.c.learner,
                      runs.c.label)
_SORT_INDEXES = [Index(f"ix_workbench_runs_{name.lower()}", runs.c[name], runs.c.created_at, runs.c.id)
                 for name in _INDEXED]
# Everything the learners view counts (RunStore.learner_runs), so its GROUP BY reads this index
# alone, not every run's row (a SQLite row holds its whole record).
_LEARNERS_INDEX = Index("ix_workbench_runs_learner_progress", runs.c.learner, runs.c.mode, runs.c.created_at,
                        runs.c.failure_mode, runs.c.causal, runs.c.T, runs.c.has_prediction, runs.c.has_explanation)
# Made by the version 3 step, dropped by the version 6 step: a new store does not get it.
runs.indexes.discard(_LEARNERS_INDEX)
# Version 6's: the same with explained_by_owner, which the learners view now counts instead.
_OWNER_LEARNERS_INDEX = Index("ix_workbench_runs_learner_owner_progress", runs.c.learner, runs.c.mode,
                              runs.c.created_at, runs.c.failure_mode, runs.c.causal, runs.c.T,
                              runs.c.has_prediction, runs.c.explained_by_owner)
# A page's own runs, newest first (RunStore.page_runs).
_PAGE_INDEX = Index("ix_workbench_runs_page", runs.c.page_key_hash, runs.c.created_at, runs.c.id)

meta = Table(
    "workbench_meta", metadata,
    Column("name", String(64), primary_key=True),
    Column("value", BigInteger, nullable=False),
)

TABLES = (runs.name, meta.name)


def _create(conn: Connection) -> None:
    """A new store: the current tables, at the current version."""
    metadata.create_all(conn)
    conn.execute(meta.insert(), [{"name": "store_version", "value": current_version()},
                                 *({"name": f"changes:{k}", "value": 0} for k in range(CHANGE_SHARDS))])


# UPGRADES[n] brings a store at version n + 1 to version n + 2: a later release that changes the
# tables appends a step (and changes the Table definitions above, which a new store is made
# from), never editing an old step. tests/test_store.py upgrades a store through an added step.
def _sort_indexes(conn: Connection) -> None:
    """Version 2: each filter and sort column's index also holds created_at and id (version 1
    indexed the column alone, so a page sorted by it sorted every run's row)."""
    for index in _SORT_INDEXES:
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {index.name}")
        index.create(conn)


def _learners_index(conn: Connection) -> None:
    """Version 3: a prediction or explanation of only whitespace (an imported record's) is none,
    as the learners view counts it (version 2 flagged any text); the learners view's index."""
    for flag, text in ((runs.c.has_prediction, runs.c.prediction), (runs.c.has_explanation, runs.c.explanation)):
        conn.execute(update(runs).where(flag, not_(has_text(text, conn.dialect.name))).values({flag.name: False}))
    _LEARNERS_INDEX.create(conn, checkfirst=True)


def _newest_texts_index(conn: Connection) -> None:
    """Version 4: the default order's index also holds learner and label (version 3 held created_at
    and id alone, so a text filter on the newest runs read each run's row until enough matched)."""
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_workbench_runs_created_at_id")
    _NEWEST_INDEX.create(conn, checkfirst=True)


def _add_columns(conn: Connection, names: tuple[str, ...]) -> bool:
    """Add the columns ``names`` of :data:`runs` that the table lacks; False when it had them all
    (checkfirst, as the index steps)."""
    have = {c["name"] for c in inspect(conn).get_columns(runs.name)}
    if set(names) <= have:
        return False
    table = conn.dialect.identifier_preparer.quote(runs.name)
    for name in names:
        if name not in have:
            column = CreateColumn(runs.c[name]).compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column}")
    return True


_LAYER_COLUMNS = ("B", "T_k", "d_v", "has_w_o", "cross_attention", "causal_alignment", "ablation_target")


def _layer_columns(conn: Connection) -> None:
    """Version 5: the complete layer's sizes (record schema version 3), for the CSV. A store at
    version 4 holds records of versions 1 and 2 only: one sequence, no W_O, no X_kv, no
    alignment, no ablation, T_k = T; d_v is read from each record (version 1 has no d_v key)."""
    from app.store.runs import stored_record  # the record reader; app.store.runs imports this module

    if not _add_columns(conn, _LAYER_COLUMNS):
        return
    conn.execute(update(runs).values(T_k=runs.c.T))
    set_d_v = update(runs).where(runs.c.id == bindparam("run_id")).values(d_v=bindparam("new_d_v"))
    rows = conn.execute(select(runs.c.id, runs.c.record)).all()
    for start in range(0, len(rows), 500):
        conn.execute(set_d_v, [{"run_id": run_id, "new_d_v": stored_record(text).d_v}
                               for run_id, text in rows[start:start + 500]])


def _page_keys(conn: Connection) -> None:
    """Version 6: the saving page's key hash and whether the explanation was written with it. No
    run stored before has either: none can be changed on a page, and none of their explanations
    is credited (nothing says who wrote them: until version 6 a run's link was enough)."""
    _add_columns(conn, ("page_key_hash", "explained_by_owner"))
    conn.exec_driver_sql(f"DROP INDEX IF EXISTS {_LEARNERS_INDEX.name}")
    _OWNER_LEARNERS_INDEX.create(conn, checkfirst=True)
    _PAGE_INDEX.create(conn, checkfirst=True)


UPGRADES: list[Callable[[Connection], None]] = [_sort_indexes, _learners_index, _newest_texts_index,
                                                _layer_columns, _page_keys]


def current_version() -> int:
    """The version of the tables this workbench writes: 1, plus one per entry of :data:`UPGRADES`."""
    return 1 + len(UPGRADES)


class SchemaProblem(Exception):
    """Why a database cannot be used as a store (a sentence without the store's name)."""


def stored_version(conn: Connection) -> int | None:
    """The store's version, ``None`` for an empty database; :class:`SchemaProblem` for a foreign one."""
    names = set(inspect(conn).get_table_names())
    if meta.name not in names:
        if runs.name in names:
            raise SchemaProblem(f"it has a {runs.name} table but no {meta.name} table: not a store "
                                "this workbench made")
        if names and conn.dialect.name == "sqlite":
            shown = ", ".join(sorted(names)[:5]) + (", …" if len(names) > 5 else "")
            raise SchemaProblem(f"it is another program's database (tables: {shown})")
        return None
    row = conn.execute(select(meta.c.value).where(meta.c.name == "store_version")).first()
    if row is None:
        raise SchemaProblem(f"its {meta.name} table has no store_version")
    return int(row[0])


def upgrade(conn: Connection, found: int | None) -> int:
    """Make a new store (``found`` None) or run the steps from version ``found`` to the current one.

    Returns the version now stored.

    Raises
    ------
    SchemaProblem
        ``found`` is newer than this workbench's version.
    """
    target = current_version()
    if found is None:
        _create(conn)
        return target
    if found > target:
        raise SchemaProblem(
            f"it was made by a newer attention-workbench (store version {found}; this one reads "
            f"versions up to {target}): upgrade attention-workbench, or choose another --store")
    for step in UPGRADES[found - 1:]:
        step(conn)
    if found < target:
        conn.execute(update(meta).where(meta.c.name == "store_version").values(value=target))
    return target


def open_store(engine: Engine, *, create: bool) -> int:
    """Check (and unless it is current, create or upgrade) the store behind ``engine``.

    Returns the store's version. Raises :class:`SchemaProblem` for a foreign or newer database, or
    with ``create=False`` for an empty one; driver errors (a corrupt file, a server that cannot
    be reached) propagate as SQLAlchemy errors.
    """
    with engine.connect() as conn:
        found = stored_version(conn)
        conn.rollback()
    if found is not None and found <= current_version():
        prepare_store(engine)
    if found == current_version():
        return found
    if found is None and not create:
        raise SchemaProblem("it holds no runs yet (no store tables)")
    # Check again inside a write transaction: two processes starting at once upgrade once.
    with engine.connect().execution_options(store_write=True) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7100151)")  # the upgrade's own lock
        version = upgrade(conn, stored_version(conn))
    prepare_store(engine)
    return version


__all__ = ["TABLES", "UPGRADES", "SchemaProblem", "UTCDateTime", "current_version", "meta", "metadata",
           "open_store", "runs", "stored_version", "upgrade"]
