"""The exercise's test made from a run (issue 16): what it holds, and that it is a real test.

The generated TypeScript runs under vitest (one process for every file) and the Python under
pytest (a subprocess), each against a correct implementation (every test passes) and against the
starter's bug of the exercise of Self-attention, "Shapes and loops": masking after softmax without
renormalising (the row-sum test fails, its message naming the row sum). Node and vitest come from
``tests/find_node.py``; without them these tests fail, never skip.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
from exercise_runner import IMPLEMENTATIONS, ROW_SUM_TEST, WEIGHTS_TEST, lay_out, run_pytest, run_vitest

from app.cli import main
from app.store import RunStore, sqlite_url
from attention_core.ablation import ablate
from attention_core.attention import scaled_dot_product_attention
from attention_core.exercise import (
    EXERCISE_FUNCTION,
    LANGUAGES,
    TOLERANCE,
    ExerciseCaseError,
    case_filename,
    render_test,
)
from attention_core.layer import attention_layer
from attention_core.projection import self_attention
from attention_core.records import ExperimentRecord


def _record(result, name: str) -> ExperimentRecord:
    return ExperimentRecord.from_result(result, record_id=name, label=name)


def _runs() -> dict[str, ExperimentRecord]:
    """Runs of every input mode, causal and not, correct and broken; ids say which."""
    rng = np.random.default_rng(16)
    vectors_q, vectors_k = rng.normal(size=(2, 5, 3)).round(3)
    x = [[1, 0], [0, 1], [1, 1], [-1, 1]]  # the four-token trace
    return {r.id: r for r in (
        _record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9]), "worked-row"),
        _record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], failure_mode="mask_after_softmax"),
                "worked-row-mask-after-softmax"),
        _record(scaled_dot_product_attention(vectors_q, vectors_k, failure_mode="no_scaling"), "vectors-no-scaling"),
        _record(self_attention(x, np.eye(2), np.eye(2), [[1, 1], [1, -1]]), "matrix-four-token"),
        _record(scaled_dot_product_attention([1, 1, 1], [1000, 999, 998], failure_mode="naive_softmax"),
                "large-scores-naive"),
        _record(scaled_dot_product_attention([0.5, -1, 2], [1, 2, 9], failure_mode="wrong_axis"), "wrong-axis"),
        _record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], causal=False), "bidirectional"),
    )}


RUNS = _runs()
CAUSAL = [run_id for run_id, r in RUNS.items() if r.causal]


def _literal(text: str, name: str) -> list:
    """The matrix assigned to ``name`` in a generated file (Python or TypeScript)."""
    found = re.search(rf"^(?:const )?{name}(?:: number\[\]\[\])? = (\[.*?^\]);?$", text, re.M | re.S)
    return ast.literal_eval(found.group(1))


def _correct_weights(record: ExperimentRecord) -> np.ndarray:
    q = np.asarray(record.inputs["queries"], dtype=float).reshape(record.T, -1)
    k = np.asarray(record.inputs["keys"], dtype=float).reshape(record.T, -1)
    return scaled_dot_product_attention(q, k, causal=record.causal).weights


@pytest.mark.parametrize("run_id", RUNS)
@pytest.mark.parametrize("lang", ["ts", "py"])
def test_numbers_are_the_runs_inputs_and_the_correct_weights_exactly(run_id, lang):
    record = RUNS[run_id]
    text = render_test(record, lang)
    names = {"ts": ("queries", "keys", "expected"), "py": ("QUERIES", "KEYS", "EXPECTED")}[lang]
    queries, keys, expected = (_literal(text, name) for name in names)
    # Scalar runs become [T][1]; matrix runs give their projections X W_Q and X W_K, as saved.
    assert queries == np.asarray(record.inputs["queries"]).reshape(record.T, -1).tolist()
    assert keys == np.asarray(record.inputs["keys"]).reshape(record.T, -1).tolist()
    assert np.array_equal(expected, _correct_weights(record))  # repr round-trips exactly
    assert ("const causal = true;" if record.causal else "const causal = false;") in text or lang == "py"
    assert (f"CAUSAL = {record.causal}") in text or lang == "ts"
    if record.failure_mode == "correct":
        assert expected == record.results["weights"]


@pytest.mark.parametrize("run_id", RUNS)
def test_a_broken_run_expects_the_correct_weights_and_says_so(run_id):
    record = RUNS[run_id]
    text = render_test(record, "ts")
    header = " ".join(line.removeprefix("// ") for line in text.splitlines() if line.startswith("//"))
    broken = record.failure_mode != "correct"
    assert ("This test expects the CORRECT weights for the run's queries and keys" in header) == broken
    assert (f'saved in the broken mode "{record.title}"' in header) == broken
    assert ("projections X W_Q and X W_K (matrix mode)" in header) == (record.run_inputs.input_mode == "matrix")
    if run_id == "worked-row-mask-after-softmax":
        saved = record.results["weights"][1]  # the broken row 2 the learner saw: sums to ~0.00125
        assert sum(saved) < 0.01 and _literal(text, "expected")[1] == pytest.approx([0.269, 0.731, 0.0], abs=1e-3)


def test_the_function_under_test_is_named_in_one_place():
    repo = Path(__file__).resolve().parent.parent
    module = (repo / "attention_core" / "exercise.py").read_text()
    code = module.replace(ast.get_docstring(ast.parse(module)), "")  # the docstring may quote it
    others = [p.read_text() for p in [*repo.glob("app/**/*.py"), *repo.glob("attention_core/*.py")]
              if p.name != "exercise.py"]
    for name in (EXERCISE_FUNCTION.typescript, EXERCISE_FUNCTION.python):
        assert code.count(name) == 1 and not any(name in text for text in others), name
    ts, py = render_test(RUNS["worked-row"], "ts"), render_test(RUNS["worked-row"], "py")
    assert 'import { maskedAttentionWeights } from "../attention";' in ts
    assert EXERCISE_FUNCTION.signature in ts
    assert "from masked_attention import masked_attention_weights" in py
    assert f"TOLERANCE = {TOLERANCE!r}" in py and f"const TOLERANCE = {TOLERANCE!r};" in ts


def test_a_run_with_padding_is_refused_naming_the_tokens():
    padded = _record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], padding_mask=[True, False, False]), "padded")
    with pytest.raises(ExerciseCaseError, match=r"marks tokens 2, 3 as padding.*has no padding mask"):
        render_test(padded, "py")
    no_padding = _record(scaled_dot_product_attention([1, 1, 1], [1, 2, 9], padding_mask=[True] * 3), "all-real")
    assert _literal(render_test(no_padding, "py"), "EXPECTED") == RUNS["worked-row"].results["weights"]


X_TRACE = [[1, 0], [0, 1], [1, 1], [-1, 1]]


@pytest.mark.parametrize(("layer", "words"), [
    (lambda: attention_layer([X_TRACE, X_TRACE[::-1]], np.eye(2), np.eye(2), np.eye(2)),
     r"holds a batch of 2 sequences, and the exercise's maskedAttentionWeights\(queries, keys, causal\) "
     "takes one sequence"),
    (lambda: attention_layer(X_TRACE[:2], np.eye(2), np.eye(2), x_kv=X_TRACE, causal_alignment="top_left"),
     r"is cross-attention \(2 queries, 4 keys from a second sequence\).*causal mask is square"),
    (lambda: attention_layer(X_TRACE[:2], np.eye(2), np.eye(2), x_kv=X_TRACE[2:]),
     r"is cross-attention \(2 queries, 2 keys from a second sequence\)"),
], ids=["batch", "cross-attention", "cross-attention, T_k = T"])
def test_a_batch_or_cross_attention_run_is_refused_saying_why(layer, words):
    record = _record(layer(), "layer")
    for lang in LANGUAGES:
        with pytest.raises(ExerciseCaseError, match=rf"No test from run layer: it {words}"):
            render_test(record, lang)


def test_w_o_and_an_ablation_leave_the_test_of_the_runs_weights():
    plain = RUNS["matrix-four-token"]
    layer = attention_layer(X_TRACE, np.eye(2), np.eye(2), [[1, 1], [1, -1]], [[2, 0], [1, 1]])
    with_w_o = ExperimentRecord.from_result(layer, record_id=plain.id, created_at=plain.created_datetime,
                                            label=plain.label)
    ablated = ExperimentRecord.from_result(layer, ablation=ablate(layer, "W_Q", "scale", factor=3.0),
                                           record_id=plain.id, created_at=plain.created_datetime, label=plain.label)
    for lang in LANGUAGES:
        assert render_test(with_w_o, lang) == render_test(ablated, lang) == render_test(plain, lang)


def test_file_names_are_collected_by_vitest_and_pytest():
    assert case_filename(RUNS["worked-row"], "ts") == "run-worked-row.test.ts"
    assert case_filename(RUNS["worked-row"], "py") == "test_run_worked_row.py"


@pytest.fixture
def runs_dir(tmp_path) -> Path:
    (tmp_path / "runs").mkdir()
    with RunStore(sqlite_url(tmp_path / "runs" / "runs.db")) as store:  # what --runs-dir DIR still means
        for record in RUNS.values():
            store.save(record)
        store.save(_record(scaled_dot_product_attention([1, 2], [3, 4], padding_mask=[True, False]), "padded"))
        store.save(_record(attention_layer([[[1.0], [2.0]], [[0.0], [1.0]]], [[1.0]], [[1.0]]), "batch"))
    return tmp_path / "runs"


def test_cli_writes_the_test_to_stdout_or_a_file(runs_dir, tmp_path, capsys):
    assert main(["test-case", "worked-row", "--lang", "py", "--runs-dir", str(runs_dir)]) == 0
    assert capsys.readouterr().out == render_test(RUNS["worked-row"], "py")
    target = tmp_path / "run.test.ts"
    args = ["test-case", "matrix-four-token", "--lang", "ts", "--runs-dir", str(runs_dir), "-o", str(target)]
    assert main(args) == 0
    assert target.read_text() == render_test(RUNS["matrix-four-token"], "ts")
    assert f"to {target}" in capsys.readouterr().err


@pytest.mark.parametrize(("run_id", "message"), [
    ("nope", "no run nope in"),
    ("padded", "marks token 2 as padding"),
    ("batch", "holds a batch of 2 sequences"),
    ("../x", "not a run id"),
])
def test_cli_refuses_with_a_message(runs_dir, capsys, run_id, message):
    assert main(["test-case", run_id, "--lang", "ts", "--runs-dir", str(runs_dir)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err


def test_cli_refuses_a_missing_runs_directory(tmp_path, capsys):
    assert main(["test-case", "worked-row", "--lang", "ts", "--runs-dir", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err


def _starter_breaks(run_id: str) -> bool:
    """Whether the starter's bug shows on this run: some row's visible weights sum short of 1."""
    r = RUNS[run_id]
    q, k = (np.asarray(r.inputs[f], dtype=float).reshape(r.T, -1) for f in ("queries", "keys"))
    return scaled_dot_product_attention(q, k, causal=r.causal, mask_after_softmax=True).max_row_sum_error > TOLERANCE


def _check(results, lang: str) -> None:
    for run_id, record in RUNS.items():
        name = case_filename(record, lang)
        correct, starter = results[("correct", name)], results[("starter", name)]
        assert all(status == "passed" for status, _ in correct.values()), (run_id, correct)
        assert len(correct) == (4 if record.causal else 3)  # shape, row sums, [future zeros], weights
        if not _starter_breaks(run_id):  # no causal mask: masking after softmax changes nothing
            assert run_id == "bidirectional" and correct.keys() == starter.keys()
            assert all(status == "passed" for status, _ in starter.values()), (run_id, starter)
            continue
        failed = {title for title, (status, _) in starter.items() if status == "failed"}
        assert failed == {ROW_SUM_TEST[lang], WEIGHTS_TEST[lang]}, (run_id, starter)
        assert re.search(r"row sum of row \d+ is [0-9.e-]+, expected 1 within 1e-0?9",
                         starter[ROW_SUM_TEST[lang]][1]), starter[ROW_SUM_TEST[lang]][1]


def _generated(lang: str) -> dict[str, dict[str, str]]:
    files = {case_filename(r, lang): render_test(r, lang) for r in RUNS.values()}
    return {impl: files for impl in IMPLEMENTATIONS}


def test_generated_typescript_passes_a_correct_implementation_and_fails_the_starters_bug(tmp_path):
    lay_out(tmp_path, _generated("ts"))
    _check(run_vitest(tmp_path), "ts")


def test_generated_python_passes_a_correct_implementation_and_fails_the_starters_bug(tmp_path):
    lay_out(tmp_path, _generated("py"))
    _check({k: v for impl in IMPLEMENTATIONS for k, v in run_pytest(tmp_path, impl).items()}, "py")


def test_runs_used_here_cover_every_input_mode_and_show_the_bug():
    assert {r.run_inputs.input_mode for r in RUNS.values()} == {"scalar", "vector", "matrix"}
    assert all(_starter_breaks(run_id) for run_id in CAUSAL)
    assert json.dumps(RUNS["large-scores-naive"].results["weights"]).count("null") > 0  # naive overflowed


def test_the_saved_runs_view_shows_the_chosen_runs_test_in_either_language(tmp_path):
    from app.learner.page import LearnerPage

    page = LearnerPage(store=RunStore(sqlite_url(tmp_path / "runs.db")))
    s, view = page.state, page.runs.exercise_test
    assert (view.text, view.run, view.copy.disabled) == ("", None, True)
    s.param.update(prediction="token 2 cannot read token 3")
    s.apply_preset("worked_row")
    first = s.save_run()
    s.mask_after_softmax = True
    second = s.save_run()
    # The newest run is chosen, in TypeScript; the area and the download hold its test.
    assert view.run_select.options == {"Run 1: Correct, causal · 3 tokens": 0,
                                       "Run 2: Mask after softmax (broken) · 3 tokens": 1}
    assert view.run == 1 and view.text == view.area.value == render_test(second, "ts")
    assert view.download.filename == case_filename(second, "ts") and view._file().read() == view.text
    assert not view.copy.disabled and not view.download.disabled
    view.run_select.value = 0
    view.language = "py"
    assert view.text == view.area.value == render_test(first, "py")
    assert view.download.filename == case_filename(first, "py")
    view.copy_status.text = "<div>Copied</div>"  # what the browser's Copy as test wrote
    s.set_padding(2, True)
    padded = s.save_run()
    # A run with padding has no test: the page says why and there is nothing to copy.
    assert view.run == 2 and view.text == view.area.value == "" and view.copy.disabled
    assert f"No test from run {padded.id}: it marks token 3 as padding" in view.message
    assert view.problem.visible and view.copy_status.text == ""
