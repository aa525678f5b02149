"""Hostile record files, tried systematically (Hypothesis): valid records mutated in their types,
sizes, nesting, text and numbers, with duplicated keys, NaN/Infinity literals, numbers beyond
float64 and deep nesting, fed to ``ExperimentRecord.from_json``, to the import command's
function (``import_paths``) and to the upload's (``UploadView.take``).

What must hold for every one: no exception but the documented ones (``RecordError`` from the
parser; none from an import, whose report says what it refused); a file is imported whole or not
at all (each record in it imported, skipped, refused, named as not valid or held back with them;
nothing imported when one is refused or not valid); and every record the store then holds is
schema-valid, is exactly what the core computes from its inputs, and its text holds no control
character or bidi override.
"""

from __future__ import annotations

import itertools
import json
import re
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import T0, make_record, sqlite_store, tampered_broken_run

from app.instructor import InstructorState
from app.instructor.upload import UploadView, upload_summary
from app.shared.parsing import TEXT_LIMITS, hidden_character
from app.store import RunStore
from app.store.exports import EXPORT_FORMAT
from app.store.importing import import_paths
from attention_core import attention_layer
from attention_core.recompute import recomputed_record
from attention_core.records import ExperimentRecord, RecordError, check_record

V1 = Path(__file__).resolve().parent / "records_v1" / "v1-vector-padding.json"
BASES = [
    make_record("mask_after_softmax").to_dict(),
    make_record("naive_softmax").to_dict(),
    ExperimentRecord.from_result(attention_layer(
        [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [-1.0, 1.0]]], np.eye(2), np.eye(2), np.eye(2), np.eye(2),
        padding_mask=[[True, True], [True, False]]), created_at=T0).to_dict(),
    json.loads(V1.read_text(encoding="utf-8")),
    tampered_broken_run()[1],
]
FRESH_IDS = (f"hostile-{n}" for n in itertools.count())

SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.sampled_from([0, -1, 2**63, 10**400, -(10**400)]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -1e308, 5e-324, -0.0, 1e-300]),
    st.text(max_size=20), st.sampled_from(["", "1", "NaN", "\u202e\u2066", "\x00", "\ud800", "\U0001f600" * 60]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
NUMBER = re.compile(r"(?<![\w.\"])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w\"])")
NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400]


def paths(node, here=()):
    """Every path into ``node`` (the root included)."""
    yield here
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from paths(child, (*here, key))


def at(node, path):
    for key in path:
        node = node[key]
    return node


def dumps(node, here=(), raw=None, duplicate=None) -> str:
    """JSON text of ``node``, with ``raw[path]`` written as it is, and ``duplicate = (path, key,
    value text, first)``: that object's key written twice (before or after its own)."""
    if raw and here in raw:
        return raw[here]
    if isinstance(node, dict):
        items = [f"{json.dumps(k)}: {dumps(v, (*here, k), raw, duplicate)}" for k, v in node.items()]
        if duplicate and duplicate[0] == here:
            extra = f"{json.dumps(duplicate[1])}: {duplicate[2]}"
            items = [extra, *items] if duplicate[3] else [*items, extra]
        return "{" + ", ".join(items) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(dumps(v, (*here, i), raw, duplicate) for i, v in enumerate(node)) + "]"
    return json.dumps(node)


