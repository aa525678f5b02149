"""Write a class's worth of experiment records into a store, fast.

A handful of real records (one per mode, computed by the core) are copied with fresh ids,
times, learners and labels, and added in one transaction (``import_records``): 10,000 runs take
a few seconds, where saving each (a commit each) would take much longer.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from store_helpers import T0, make_record, sqlite_store

from attention_core.records import ExperimentRecord, new_record_id

MODES = ("correct", "mask_after_softmax", "no_mask")


def write_runs(directory: Path, count: int, *, learners: int = 30, start=T0,
               minutes_apart: float = 1.0) -> list[ExperimentRecord]:
    """Write ``count`` records round-robin over :data:`MODES` into the store ``directory/runs.db``;
    return them, oldest first."""
    templates = [make_record(mode).to_dict() for mode in MODES]
    records = []
    for n in range(count):
        created = start + timedelta(minutes=n * minutes_apart)
        data = {**templates[n % len(MODES)], "id": new_record_id(created),
                "created_at": created.isoformat(timespec="microseconds"),
                "learner": f"learner {n % learners:02d}", "label": f"run {n}"}
        records.append(ExperimentRecord(**json.loads(json.dumps(data))))
    with sqlite_store(directory) as store:
        store.import_records(records)
    return records
