"""The numeric core against the floor: the same maths as one plain numpy expression.

The floor computes what the learner page needs from a result (scaled scores, causal mask before a
stable softmax, weights, row sums, future-token weight, output) with no validation, no failure modes
and no checks. ``scaled_dot_product_attention`` does all of that plus the checks of Review, "Audit
Order". Both are timed in alternating batches in one process, so machine noise hits them alike. The
figure (µs per call) is watched, not targeted: the core is written for clarity (issue 13).
"""

from __future__ import annotations

import time

import numpy as np
from common import summary

from attention_core import scaled_dot_product_attention


def floor(q: np.ndarray, k: np.ndarray, v: np.ndarray):
    """Plain numpy: [T], [T], [T] -> weights [T, T], row sums, future weight [T], output [T]."""
    T = q.shape[0]
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    scores = np.outer(q, k)  # d_k = 1: dividing by sqrt(1) is a no-op
    masked = np.where(future, -np.inf, scores)
    e = np.exp(masked - masked.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights, weights.sum(axis=-1), np.where(future, weights, 0.0).sum(axis=-1), weights @ v


def _batch(fn, args, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn(*args)
    return (time.perf_counter() - start) / number


def run(repeats: int, number: int = 200, sizes=(3, 8, 16)) -> dict:
    rng = np.random.default_rng(6)
    rows = {}
    for T in sizes:
        q, k, v = (rng.normal(size=T) for _ in range(3))
        core = scaled_dot_product_attention(q, k, v)
        np.testing.assert_allclose(core.weights, floor(q, k, v)[0], atol=1e-12)  # same maths
        for fn in (scaled_dot_product_attention, floor):  # warm up
            _batch(fn, (q, k, v), number)
        core_s, floor_s = [], []
        for _ in range(repeats):
            core_s.append(_batch(scaled_dot_product_attention, (q, k, v), number))
            floor_s.append(_batch(floor, (q, k, v), number))
        c, f = summary(core_s, 1e6), summary(floor_s, 1e6)
        rows[str(T)] = {"core_us": c, "floor_us": f, "median_ratio": c["median"] / f["median"],
                        "p95_ratio": c["p95"] / f["p95"]}
    # No target: the core is ~0.1 % of an edit's time, so this is a figure to watch, not to chase.
    return {"by_T": rows, "calls_per_sample": number, "target": None, "pass": None}
