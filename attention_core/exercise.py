"""The exercise's test made from a saved run: a vitest (TypeScript) or pytest (Python) file.

The exercise of Self-attention, "Shapes and loops", is "Implement masked attention weights": stable
softmax and causal masking over ``number[][]``, with "one test using query and key values you
created in the workbench". So the function under test takes the queries and keys, not the scores (it
scales them itself)::

    maskedAttentionWeights(queries: number[][], keys: number[][], causal: boolean): number[][]

named once, in :data:`EXERCISE_FUNCTION`. A generated test holds the run's queries and keys
(``[T][d_k]``; scalar runs as ``[T][1]``; matrix-mode runs as their projections ``X W_Q`` and
``X W_K``), its causal setting and the *correct* weights for them (recomputed here, whatever mode
the run was saved in), every number as its shortest round-trip ``repr``, and asserts the shape,
each row sum, the zeros at future cells, and each weight within :data:`TOLERANCE`.

Left out: padding, batches and cross-attention. The exercise's function takes one sequence's
queries and keys and has no padding mask, so a run with a padded token, a batch of several
sequences or keys from a second sequence (whose causal mask needs an alignment the function
does not take) is refused with a sentence saying why (:class:`ExerciseCaseError`). W_O and an
ablation change neither Q nor K: such a run's test is that of its weights as saved (before the
ablation's change). Learner text (label, learner, notes) never enters the
generated code: only the run's id, time, title and numbers do.
"""

from __future__ import annotations

import functools
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from attention_core.attention import scaled_dot_product_attention
from attention_core.modes import get_mode

if TYPE_CHECKING:
    from attention_core.records import ExperimentRecord

Language = Literal["ts", "py"]
LANGUAGES: tuple[Language, ...] = ("ts", "py")
# Absolute, per weight and per row sum: float64 round-off in a learner's loop stays far below it.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class ExerciseFunction:
    """The function under test, in each language, and where the generated test imports it from.

    The TypeScript module is relative to ``exercises/attention/tests/`` (the exercise's test folder);
    the Python module is found on ``sys.path`` (the test's own folder under pytest).
    """

    typescript: str = "maskedAttentionWeights"
    typescript_module: str = "../attention"
    python: str = "masked_attention_weights"
    python_module: str = "masked_attention"

    @property
    def signature(self) -> str:
        """The TypeScript signature, as the README and the generated tests state it."""
        return f"{self.typescript}(queries: number[][], keys: number[][], causal: boolean): number[][]"


EXERCISE_FUNCTION = ExerciseFunction()


class ExerciseCaseError(ValueError):
    """No exercise test can be made from this run; ``str(error)`` says why, naming the token."""


@dataclass(frozen=True)
class ExerciseCase:
    """What a generated test checks: one run's inputs and the correct weights for them.

    Attributes
    ----------
    run_id, created_at, title : str
        The run's id, time (UTC) and title (:attr:`ExperimentRecord.title`).
    failure_mode : str
        The mode the run was saved in; the expected weights are the correct ones regardless.
    input_mode : {"scalar", "vector", "matrix"}
    causal : bool
    queries, keys : list of list of float, shape (T, d_k)
    expected : list of list of float, shape (T, T)
        Correct masked scaled dot-product attention weights (float64, :mod:`attention_core`).
    """

    run_id: str
    created_at: str
    title: str
    failure_mode: str
    input_mode: str
    causal: bool
    queries: list[list[float]]
    keys: list[list[float]]
    expected: list[list[float]]

    @property
    def T(self) -> int:
        return len(self.queries)

    @property
    def d_k(self) -> int:
        return len(self.queries[0])


