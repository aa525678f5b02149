"""A separate process that saves runs into a store: used by the concurrency and SIGKILL tests.

Usage: python store_writer.py STORE_URL COUNT [GO_FILE [DONE_LOG]]; COUNT 0 means save until
killed (with the largest records the workbench makes, 16 tokens and wide values, so a kill often
lands mid-write). Waits for GO_FILE to exist (if given) so several writers start together. Each
committed save's id is appended to DONE_LOG (if given) after ``save`` returns, so a test knows
which runs were committed before a kill.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

from app.store import RunStore
from attention_core import ExperimentRecord, scaled_dot_product_attention


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    go = Path(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    done = open(sys.argv[4], "a", buffering=1) if len(sys.argv) > 4 else None  # noqa: SIM115
    store = RunStore(url)
    rng = np.random.default_rng()
    T, d_k, d_v = (16, 8, 64) if count == 0 else (4, 2, 2)
    q, k, v = rng.normal(size=(T, d_k)), rng.normal(size=(T, d_k)), rng.normal(size=(T, d_v))
    result = scaled_dot_product_attention(q, k, v)
    while go is not None and not go.exists():
        time.sleep(0.005)
    saved = 0
    while count == 0 or saved < count:
        record = ExperimentRecord.from_result(result, learner=f"writer {os.getpid()}", notes="x" * 2000)
        store.save(record)
        if done is not None:
            done.write(record.id + "\n")
        saved += 1


if __name__ == "__main__":
    main()
