"""Shared helpers for the record, store and CLI tests: build records, check them strictly."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np

from app.store import RunStore, sqlite_url
from attention_core import scaled_dot_product_attention
from attention_core.records import ExperimentRecord, validate_record

T0 = datetime(2025, 1, 31, 9, 15, 2, 123456, tzinfo=UTC)
# A page's key (as page_key.js makes one: 32 hex digits) and its SHA-256, what the store keeps.
PAGE_KEY = "0123456789abcdef" * 2
OWNER = hashlib.sha256(PAGE_KEY.encode("ascii")).hexdigest()


def sqlite_store(directory) -> RunStore:
    """A SQLite store ``runs.db`` in ``directory`` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    return RunStore(sqlite_url(directory / "runs.db"))


def stored(store: RunStore) -> list[dict]:
    """Every run's record as ``store`` holds it, oldest first."""
    return [json.loads(text) for text in store.iter_texts()]


def delete_run(store: RunStore, run_id: str) -> None:
    """Remove a run behind the store's back (as a database administrator could)."""
    from app.store.schema import runs

    with store.engine.connect().execution_options(store_write=True) as conn, conn.begin():
        conn.execute(runs.delete().where(runs.c.id == run_id))


def overwrite_record_text(store: RunStore, run_id: str, text: str) -> None:
    """Replace a run's stored record text behind the store's back (a database edited by hand)."""
    from app.store.schema import runs

    with store.engine.connect().execution_options(store_write=True) as conn, conn.begin():
        conn.execute(runs.update().where(runs.c.id == run_id).values(record=text))


def make_result(mode: str = "correct", T: int = 3, d: int | None = None, seed: int = 0,
                values: bool = True, **kwargs):
    """A small attention result with seeded random inputs (scalar mode when ``d`` is None)."""
    rng = np.random.default_rng(seed)
    shape = (T,) if d is None else (T, d)
    q, k, v = (rng.normal(size=shape) for _ in range(3))
    return scaled_dot_product_attention(q, k, v if values else None, failure_mode=mode, **kwargs)


def make_record(mode: str = "correct", *, minutes: int = 0, record_id: str | None = None,
                **text) -> ExperimentRecord:
    """A checked record created ``minutes`` after :data:`T0`."""
    record = ExperimentRecord.from_result(
        make_result(mode), record_id=record_id, created_at=T0 + timedelta(minutes=minutes), **text
    )
    return check_strict(record)


def refuse_constant(token: str):
    raise AssertionError(f"non-strict JSON token {token}")


def check_strict(record: ExperimentRecord) -> ExperimentRecord:
    """Assert the record is schema-valid, strict JSON and round-trips exactly; return it."""
    text = record.to_json()
    data = json.loads(text, parse_constant=refuse_constant)
    validate_record(data)
    assert ExperimentRecord.from_json(text) == record
    assert ExperimentRecord.from_dict(data) == record
    return record


def changed_copy(data: dict, path: tuple, value) -> dict:
    """A deep copy of record ``data`` with the key at ``path`` set to ``value`` (deleted when
    ``value`` is ``KeyError``), for tests that hand validation a broken record."""
    broken = copy.deepcopy(data)
    target = broken
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return broken


def tampered_broken_run() -> tuple[ExperimentRecord, dict]:
    """A real *Mask after softmax (broken)* run of the worked row (seed 003), and its record's
    data with the results edited to say what a correct run would: smallest row sum 1.0, every
    row sum 1.0, every check passed, none failed."""
    real = ExperimentRecord.from_result(scaled_dot_product_attention(
        [1.0, 1.0, 1.0], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0], failure_mode="mask_after_softmax"),
        learner="Mallory", label="rows sum to 1", created_at=T0)
    assert real.failed_checks and real.min_row_sum < 0.01
    data = real.to_dict()
    results = data["results"]
    results.update(min_row_sum=1.0, max_row_sum_error=0.0, row_sums=[1.0] * len(results["row_sums"]),
                   failed_checks=[])
    for check in results["checks"]:
        check["passed"] = True
    return real, data


def run_async(coroutine):
    """Run ``coroutine`` to its end on an event loop of its own, in a thread: in a worker that ran
    browser tests first, pytest-playwright's sync API holds an event loop running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
