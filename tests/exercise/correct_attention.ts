// A correct solution of the exercise of Self-attention, "Shapes and loops", for
// tests/test_exercise.py: the generated tests must pass on it. Causal mask before a stable softmax
// over each row.

function dot(a: number[], b: number[]): number {
  return a.reduce((sum, x, t) => sum + x * b[t], 0);
}

export function stableSoftmax(scores: number[]): number[] {
  const max = Math.max(...scores.filter((s) => s !== -Infinity));
  const exps = scores.map((s) => (s === -Infinity ? 0 : Math.exp(s - max)));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

export function maskedAttentionWeights(queries: number[][], keys: number[][], causal: boolean): number[][] {
  const scale = Math.sqrt(queries[0].length);
  return queries.map((q, i) =>
    stableSoftmax(keys.map((k, j) => (causal && j > i ? -Infinity : dot(q, k) / scale))),
  );
}
