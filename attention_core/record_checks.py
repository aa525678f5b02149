"""Is this JSON an experiment record? Fast structural checks, and the JSON Schema behind them.

:func:`check_record` mirrors ``assets/experiment-record.schema.json`` in plain Python, because
``jsonschema`` takes milliseconds per record and a class's store is listed often;
:func:`validate_record` runs the schema itself (tests hold the two to each other). Both are
used by :mod:`attention_core.records` and :mod:`attention_core.store`.

Left out: building records (see :mod:`attention_core.records`).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from attention_core.modes import FAILURE_MODES
from attention_core.validation import MAX_TOKENS

SCHEMA_VERSION = 2  # what new records are written as; every version from 1 up to it is read
READABLE_VERSIONS = (1, 2)
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "assets" / "experiment-record.schema.json"
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
TEXT_LIMITS = {"learner": 100, "label": 100, "prediction": 2000, "explanation": 2000, "notes": 2000}
MAX_WIDTH = 64  # numbers per token (d_k, d_v) a record holds; the schema says the same
_CREATED_AT = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})", re.ASCII
)
_SURROGATE = re.compile("[\ud800-\udfff]")


class RecordError(ValueError):
    """Data that is not a valid experiment record (corrupt, foreign, malformed or too long).

    Parameters
    ----------
    message : str
        One sentence naming the offending key or field, e.g. ``"learner is too long: ..."``.
    """


class NewerSchemaError(RecordError):
    """A record written by a newer workbench (``schema_version`` above this one's).

    Attributes
    ----------
    version : int
        The record's schema version.
    """

    def __init__(self, version: int) -> None:
        super().__init__(
            f"written by a newer workbench (schema version {version}; "
            f"this one reads versions 1 to {SCHEMA_VERSION})"
        )
        self.version = version


def check_text(field: str, value: object) -> None:
    """Refuse free text that a record cannot hold.

    Raises
    ------
    RecordError
        ``value`` is not a str or None, longer than ``TEXT_LIMITS[field]`` characters, or holds
        lone surrogates; the message names the field.
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise RecordError(f"{field} must be text, got {type(value).__name__}")
    if len(value) > TEXT_LIMITS[field]:
        raise RecordError(
            f"{field} is too long: {len(value)} characters, at most {TEXT_LIMITS[field]}"
        )
    if _SURROGATE.search(value):
        raise RecordError(f"{field} holds a lone surrogate, which is not text")


def _fail(where: str, expected: str) -> RecordError:
    return RecordError(f"not an experiment record: {where} must be {expected}")


def _object(value: Any, keys: tuple[str, ...], where: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(where, "an object")
    if set(value) != set(keys):
        odd = sorted(set(value) ^ set(keys))
        raise _fail(where, f"an object with the keys {', '.join(keys)} (not: {', '.join(odd)})")
    return value


def _is_num(x: Any, nullable: bool) -> bool:
    return (nullable and x is None) or _leaves_ok([x], "number")


def _array(value: Any, shape: tuple[int | None, ...], where: str, kind: str = "number") -> tuple:
    """Check a rectangular nested list of ``shape`` and return the shape found.

    ``None`` in ``shape`` is any length from 1 to 16 on the first axis (tokens), 64 on the others.
    """
    found, level = [], [value]
    for axis, n in enumerate(shape):
        limit = n or (MAX_TOKENS if axis == 0 else MAX_WIDTH)
        lengths = {len(v) if type(v) is list else -1 for v in level}
        length = lengths.pop() if len(lengths) == 1 else -1
        if not 1 <= length <= limit or n not in (None, length):
            raise _fail(where, f"a rectangular list of shape {shape} of {kind}")
        found.append(length)
        level = [x for v in level for x in v]
    if not _leaves_ok(level, kind):
        raise _fail(where, f"a list of shape {shape} of {kind}")
    return tuple(found)


def _leaves_ok(leaves: list, kind: str) -> bool:
    # Set and map run in C: listing thousands of runs spends its time here.
    if kind == "bool":
        return {type(x) for x in leaves} <= {bool}
    if kind == "number|null":
        leaves = [x for x in leaves if x is not None]
    if not {type(x) for x in leaves} <= {float, int}:
        return False
    try:
        return all(map(math.isfinite, leaves))
    except OverflowError:  # an integer beyond float64
        return False


def _tokens(value: Any, where: str) -> tuple:
    depth = 2 if type(value) is list and value and type(value[0]) is list else 1
    return _array(value, (None,) * depth, where)


def check_record(data: Any) -> None:
    """Check ``data`` against schema version 1 or 2 quickly, without ``jsonschema``.

    The same rules as ``assets/experiment-record.schema.json`` (the tests hold the two to each
    other), plus what a schema cannot say: every matrix is T×T for the record's T, ``d_k``
    (and in version 2 ``d_v``) matches the inputs' widths, output and contributions match the
    values, and a projection's X is T×d_model and its W's d_model×d_k (d_model×d_v).

    Raises
    ------
    NewerSchemaError
        ``schema_version`` is an integer above :data:`SCHEMA_VERSION`.
    RecordError
        Anything else that is not an experiment record of a version this workbench reads; the
        message names the key.
    """
    if not isinstance(data, dict):
        raise RecordError("not an experiment record: not a JSON object")
    version = data.get("schema_version")
    if type(version) is int and version > SCHEMA_VERSION:
        raise NewerSchemaError(version)
    if version not in READABLE_VERSIONS or type(version) is bool:
        raise _fail("schema_version", " or ".join(map(str, READABLE_VERSIONS)))
    _object(data, tuple(_TOP_KEYS), "the record")
    if not isinstance(data["id"], str) or not ID_PATTERN.fullmatch(data["id"]):
        raise _fail("id", "1 to 64 letters, digits, _ or -")
    created = data["created_at"]
    if not isinstance(created, str) or not _CREATED_AT.fullmatch(created):
        raise _fail("created_at", "an ISO 8601 date and time with a UTC offset")
    try:
        datetime.fromisoformat(created)
    except ValueError:
        raise _fail("created_at", "a real date and time") from None
    if not isinstance(data["app_version"], str) or len(data["app_version"]) > 100:
        raise _fail("app_version", "text of at most 100 characters")
    for field in TEXT_LIMITS:
        check_text(field, data[field])

    inputs = _object(data["inputs"], _INPUT_KEYS[version], "inputs")
    q_shape = _tokens(inputs["queries"], "inputs.queries")
    T = q_shape[0]
    if _tokens(inputs["keys"], "inputs.keys") != q_shape:
        raise _fail("inputs.keys", f"the same shape as the queries {q_shape}")
    v_shape = None if inputs["values"] is None else _tokens(inputs["values"], "inputs.values")
    if v_shape is not None and v_shape[0] != T:
        raise _fail("inputs.values", f"{T} tokens like the queries")
    if type(inputs["d_k"]) is not int or inputs["d_k"] != (q_shape + (1,))[1]:
        raise _fail("inputs.d_k", "the width of the queries")
    if inputs["padding_mask"] is not None:
        _array(inputs["padding_mask"], (T,), "inputs.padding_mask", "bool")
    if version >= 2:
        d_v = None if v_shape is None else (v_shape + (1,))[1]
        if inputs["d_v"] != d_v or type(inputs["d_v"]) not in (int, type(None)):
            raise _fail("inputs.d_v", "the width of the values (null without values)")
        if inputs["projection"] is not None:
            _check_projection(inputs["projection"], q_shape, v_shape)

    settings = _object(
        data["settings"], ("causal", "mask_after_softmax", "failure_mode"), "settings"
    )
    for key in ("causal", "mask_after_softmax"):
        if type(settings[key]) is not bool:
            raise _fail(f"settings.{key}", "true or false")
    if settings["failure_mode"] not in FAILURE_MODES:
        raise _fail("settings.failure_mode", f"one of {', '.join(FAILURE_MODES)}")

    results = _object(data["results"], tuple(_RESULT_SHAPES) + _RESULT_EXTRA, "results")
    for key, (shape, kind) in _RESULT_SHAPES.items():
        _array(results[key], tuple(T for _ in range(shape)), f"results.{key}", kind)
    for key in ("total_future_weight", "min_row_sum", "max_row_sum_error"):
        if not _is_num(results[key], True):
            raise _fail(f"results.{key}", "a number or null")
    for key, lead in (("output", (T,)), ("contributions", (T, T))):
        if (results[key] is None) != (v_shape is None):
            raise _fail(f"results.{key}", "null exactly when there are no values")
        if v_shape is not None:
            _array(results[key], lead + v_shape[1:], f"results.{key}", "number|null")
    checks = results["checks"]
    if type(checks) is not list or len(checks) > 32:
        raise _fail("results.checks", "a list of at most 32 checks")
    for check in checks:
        _check_entry(check, T)
    failed = results["failed_checks"]
    if type(failed) is not list or len(failed) > 32 or not all(
        isinstance(n, str) and len(n) <= 64 for n in failed
    ):
        raise _fail("results.failed_checks", "a list of check names")


def _check_projection(projection: Any, q_shape: tuple, v_shape: tuple | None) -> None:
    """Matrix mode: X is T×d_model, W_Q and W_K d_model×d_k, W_V d_model×d_v or null without values."""
    where = "inputs.projection"
    _object(projection, _PROJECTION_KEYS, where)
    d_model = projection["d_model"]
    if type(d_model) is not int or not 1 <= d_model <= MAX_WIDTH:
        raise _fail(f"{where}.d_model", f"a whole number from 1 to {MAX_WIDTH}")
    if len(q_shape) != 2:
        raise _fail("inputs.queries", "one row per token in matrix mode (Q = X W_Q)")
    T, d_k = q_shape
    _array(projection["X"], (T, d_model), f"{where}.X")
    for key in ("W_Q", "W_K"):
        _array(projection[key], (d_model, d_k), f"{where}.{key}")
    if (projection["W_V"] is None) != (v_shape is None):
        raise _fail(f"{where}.W_V", "null exactly when there are no values")
    if v_shape is not None:
        if len(v_shape) != 2:
            raise _fail("inputs.values", "one row per token in matrix mode (V = X W_V)")
        _array(projection["W_V"], (d_model, v_shape[1]), f"{where}.W_V")


def _check_entry(check: Any, T: int) -> None:
    where = "results.checks[]"
    _object(check, ("name", "title", "passed", "message", "rows", "cells"), where)
    for key, limit in (("name", 64), ("title", 200), ("message", 2000)):
        if not isinstance(check[key], str) or len(check[key]) > limit:
            raise _fail(f"{where}.{key}", f"text of at most {limit} characters")
    if check["passed"] not in (True, False, None) or type(check["passed"]) is int:
        raise _fail(f"{where}.passed", "true, false or null")
    rows, cells = check["rows"], check["cells"]
    if type(rows) is not list or len(rows) > MAX_TOKENS or not all(
        type(i) is int and 1 <= i for i in rows
    ):
        raise _fail(f"{where}.rows", "a list of row numbers counted from 1")
    if type(cells) is not list or len(cells) > MAX_TOKENS**2 or not all(
        type(c) is list and len(c) == 2 and all(type(i) is int and 1 <= i for i in c) for c in cells
    ):
        raise _fail(f"{where}.cells", "a list of [row, column] pairs counted from 1")


_V1_INPUT_KEYS = ("queries", "keys", "values", "d_k", "padding_mask")
_INPUT_KEYS = {1: _V1_INPUT_KEYS, 2: (*_V1_INPUT_KEYS, "d_v", "projection")}
_PROJECTION_KEYS = ("X", "W_Q", "W_K", "W_V", "d_model")
_TOP_KEYS = ("schema_version", "id", "created_at", "app_version", *TEXT_LIMITS,
             "inputs", "settings", "results")
# key -> (number of T axes, leaf kind)
_RESULT_SHAPES = {
    "scores": (2, "number"), "mask": (2, "bool"), "masked_scores": (2, "number|null"),
    "weights": (2, "number|null"), "row_sums": (1, "number|null"),
    "future_weight": (1, "number|null"),
}
_RESULT_EXTRA = ("total_future_weight", "min_row_sum", "max_row_sum_error", "output",
                 "contributions", "checks", "failed_checks")


def _refuse_constant(token: str) -> None:
    raise ValueError(f"{token} is not allowed in strict JSON")


@cache
def _validator() -> Any:
    import jsonschema  # lazily: attention_core needs only numpy at import time

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def validate_record(data: Any) -> None:
    """Validate JSON-native ``data`` against ``assets/experiment-record.schema.json``.

    Imports ``jsonschema`` (a project dependency) on first call, not at import time, so the core
    still imports with numpy alone. Slow (milliseconds per record): the store uses the
    equivalent :func:`check_record` instead, and the tests hold the two to each other.

    Parameters
    ----------
    data : object
        A parsed JSON document (dicts, lists, str, int, float, bool, None).

    Returns
    -------
    None

    Raises
    ------
    jsonschema.ValidationError
        The first violation, with its path.
    """
    _validator().validate(data)
