"""Experiment records: one saved run as strict JSON (schema version 1).

An :class:`ExperimentRecord` holds JSON-native data only (dicts, lists, floats, bools, str,
``None``), never numpy, so it round-trips exactly: ``ExperimentRecord.from_json(r.to_json()) == r``
(floats via their shortest ``repr``). Numbers that are not finite are written as ``null`` (a
masked score beside the explicit boolean ``mask``; a weight only the ``naive_softmax`` mode can
make), so no ``NaN`` or ``Infinity`` token is ever written (RFC 8259). The contract is
``assets/experiment-record.schema.json`` (JSON Schema draft 2020-12).

Free text (learner, label, prediction, explanation, notes) is data, never markup: it is kept
exactly as typed, control characters and right-to-left marks included (JSON escapes them), and
only refused when too long or when it holds lone surrogates (not text, cannot be UTF-8 encoded).

Left out: rendering, storage (see :mod:`attention_core.store`).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attention_core.modes import FAILURE_MODES
from attention_core.validation import MAX_TOKENS

if TYPE_CHECKING:
    from attention_core.attention import AttentionResult

SCHEMA_VERSION = 1
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
            f"this one reads {SCHEMA_VERSION})"
        )
        self.version = version


def _jsonable(array: np.ndarray | None) -> Any:
    """Nested lists of float (``None`` where not finite), bool, or ``None`` for no array."""
    if array is None:
        return None
    if array.dtype == bool:
        return array.tolist()
    finite = np.isfinite(array)
    return np.where(finite, array, None).tolist() if not finite.all() else array.tolist()


def new_record_id(now: datetime | None = None) -> str:
    """A fresh run id: UTC time to the microsecond, then 16 random hex digits (uuid4).

    Matches ``[A-Za-z0-9_-]{1,64}`` and sorts by creation time, e.g.
    ``20250131T091502123456Z-3f2a…``.
    """
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{now:%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class ExperimentRecord:
    """One saved run. Fields mirror the JSON keys; treat the nested dicts as read-only.

    Attributes
    ----------
    schema_version : int
        Always 1.
    id : str
        Server-generated, ``[A-Za-z0-9_-]{1,64}``; the file name in a run store.
    created_at : str
        UTC, ISO 8601 with offset and microseconds, e.g. ``2025-01-31T09:15:02.123456+00:00``.
    app_version : str
    learner, label : str or None
        At most 100 characters each.
    prediction, explanation, notes : str or None
        At most 2000 characters each.
    inputs : dict
        ``queries``, ``keys`` (T or T×d_k), ``values`` (or None), ``d_k``, ``padding_mask``.
    settings : dict
        ``causal``, ``mask_after_softmax``, ``failure_mode`` (a mode name).
    results : dict
        ``scores``, ``mask``, ``masked_scores``, ``weights`` (T×T), ``row_sums``,
        ``future_weight`` (T), the three summaries, ``output``, ``contributions``, ``checks``
        and ``failed_checks``; ``None`` wherever a number is not finite.
    """

    schema_version: int
    id: str
    created_at: str
    app_version: str
    learner: str | None
    label: str | None
    prediction: str | None
    explanation: str | None
    notes: str | None
    inputs: dict
    settings: dict
    results: dict

    @classmethod
    def from_result(
        cls, result: AttentionResult, *, learner: str | None = None, label: str | None = None,
        prediction: str | None = None, explanation: str | None = None, notes: str | None = None,
        record_id: str | None = None, created_at: datetime | None = None,
    ) -> ExperimentRecord:
        """Build a record from an attention result and the learner's free text.

        Parameters
        ----------
        result : AttentionResult
        learner, label, prediction, explanation, notes : str, optional
        record_id : str, optional
            Defaults to :func:`new_record_id`; must match ``[A-Za-z0-9_-]{1,64}``.
        created_at : datetime, optional
            Timezone-aware; stored in UTC. Defaults to now.

        Raises
        ------
        ValueError
            A text field is too long, not a string, or holds lone surrogates (the message names
            the field); a bad ``record_id``; a naive ``created_at``.
        """
        from attention_core import __version__

        now = created_at or datetime.now(UTC)
        if now.tzinfo is None:
            raise ValueError("created_at must be timezone-aware (UTC)")
        text = dict(learner=learner, label=label, prediction=prediction, explanation=explanation,
                    notes=notes)
        for field, value in text.items():
            check_text(field, value)
        r = result
        data = {
            "schema_version": SCHEMA_VERSION,
            "id": record_id or new_record_id(now),
            "created_at": now.astimezone(UTC).isoformat(timespec="microseconds"),
            "app_version": __version__,
            **text,
            "inputs": {
                "queries": _jsonable(r.queries), "keys": _jsonable(r.keys),
                "values": _jsonable(r.values), "d_k": int(r.d_k),
                "padding_mask": _jsonable(r.key_is_real),
            },
            "settings": {
                "causal": bool(r.causal), "mask_after_softmax": r.mode.name == "mask_after_softmax",
                "failure_mode": r.mode.name,
            },
            "results": {
                "scores": _jsonable(r.scores), "mask": _jsonable(r.allowed),
                "masked_scores": _jsonable(r.masked_scores), "weights": _jsonable(r.weights),
                "row_sums": _jsonable(r.row_sums), "future_weight": _jsonable(r.future_weight),
                **{k: _jsonable(np.float64(getattr(r, k)))
                   for k in ("total_future_weight", "min_row_sum", "max_row_sum_error")},
                "output": _jsonable(r.output), "contributions": _jsonable(r.contributions),
                "checks": [
                    {"name": c.name, "title": c.title, "passed": c.passed, "message": c.message,
                     "rows": list(c.rows), "cells": [list(cell) for cell in c.cells]}
                    for c in r.checks
                ],
                "failed_checks": list(r.failed_checks),
            },
        }
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> ExperimentRecord:
        """Check JSON-native ``data`` (see :func:`check_record`) and wrap a deep copy of it.

        Raises
        ------
        RecordError
            Not a version-1 experiment record; :class:`NewerSchemaError` for a newer version.
        """
        check_record(data)
        return cls(**json.loads(json.dumps(data, allow_nan=False)))

    @classmethod
    def from_json(cls, text: str | bytes) -> ExperimentRecord:
        """Parse strict JSON (``NaN``/``Infinity`` tokens refused) and check it.

        Raises
        ------
        RecordError
            Not valid strict JSON (or not UTF-8), or not a version-1 experiment record;
            :class:`NewerSchemaError` for a newer version.
        """
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError
            raise RecordError(f"not valid JSON: {error}") from None
        check_record(data)
        return cls(**data)

    def to_dict(self) -> dict:
        """The record as a fresh JSON-native dict (the schema's shape)."""
        return asdict(self)

    def to_json(self, *, indent: int | None = None) -> str:
        """Strict RFC 8259 JSON; UTF-8 text is written as is (``ensure_ascii=False``)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return json.dumps(fields, allow_nan=False, ensure_ascii=False, indent=indent)

    @property
    def T(self) -> int:
        """Number of tokens."""
        return len(self.inputs["queries"])

    @property
    def failure_mode(self) -> str:
        """Name of the failure mode the run used (``"correct"`` when none)."""
        return self.settings["failure_mode"]

    @property
    def causal(self) -> bool:
        return self.settings["causal"]

    @property
    def mask_after_softmax(self) -> bool:
        return self.settings["mask_after_softmax"]

    @property
    def total_future_weight(self) -> float | None:
        """Total future-token weight, ``None`` if it was not finite."""
        return self.results["total_future_weight"]

    @property
    def min_row_sum(self) -> float | None:
        return self.results["min_row_sum"]

    @property
    def max_row_sum_error(self) -> float | None:
        return self.results["max_row_sum_error"]

    @property
    def failed_checks(self) -> tuple[str, ...]:
        return tuple(self.results["failed_checks"])

    @property
    def created_datetime(self) -> datetime:
        """``created_at`` as an aware datetime."""
        return datetime.fromisoformat(self.created_at)


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
    """Check ``data`` against schema version 1 quickly, without ``jsonschema``.

    The same rules as ``assets/experiment-record.schema.json`` (the tests hold the two to each
    other), plus what a schema cannot say: every matrix is T×T for the record's T, ``d_k``
    matches the queries, output and contributions match the values.

    Raises
    ------
    NewerSchemaError
        ``schema_version`` is an integer above 1.
    RecordError
        Anything else that is not a version-1 experiment record; the message names the key.
    """
    if not isinstance(data, dict):
        raise RecordError("not an experiment record: not a JSON object")
    version = data.get("schema_version")
    if type(version) is int and version > SCHEMA_VERSION:
        raise NewerSchemaError(version)
    if version != SCHEMA_VERSION or type(version) is bool:
        raise _fail("schema_version", str(SCHEMA_VERSION))
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

    inputs = _object(data["inputs"], ("queries", "keys", "values", "d_k", "padding_mask"), "inputs")
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


__all__ = ["ID_PATTERN", "SCHEMA_PATH", "SCHEMA_VERSION", "TEXT_LIMITS", "ExperimentRecord",
           "NewerSchemaError", "RecordError", "check_record", "check_text", "new_record_id",
           "validate_record"]
