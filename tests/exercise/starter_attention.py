"""The starter's bug in Python of the exercise of Self-attention, "Shapes and loops", for
tests/test_exercise.py (copied as ``masked_attention.py``): softmax sees every score, then future
weights are zeroed without renormalising."""

import math


def masked_attention_weights(queries, keys, causal):
    scale = math.sqrt(len(queries[0]))
    weights = []
    for i, q in enumerate(queries):
        scores = [sum(a * b for a, b in zip(q, k, strict=True)) / scale for k in keys]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        weights.append([0.0 if causal and j > i else e / total for j, e in enumerate(exps)])
    return weights
