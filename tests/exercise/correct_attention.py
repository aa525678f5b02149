"""A correct solution in Python of the exercise of Self-attention, "Shapes and loops", for
tests/test_exercise.py (copied as ``masked_attention.py`` beside a generated pytest file): causal
mask before a stable softmax."""

import math


def masked_attention_weights(queries, keys, causal):
    scale = math.sqrt(len(queries[0]))
    weights = []
    for i, q in enumerate(queries):
        scores = [-math.inf if causal and j > i else sum(a * b for a, b in zip(q, k, strict=True)) / scale
                  for j, k in enumerate(keys)]
        top = max(s for s in scores if s != -math.inf)
        exps = [0.0 if s == -math.inf else math.exp(s - top) for s in scores]
        total = sum(exps)
        weights.append([e / total for e in exps])
    return weights
