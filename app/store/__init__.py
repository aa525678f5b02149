"""Where the workbench keeps saved runs: a SQLite file by default, PostgreSQL for a class server.

One store class, :class:`RunStore`, over SQLAlchemy Core; the same code for both databases
(their differences are in :mod:`app.store.dialects`). ``--store URL`` or
``$ATTENTION_WORKBENCH_STORE`` chooses it (:func:`resolve_store_url`); the default is
``sqlite:///runs.db`` in the working directory. The experiment record stays the unit of
exchange: each run's strict-JSON record is stored whole and exported byte for byte.

The interface (what the pages, the command line and the tests use)::

    store = RunStore("sqlite:///runs.db")        # or "postgresql+psycopg://user:pw@host/db"
    store.save(record, key_hash=h)               # a new run, the saving page's key hash; "Run not saved: …"
    store.get(run_id)                            # ExperimentRecord; KeyError, ValueError (bad id)
    store.update_explanation(run_id, text, key_hash=h)   # the run as now stored; NotOwnerError
                                                 #   without the key it was saved with
    store.page_runs(h)                           # the latest 200 runs saved with that key, oldest first

    page = store.query(RunFilter(learner="ada", mode="Correct, causal",
                                 created_from=day_start, created_before=next_day_start),
                       sort=[("total_future_weight", "desc")], limit=20, offset=40)
    page.runs                                    # list[RunSummary] (no matrices), this page
    page.total                                   # how many runs pass the filters in all
    store.count(filters); store.modes()          # a count; the distinct run titles
    tally = store.learner_runs(filters)          # GROUP BY learner, mode: LearnerTally(learners, unnamed)
    tally.learners                               # list[LearnerRuns]: per stored learner text, its
                                                 #   runs and first run with a prediction, with an
                                                 #   explanation, correct causal, mask after softmax
                                                 #   (causal, T > 1); the titles of its other runs

    store.change_token()                         # int that moves on every save/explanation/import
    store.note_once(what)                        # True the first time `what` is noted in this store
    store.iter_texts(filters | ids=[...])        # stored JSON text per run, streamed (export)
    store.iter_records(...); store.iter_summaries(...)   # the same as records / summaries
    store.iter_csv_rows(...)                     # the same as CSV rows, for iter_csv (the CSV export)
    store.import_records(records)                # one transaction: ImportOutcome(imported, skipped, refused)

Filters and sorts run in SQL (``WHERE … ORDER BY … LIMIT … OFFSET``) on indexed columns; sort
columns are picked by name from :data:`SORTABLE` and every value is a bound parameter. Reading
files, folders and export bundles for import (validation, per-file reporting, a ``created_at``
without an offset read as UTC) is :func:`app.store.importing.import_paths`; exports are
:mod:`app.store.exports`.

Left out: deleting runs (no page deletes a run), users and permissions (the database's own).
"""

from app.store.dialects import (
    DEFAULT_STORE,
    STORE_ENV,
    StoreError,
    StoreOpenError,
    resolve_store_url,
    sqlite_url,
)
from app.store.exports import (
    CSV_COLUMNS,
    EXPORT_FORMAT,
    export_csv,
    export_json,
    iter_csv,
    iter_export_csv,
    iter_export_json,
)
from app.store.runs import (
    DEFAULT_SORT,
    PAGE_RUNS,
    SORTABLE,
    ImportOutcome,
    LearnerRuns,
    LearnerTally,
    NotOwnerError,
    RunFilter,
    RunPage,
    RunStore,
)
from app.store.summary import RunSummary

__all__ = ["CSV_COLUMNS", "DEFAULT_SORT", "DEFAULT_STORE", "EXPORT_FORMAT", "PAGE_RUNS", "SORTABLE", "STORE_ENV",
           "ImportOutcome", "LearnerRuns", "LearnerTally", "NotOwnerError", "RunFilter", "RunPage", "RunStore",
           "RunSummary", "StoreError", "StoreOpenError", "export_csv", "export_json", "iter_csv", "iter_export_csv",
           "iter_export_json", "resolve_store_url", "sqlite_url"]
