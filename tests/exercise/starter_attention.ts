// The starter's bug of the exercise of Self-attention, "Shapes and loops", for
// tests/test_exercise.py: "the starter masks probabilities without renormalising". Softmax sees
// every score, then future weights are zeroed.

function dot(a: number[], b: number[]): number {
  return a.reduce((sum, x, t) => sum + x * b[t], 0);
}

export function stableSoftmax(scores: number[]): number[] {
  const max = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - max));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

export function maskedAttentionWeights(queries: number[][], keys: number[][], causal: boolean): number[][] {
  const scale = Math.sqrt(queries[0].length);
  return queries.map((q, i) =>
    stableSoftmax(keys.map((k) => dot(q, k) / scale)).map((w, j) => (causal && j > i ? 0 : w)),
  );
}
