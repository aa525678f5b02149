"""Experiment records: schema-valid, strict JSON, exact round trips, text kept as data."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import jsonschema
import pytest
from store_helpers import T0, changed_copy, check_strict, make_record, make_result

from app.store import RunSummary
from attention_core import scaled_dot_product_attention
from attention_core.modes import FAILURE_MODES, run_title
from attention_core.records import (
    ID_PATTERN,
    SCHEMA_PATH,
    TEXT_LIMITS,
    ExperimentRecord,
    NewerSchemaError,
    RecordError,
    new_record_id,
    validate_record,
)

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def test_schema_is_valid_draft_2020_12_and_names_every_failure_mode():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    modes = SCHEMA["properties"]["settings"]["properties"]["failure_mode"]["enum"]
    assert modes == list(FAILURE_MODES)


@pytest.mark.parametrize("mode", list(FAILURE_MODES))
@pytest.mark.parametrize("d", [None, 1, 3])
@pytest.mark.parametrize("values", [True, False])
def test_every_failure_mode_makes_a_valid_record_that_round_trips(mode, d, values):
    result = make_result(mode, T=4, d=d, values=values)
    record = check_strict(ExperimentRecord.from_result(result, learner="Ada", label=mode))
    assert record.failure_mode == mode
    assert record.mask_after_softmax == (mode == "mask_after_softmax")
    assert record.T == 4
    assert record.failed_checks == result.failed_checks
    assert record.total_future_weight == result.total_future_weight
    assert record.min_row_sum == result.min_row_sum
    assert record.results["weights"] == result.weights.tolist()
    assert (record.results["output"] is None) == (not values)


# (mode, causal, T) -> title: every mode × causal on/off × one token or three.
_QUALIFIED = {
    ("correct", True, 1): "Correct, causal",
    ("correct", True, 3): "Correct, causal",
    ("correct", False, 1): "Correct, bidirectional (no causal mask)",
    ("correct", False, 3): "Correct, bidirectional (no causal mask)",
    ("mask_after_softmax", True, 1): "Mask after softmax (broken), nothing to mask: one token",
    ("mask_after_softmax", True, 3): "Mask after softmax (broken)",
    ("mask_after_softmax", False, 1): "Mask after softmax (broken), nothing to mask: bidirectional",
    ("mask_after_softmax", False, 3): "Mask after softmax (broken), nothing to mask: bidirectional",
}
RUN_TITLES = {
    (mode, causal, T): _QUALIFIED.get((mode, causal, T))
    or (FAILURE_MODES[mode].title + ("" if causal else ", bidirectional"))
    for mode in FAILURE_MODES for causal in (True, False) for T in (1, 3)
}


def test_the_title_table_names_other_modes_by_their_titles():
    assert RUN_TITLES["no_mask", True, 3] == "No mask"
    assert RUN_TITLES["no_mask", False, 1] == "No mask, bidirectional"
    assert RUN_TITLES["keys_as_values", False, 3] == "Keys mixed instead of values, bidirectional"
    assert len(RUN_TITLES) == len(FAILURE_MODES) * 4
    # Every run is told apart from every other kind of run by its title alone, one token aside.
    assert len({title for (_, _, T), title in RUN_TITLES.items() if T == 3}) == len(FAILURE_MODES) * 2


@pytest.mark.parametrize(("mode", "causal", "T"), list(RUN_TITLES))
def test_run_title_and_the_records_title(mode, causal, T):
    assert run_title(mode, causal, T) == RUN_TITLES[mode, causal, T]
    result = make_result(mode, T=T, causal=causal)
    record = check_strict(ExperimentRecord.from_result(result))
    assert record.title == RUN_TITLES[mode, causal, T]
    assert record.settings["mask_after_softmax"] is (mode == "mask_after_softmax")
    assert RunSummary.of(record).title == record.title


def test_run_title_refuses_an_unknown_mode_or_no_tokens():
    with pytest.raises(ValueError, match="unknown failure mode 'made_up'"):
        run_title("made_up", True, 3)
    with pytest.raises(ValueError, match="at least 1 token"):
        run_title("correct", True, 0)


def test_an_old_bidirectional_run_with_the_broken_toggle_reads_and_says_nothing_was_masked():
    # Saved before the page told the two apart: causal mask off, "mask after softmax" ticked.
    result = scaled_dot_product_attention([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0],
                                          causal=False, mask_after_softmax=True)
    old = ExperimentRecord.from_result(result).to_dict()
    assert old["settings"] == {"causal": False, "mask_after_softmax": True,
                               "failure_mode": "mask_after_softmax", "causal_alignment": None}
    record = check_strict(ExperimentRecord.from_json(json.dumps(old)))
    assert record.title == "Mask after softmax (broken), nothing to mask: bidirectional"
    assert record.failed_checks == ()  # nothing was masked, so nothing went wrong


def _json_types(value, path="$"):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_types(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_types(v, f"{path}[{i}]")
    else:
        yield path, type(value)


def test_record_holds_only_json_native_data():
    record = make_record()
    for container in (record.inputs, record.settings, record.results):
        for path, kind in _json_types(container):
            assert kind in (str, int, float, bool, type(None)), path


def test_masked_scores_are_null_beside_the_mask():
    result = scaled_dot_product_attention([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0])
    record = check_strict(ExperimentRecord.from_result(result))
    assert record.results["mask"] == [[True, False, False], [True, True, False], [True, True, True]]
    assert record.results["masked_scores"][0] == [1.0, None, None]
    assert record.results["scores"][0] == [1.0, 2.0, 9.0]
    assert [round(w, 3) for w in record.results["weights"][1]] == [0.269, 0.731, 0.0]


def test_naive_softmax_overflow_and_fully_masked_row_write_no_nan_or_infinity():
    # Key 1 is padding and the mask is causal, so row 1 sees no key at all (zero weights, as in
    # every mode); scores ~1e6 make the naive softmax overflow in row 2 (inf / inf).
    result = scaled_dot_product_attention(
        [1000.0, 1000.0, 1.0], [1000.0, 1000.0, 9.0], [10.0, 20.0, 100.0],
        padding_mask=[False, True, True], failure_mode="naive_softmax",
    )
    assert not (result.allowed[0].any())
    record = check_strict(ExperimentRecord.from_result(result))
    text = record.to_json()
    assert not re.search(r"NaN|Infinity", text)
    assert record.results["weights"][0] == [0.0, 0.0, 0.0]
    assert record.results["weights"][1] == [0.0, None, 0.0]
    assert record.results["row_sums"][:2] == [0.0, None]
    assert record.results["max_row_sum_error"] is None
    assert record.results["masked_scores"][0] == [None, None, None]
    assert {"finite_weights", "row_sums"} <= set(record.failed_checks)


def test_correct_mode_with_fully_masked_padding_row_has_zero_weights():
    result = scaled_dot_product_attention(
        [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], padding_mask=[False, True, True]
    )
    record = check_strict(ExperimentRecord.from_result(result))
    assert record.results["weights"][0] == [0.0, 0.0, 0.0]
    assert record.inputs["padding_mask"] == [False, True, True]
    assert "row_sums" in record.failed_checks


def test_extreme_floats_round_trip_exactly():
    result = scaled_dot_product_attention(
        [1e-300, 0.1, 1e150], [1e150, 1 / 3, -0.0], [5e-324, 1.0, 2.0]
    )
    record = check_strict(ExperimentRecord.from_result(result))
    assert record.inputs["values"][0] == 5e-324
    assert record.inputs["keys"][1] == 1 / 3


def test_id_and_created_at_are_server_generated_utc():
    record = ExperimentRecord.from_result(make_result())
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", record.id)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", record.created_at)
    assert abs(record.created_datetime - datetime.now(UTC)) < timedelta(minutes=1)
    ids = {ExperimentRecord.from_result(make_result()).id for _ in range(200)}
    assert len(ids) == 200


def test_created_at_is_converted_to_utc_and_must_be_aware():
    plus_two = timezone(timedelta(hours=2))
    record = ExperimentRecord.from_result(
        make_result(), created_at=datetime(2025, 1, 1, 12, 0, tzinfo=plus_two)
    )
    assert record.created_at == "2025-01-01T10:00:00.000000+00:00"
    with pytest.raises(ValueError, match="timezone"):
        ExperimentRecord.from_result(make_result(), created_at=datetime(2025, 1, 1))


HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1)) **bold**",
    "tab\tnew\nline\rcr\x00nul\x1bescape\x7f",
    "\u202eright-to-left\u200f mark \u2066isolate",
    '"quotes" \\ backslash , comma ; semicolon',
    "=HYPERLINK(\"http://x\")",
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("field", list(TEXT_LIMITS))
def test_free_text_is_kept_exactly_as_data(field, text):
    record = check_strict(ExperimentRecord.from_result(make_result(), **{field: text}))
    assert getattr(record, field) == text
    raw = record.to_json()
    assert "\x00" not in raw and "\x1b" not in raw  # JSON escapes control characters


@pytest.mark.parametrize("field", list(TEXT_LIMITS))
def test_text_at_the_limit_is_kept_and_beyond_it_refused_by_name(field):
    limit = TEXT_LIMITS[field]
    check_strict(ExperimentRecord.from_result(make_result(), **{field: "é" * limit}))
    with pytest.raises(ValueError, match=rf"{field} is too long: {limit + 1} characters"):
        ExperimentRecord.from_result(make_result(), **{field: "x" * (limit + 1)})
    too_long = make_record().to_dict() | {field: "x" * (limit + 1)}
    with pytest.raises(jsonschema.ValidationError):
        validate_record(too_long)


def test_limits_match_the_schema():
    for field, limit in TEXT_LIMITS.items():
        ref = SCHEMA["properties"][field]["$ref"].rsplit("/", 1)[1]
        assert SCHEMA["$defs"][ref]["maxLength"] == limit


def test_lone_surrogates_and_non_text_are_refused():
    with pytest.raises(ValueError, match="notes holds a lone surrogate"):
        ExperimentRecord.from_result(make_result(), notes="bad \ud800")
    with pytest.raises(ValueError, match="learner must be text"):
        ExperimentRecord.from_result(make_result(), learner=42)
    # An escaped lone surrogate in a file is refused on reading too.
    text = make_record().to_json().replace('"learner": null', '"learner": "\\ud800"')
    with pytest.raises(RecordError, match="surrogate"):
        ExperimentRecord.from_json(text)


def test_from_json_refuses_nan_and_infinity_tokens():
    text = make_record().to_json()
    for token in ("NaN", "Infinity", "-Infinity"):
        bad = text.replace('"total_future_weight": 0.0', f'"total_future_weight": {token}')
        assert bad != text
        with pytest.raises(RecordError, match="not valid JSON"):
            ExperimentRecord.from_json(bad)
    with pytest.raises(RecordError, match="not a number|must be"):
        ExperimentRecord.from_dict(make_record().to_dict() | {"results": {
            **make_record().results, "total_future_weight": float("nan")}})


def test_newer_schema_is_told_apart_from_foreign_json():
    newer = make_record().to_dict() | {"schema_version": 4, "something_new": True}
    with pytest.raises(NewerSchemaError, match="newer workbench") as caught:
        ExperimentRecord.from_dict(newer)
    assert caught.value.version == 4
    for foreign in ({"name": "package.json"}, [1, 2, 3], "text", None, {"schema_version": "1"},
                    {"schema_version": True}, {"schema_version": 0}):
        with pytest.raises(RecordError) as caught:
            ExperimentRecord.from_dict(foreign)
        assert not isinstance(caught.value, NewerSchemaError)
    for text in ("", "{", "\xff", b"\xff\xfe", "[]" * 100000):
        with pytest.raises(RecordError):
            ExperimentRecord.from_json(text)


def _mutations(data):
    """Broken copies of a valid record, each paired with a description."""
    def changed(path, value):
        return "/".join(map(str, path)) + f" = {value!r}"[:60], changed_copy(data, path, value)

    yield changed(("id",), "../etc/passwd")
    yield changed(("id",), "")
    yield changed(("id",), "x" * 65)
    yield changed(("created_at",), "yesterday")
    yield changed(("created_at",), "2025-01-31T09:15:02")
    yield changed(("label",), 7)
    yield changed(("notes",), KeyError)
    yield changed(("extra",), 1)
    yield changed(("inputs", "queries"), [])
    yield changed(("inputs", "queries"), ["1"])
    yield changed(("inputs", "queries"), [1.0] * 17)
    yield changed(("inputs", "d_k"), 0)
    yield changed(("inputs", "padding_mask"), [1, 0, 1])
    yield changed(("settings", "causal"), "yes")
    yield changed(("settings", "failure_mode"), "made_up")
    yield changed(("settings", "extra"), 1)
    yield changed(("results", "scores", 0, 0), None)
    yield changed(("results", "weights", 0, 0), "0.5")
    yield changed(("results", "weights", 0, 0), True)
    yield changed(("results", "mask", 0, 0), 1)
    yield changed(("results", "row_sums"), [])
    yield changed(("results", "checks", 0, "passed"), "yes")
    yield changed(("results", "checks", 0, "rows"), [0])
    yield changed(("results", "failed_checks"), [1])
    yield changed(("results", "output"), "none")


@pytest.mark.parametrize("mode", ["correct", "naive_softmax"])
def test_fast_check_and_json_schema_refuse_the_same_broken_records(mode):
    data = make_record(mode).to_dict()
    for what, broken in _mutations(data):
        with pytest.raises(jsonschema.ValidationError):
            validate_record(broken)
        with pytest.raises(RecordError):
            ExperimentRecord.from_dict(broken)
        assert what


def test_fast_check_also_refuses_shapes_a_schema_cannot_see():
    data = make_record().to_dict()
    data["results"]["weights"] = data["results"]["weights"][:2]  # 2×3 for T = 3
    validate_record(data)
    with pytest.raises(RecordError, match="results.weights"):
        ExperimentRecord.from_dict(data)


def test_from_dict_copies_its_input():
    data = make_record().to_dict()
    record = ExperimentRecord.from_dict(data)
    data["inputs"]["queries"][0] = 99.0
    assert record.inputs["queries"][0] != 99.0
    record.to_dict()["inputs"]["queries"][0] = 99.0
    assert record.inputs["queries"][0] != 99.0


def test_created_default_and_explicit_times():
    assert make_record(minutes=1).created_datetime == T0 + timedelta(minutes=1)


def test_importing_the_core_loads_neither_jsonschema_nor_panel():
    code = ("import sys, attention_core; "
            "print(sorted({'jsonschema', 'panel', 'bokeh'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_run_id_carries_128_random_bits_after_its_time():
    """A run's link reads it by its id, so the id must not be guessable: 32 hex digits from
    ``secrets`` after the time (a uuid4's 122 random bits at least), unique over many ids made in
    the same microsecond, and within the schema's pattern and the store's 64 characters."""
    at = datetime(2026, 12, 5, 21, 55, 1, 123456, tzinfo=UTC)
    ids = [new_record_id(at) for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for run_id in ids[:100]:
        time_part, random_part = run_id.split("-")
        assert time_part == "20261205T215501123456Z" and re.fullmatch(r"[0-9a-f]{32}", random_part)
        assert ID_PATTERN.fullmatch(run_id) and len(run_id) == 55 <= 64
    # Every one of the 128 bits varies: no digit is fixed (uuid4 fixes its version digit).
    randoms = [int(run_id.split("-")[1], 16) for run_id in ids]
    ones = [sum(r >> bit & 1 for r in randoms) for bit in range(128)]
    assert all(0.45 * len(ids) < n < 0.55 * len(ids) for n in ones)
    record = make_record(record_id=ids[0])
    jsonschema.validate(record.to_dict(), SCHEMA)
    # Ids made before (16 hex digits) still load.
    old = make_record(record_id="20250131T091502123456Z-3f2a9c0d1e2f3a4b")
    assert ExperimentRecord.from_json(old.to_json()) == old