@st.composite
def hostile_texts(draw) -> bytes:
    """A valid record (given a fresh id), mutated one to three times, as the bytes of a file."""
    data = json.loads(json.dumps(draw(st.sampled_from(BASES))))
    data["id"] = next(FRESH_IDS)
    raw: dict = {}
    duplicate = None
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths(data))))
        parent, key = (at(data, path[:-1]), path[-1]) if path else (None, None)
        kind = draw(st.sampled_from(["value", "delete", "add key", "grow", "shrink", "scale", "deep",
                                     "duplicate", "text"]))
        node = at(data, path)
        if kind == "value" and parent is not None:
            parent[key] = draw(VALUES)
        elif kind == "delete" and parent is not None:
            del parent[key]
        elif kind == "add key" and isinstance(node, dict):
            node[draw(st.text(max_size=12))] = draw(VALUES)
        elif kind == "grow" and isinstance(node, list) and node:
            node.append(json.loads(json.dumps(node[-1])))
        elif kind == "shrink" and isinstance(node, list) and node:
            node.pop(draw(st.integers(0, len(node) - 1)))
        elif kind == "scale" and parent is not None and type(node) in (int, float):
            parent[key] = node * draw(st.sampled_from([-1, 1 + 1e-12, 1.01, 10, 1e300, 0]))
        elif kind == "deep" and path:
            depth = draw(st.sampled_from([50, 1000, 100_000]))
            raw[path] = "[" * depth + "]" * depth
        elif kind == "duplicate" and isinstance(node, dict) and node:
            duplicate = (path, draw(st.sampled_from(list(node))), json.dumps(draw(VALUES)), draw(st.booleans()))
        elif kind == "text" and parent is not None:
            parent[key] = draw(st.text(st.characters(codec="utf-8"), max_size=300)) + draw(
                st.sampled_from(["", "\u202e", "\u2066", "\0", "\ud800", "<script>", "=1+1"]))
    text = dumps(data, raw=raw, duplicate=duplicate)
    if draw(st.booleans()):  # a NaN/Infinity literal or a number beyond float64 in place of a number
        numbers = list(NUMBER.finditer(text))
        if numbers:
            m = numbers[draw(st.integers(0, len(numbers) - 1))]
            text = text[:m.start()] + draw(st.sampled_from(NOT_FINITE)) + text[m.end():]
    return text.encode("utf-8", errors="surrogatepass")  # a lone surrogate: bytes that are not UTF-8


def assert_store_holds_only_what_the_core_computes(store: RunStore) -> None:
    for text in store.iter_texts():
        record = ExperimentRecord.from_json(text)  # the schema and the shape rules
        check_record(json.loads(text))
        assert recomputed_record(record) is record, record.id
        for name in TEXT_LIMITS:
            assert hidden_character(name, getattr(record, name)) is None, (record.id, name)


def assert_whole_or_nothing(report, runs_in_file: int) -> None:
    """A file not read adds nothing; a file read accounts for each of its runs, and adds nothing
    unless every one is imported or skipped."""
    if report.error is not None:
        assert not (report.imported or report.skipped or report.refused or report.invalid or report.held_back)
    else:
        assert len(report.imported) + len(report.skipped) + len(report.refused) + len(report.invalid) \
            + len(report.held_back) == runs_in_file
        assert report.taken or not report.imported


HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HOSTILE
@given(hostile_texts())
def test_the_parser_returns_a_record_or_raises_record_error(text):
    try:
        record = ExperimentRecord.from_json(text)
    except RecordError as error:
        assert str(error)
        return
    check_record(json.loads(record.to_json()))


@HOSTILE
@given(hostile_texts(), st.booleans())
def test_the_import_command_takes_a_hostile_file_whole_or_not_at_all(text, in_a_bundle):
    good = make_record("correct").to_dict() | {"id": next(FRESH_IDS)}
    if in_a_bundle:  # a class's bundle: a good run before it, whose import must not depend on it
        text = (f'{{"format": "{EXPORT_FORMAT}", "schema_version": 3, "runs": [{json.dumps(good)}, '.encode()
                + text + b'], "skipped": []}')
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "from-a-learner.json").write_bytes(text)
        with sqlite_store(Path(folder) / "store") as store:
            result = import_paths(store, [Path(folder) / "from-a-learner.json"])
            (report,) = result.files
            assert all(line for line in report.lines()) and result.summary()
            assert_whole_or_nothing(report, 2 if in_a_bundle else 1)
            assert {r.id for r in store.iter_summaries()} == set(report.imported)
            if in_a_bundle and report.read:
                assert good["id"] in report.imported + report.held_back
            assert_store_holds_only_what_the_core_computes(store)


@HOSTILE
@given(st.lists(hostile_texts(), min_size=1, max_size=3))
def test_the_upload_takes_hostile_files_whole_or_not_at_all_and_says_so(texts):
    with tempfile.TemporaryDirectory() as folder, sqlite_store(Path(folder)) as store:
        view = UploadView(state=InstructorState(store=store))
        files = {f"upload-{n}.json": text for n, text in enumerate(texts)}
        report = view.take(files)
        assert [f.name for f in report.files] == list(files)
        for file_report in report.files:
            assert_whole_or_nothing(file_report, 1)
        assert {r.id for r in store.iter_summaries()} == {i for f in report.files for i in f.imported}
        assert "data-testid='import-summary'" in upload_summary(report)
        assert_store_holds_only_what_the_core_computes(store)