def exercise_case(record: ExperimentRecord) -> ExerciseCase:
    """The queries, keys, causal setting and correct weights of a saved run.

    Raises
    ------
    ExerciseCaseError
        The run holds a batch of several sequences or is cross-attention (the exercise's function
        takes one sequence), or it masks a padded token (the function has no padding mask).
    """
    inputs = record.run_inputs
    signature = f"{EXERCISE_FUNCTION.typescript}(queries, keys, causal)"
    if inputs.B > 1:
        raise ExerciseCaseError(
            f"No test from run {record.id}: it holds a batch of {inputs.B} sequences, and the exercise's "
            f"{signature} takes one sequence. Save one of them with batch size 1 to get its test.")
    if inputs.T_k != inputs.T or inputs.x_kv is not None:
        raise ExerciseCaseError(
            f"No test from run {record.id}: it is cross-attention ({inputs.T} queries, {inputs.T_k} keys "
            f"from a second sequence), and the exercise's {signature} takes the queries and keys of one "
            "sequence, whose causal mask is square. Save a self-attention run to get its test.")
    if inputs.padding_mask is not None and not all(inputs.padding_mask):
        padded = [str(i) for i, real in enumerate(inputs.padding_mask, start=1) if not real]
        tokens = f"token {padded[0]}" if len(padded) == 1 else f"tokens {', '.join(padded)}"
        raise ExerciseCaseError(
            f"No test from run {record.id}: it marks {tokens} as padding, and the exercise's "
            f"{EXERCISE_FUNCTION.typescript}(queries, keys, causal) has no padding mask. Save the run "
            "again with no padding ticked to get its test.")
    T = inputs.T
    queries = np.asarray(inputs.queries, dtype=np.float64).reshape(T, -1)  # [T, d_k]
    keys = np.asarray(inputs.keys, dtype=np.float64).reshape(T, -1)  # [T, d_k]
    correct = scaled_dot_product_attention(queries, keys, causal=inputs.causal)
    return ExerciseCase(
        run_id=record.id, created_at=record.created_at, title=record.title,
        failure_mode=inputs.failure_mode, input_mode=inputs.input_mode, causal=inputs.causal,
        queries=queries.tolist(), keys=keys.tolist(), expected=correct.weights.tolist())


def case_filename(record: ExperimentRecord, lang: Language) -> str:
    """A file name for the generated test that vitest or pytest collects, e.g. ``run-<id>.test.ts``."""
    if lang == "ts":
        return f"run-{record.id}.test.ts"
    return f"test_run_{record.id.replace('-', '_')}.py"


def render_test(record: ExperimentRecord, lang: Language) -> str:
    """The exercise's test for ``record``: a vitest file (``"ts"``) or a pytest file (``"py"``).

    Raises
    ------
    ExerciseCaseError
        As :func:`exercise_case`.
    ValueError
        ``lang`` is not ``"ts"`` or ``"py"``.
    """
    if lang not in LANGUAGES:
        raise ValueError(f"language must be 'ts' or 'py', not {lang!r}")
    case = exercise_case(record)
    return (_typescript if lang == "ts" else _python)(case, _about(case, lang))


def _about(case: ExerciseCase, lang: Language) -> list[str]:
    """The header's lines: what the test is, where it came from, what it expects and why."""
    f = EXERCISE_FUNCTION
    name = f.typescript if lang == "ts" else f.python
    tolerance = f"{TOLERANCE:.0e}".replace("e-0", "e-")
    made = "The attention exercise's test (Self-attention, \"Implement masked attention weights\"), made by"
    # The command on a line of its own: never cut inside it (a run id is 55 characters).
    command = f"    attention-workbench test-case {case.run_id} --lang {lang}"
    source = f"from the run saved at {case.created_at}: {case.title}, T = {case.T} tokens, d_k = {case.d_k}."
    signature = f.signature if lang == "ts" else f"{f.python}(queries, keys, causal) -> weights"
    paragraphs = [
        ("Queries and keys are [T][d_k], one vector per token; weights are [T][T], row i the query's "
         "position and column j the key's (source) position" + ("." if lang == "ts" else
                                                                ", as lists of lists of float.")),
        ("Expected: softmax of each row of q_i . k_j / sqrt(d_k), future cells (j > i) set to -Infinity "
         f"before softmax when causal, in float64; each weight and each row sum within {tolerance}."),
    ]
    if case.input_mode == "matrix":
        paragraphs.append("The queries and keys are the run's projections X W_Q and X W_K (matrix mode).")
    if case.failure_mode != "correct":
        mode = get_mode(case.failure_mode)
        paragraphs.append(f"The run was saved in the broken mode \"{mode.title}\" ({mode.description}) "
                          "This test expects the CORRECT weights for the run's queries and keys, not the "
                          "weights the run showed.")
    paragraphs.append(
        f"It imports {name} from \"{f.typescript_module}\" (this file in exercises/attention/tests/); "
        "change that line if your file is named otherwise." if lang == "ts" else
        f"It imports {name} from the module {f.python_module} (put it beside this file).")
    wrap = functools.partial(textwrap.wrap, width=96, break_on_hyphens=False)
    return [*wrap(made), command, *wrap(source), "Function under test:", f"    {signature}",
            *(line for p in paragraphs for line in wrap(p))]


def _rows(matrix: list[list[float]], indent: str) -> str:
    """One row per line, each number its shortest round-trip repr (exact in Python and JavaScript)."""
    return "\n".join(f"{indent}[{', '.join(repr(float(x)) for x in row)}]," for row in matrix)


def _fill(template: str, **fields: str) -> str:
    """``template`` with each ``<<name>>`` replaced: the templates are code full of braces."""
    for name, text in fields.items():
        template = template.replace(f"<<{name}>>", text)
    return template


