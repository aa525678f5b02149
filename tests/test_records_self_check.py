"""The experiment record's optional ``self_check`` (issue 24, Check yourself): the learner's answer
to Q1 of Self-Attention in Matrix Form saved with a run. Version 3 only, absent without an answer
(so every record written before stays valid and writes back byte for byte), exact round trips,
refusals naming the field, and the store keeping it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from store_helpers import OWNER, T0, changed_copy, check_strict, make_result

from app.store import RunStore, export_json, sqlite_url
from attention_core.records import ExperimentRecord, RecordError, validate_record

ANSWER = {"question": "softmax_axis", "choice": "Across the five columns within each query row", "correct": True}
HERE = Path(__file__).resolve().parent


def answered(answer: dict | None = ANSWER) -> ExperimentRecord:
    return check_strict(ExperimentRecord.from_result(make_result(), created_at=T0, prediction="p",
                                                     self_check=answer))


def test_a_checked_answer_is_saved_and_round_trips_exactly():
    record = answered()
    assert record.self_check == ANSWER and record.schema_version == 3
    data = json.loads(record.to_json())
    assert data["self_check"] == ANSWER
    validate_record(data)
    assert ExperimentRecord.from_json(record.to_json()).to_json() == record.to_json()
    wrong = answered({**ANSWER, "choice": "Across all 25 scores at once", "correct": False})
    assert wrong.self_check["correct"] is False


def test_a_record_without_an_answer_has_no_self_check_key_and_still_validates():
    record = answered(None)
    assert record.self_check is None
    assert "self_check" not in json.loads(record.to_json()) and "self_check" not in record.to_dict()
    validate_record(record.to_dict())


OLDER = sorted((HERE / "records_v1").glob("*.json")) + sorted((HERE / "records_v2").glob("*.json"))


@pytest.mark.parametrize("path", OLDER, ids=lambda p: p.name)
def test_older_records_still_read_and_write_back_without_self_check(path):
    text = path.read_text(encoding="utf-8")
    record = ExperimentRecord.from_json(text)
    assert record.self_check is None
    assert json.loads(record.to_json()) == json.loads(text)
    # Versions 1 and 2 were written before the field: it is not theirs to hold.
    with pytest.raises(jsonschema.ValidationError):
        validate_record({**json.loads(text), "self_check": ANSWER})


BROKEN = {
    "a missing key": {"question": "softmax_axis", "choice": "x"},
    "an extra key": {**ANSWER, "at": "now"},
    "a question that is not an id": {**ANSWER, "question": "Q1. Identify the softmax axis"},
    "an empty choice": {**ANSWER, "choice": ""},
    "a choice too long": {**ANSWER, "choice": "x" * 201},
    "correct as text": {**ANSWER, "correct": "yes"},
    "null": None,
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_self_check_is_refused_naming_the_field(case):
    data = answered().to_dict()
    broken = changed_copy(data, ("self_check",), BROKEN[case])
    with pytest.raises(RecordError, match="self_check"):
        ExperimentRecord.from_dict(broken)
    if BROKEN[case] is not None:
        with pytest.raises(RecordError, match="self_check"):
            ExperimentRecord.from_result(make_result(), self_check=BROKEN[case])


def test_a_lone_surrogate_in_the_choice_is_refused():
    broken = changed_copy(answered().to_dict(), ("self_check", "choice"), "row \ud800")
    with pytest.raises(RecordError, match="self_check.choice"):
        ExperimentRecord.from_dict(broken)


def test_the_store_keeps_and_exports_the_answer(tmp_path):
    store = RunStore(sqlite_url(tmp_path / "runs.db"))
    with_answer, without = answered(), answered(None)
    store.save(with_answer, key_hash=OWNER)
    store.save(ExperimentRecord.from_result(make_result(seed=1), prediction="p"))
    assert store.get(with_answer.id) == with_answer
    exported = json.loads(export_json(list(store.iter_records())))
    assert [r.get("self_check") for r in exported["runs"]] == [ANSWER, None]
    assert without.self_check is None
    # Attaching an explanation keeps the answer.
    updated = store.update_explanation(with_answer.id, "rows sum to 1", key_hash=OWNER)
    assert updated.self_check == ANSWER and store.get(with_answer.id).self_check == ANSWER