def _typescript(case: ExerciseCase, about: list[str]) -> str:
    f = EXERCISE_FUNCTION
    return _fill(
        _TYPESCRIPT, about="\n".join(f"// {line}" for line in about), function=f.typescript,
        module=f.typescript_module, run_id=case.run_id, T=str(case.T), queries=_rows(case.queries, "  "),
        keys=_rows(case.keys, "  "), expected=_rows(case.expected, "  "), causal=str(case.causal).lower(),
        tolerance=repr(TOLERANCE), future=_TYPESCRIPT_FUTURE if case.causal else "")


def _python(case: ExerciseCase, about: list[str]) -> str:
    f = EXERCISE_FUNCTION
    return _fill(
        _PYTHON, about="\n".join(about), function=f.python, module=f.python_module, T=str(case.T),
        queries=_rows(case.queries, "    "), keys=_rows(case.keys, "    "),
        expected=_rows(case.expected, "    "), causal=str(case.causal), tolerance=repr(TOLERANCE),
        future=_PYTHON_FUTURE if case.causal else "")


# The row sums are asserted in a test of their own whose message says "row sum": the invariant
# that the starter's bug (masking after softmax without renormalising) breaks.
_TYPESCRIPT = """<<about>>
import { describe, expect, it } from "vitest";
import { <<function>> } from "<<module>>";

const queries: number[][] = [
<<queries>>
];
const keys: number[][] = [
<<keys>>
];
const causal = <<causal>>;
const expected: number[][] = [
<<expected>>
];
const TOLERANCE = <<tolerance>>;
const attend = () => <<function>>(queries, keys, causal);

describe("<<function>> on run <<run_id>>", () => {
  it("returns [T][T] weights: one row per query, one column per key", () => {
    const weights = attend();
    expect(weights.length, "number of rows (one per query)").toBe(<<T>>);
    weights.forEach((row, i) => expect(row.length, `row ${i + 1}: number of columns (one per key)`).toBe(<<T>>));
  });

  it("makes every row sum to 1", () => {
    attend().forEach((row, i) => {
      const rowSum = row.reduce((a, b) => a + b, 0);
      const message = `row sum of row ${i + 1} is ${rowSum}, expected 1 within ${TOLERANCE}`;
      expect(Math.abs(rowSum - 1) <= TOLERANCE, message).toBe(true);
    });
  });
<<future>>
  it("gives the correct weight in every cell, within TOLERANCE", () => {
    const weights = attend();
    expected.forEach((row, i) => row.forEach((e, j) => {
      const w = weights[i][j];
      const message = `weight of row ${i + 1}, column ${j + 1} is ${w}, expected ${e} within ${TOLERANCE}`;
      expect(Math.abs(w - e) <= TOLERANCE, message).toBe(true);
    }));
  });
});
"""
_TYPESCRIPT_FUTURE = """
  it("gives every future cell (column > row) exactly 0", () => {
    attend().forEach((row, i) => row.forEach((w, j) => {
      const message = `weight of row ${i + 1} on future token ${j + 1} is ${w}, expected 0`;
      if (j > i) expect(w === 0, message).toBe(true);
    }));
  });
"""
_PYTHON = '''"""<<about>>
"""

import pytest
from <<module>> import <<function>>

QUERIES = [
<<queries>>
]
KEYS = [
<<keys>>
]
CAUSAL = <<causal>>
EXPECTED = [
<<expected>>
]
TOLERANCE = <<tolerance>>


@pytest.fixture
def weights():
    return <<function>>(QUERIES, KEYS, CAUSAL)


def test_shape(weights):
    assert len(weights) == <<T>>, "number of rows (one per query)"
    for i, row in enumerate(weights, start=1):
        assert len(row) == <<T>>, f"row {i}: number of columns (one per key)"


def test_row_sums(weights):
    for i, row in enumerate(weights, start=1):
        row_sum = sum(row)
        assert abs(row_sum - 1) <= TOLERANCE, f"row sum of row {i} is {row_sum!r}, expected 1 within {TOLERANCE}"
<<future>>

def test_weights(weights):
    for i, (row, expected_row) in enumerate(zip(weights, EXPECTED), start=1):
        for j, (w, e) in enumerate(zip(row, expected_row), start=1):
            message = f"weight of row {i}, column {j} is {w!r}, expected {e!r} within {TOLERANCE}"
            assert abs(w - e) <= TOLERANCE, message
'''
_PYTHON_FUTURE = """

def test_future_cells_are_zero(weights):
    for i, row in enumerate(weights, start=1):
        for j, w in enumerate(row, start=1):
            if j > i:
                assert w == 0, f"weight of row {i} on future token {j} is {w!r}, expected 0"
"""
