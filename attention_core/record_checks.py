"""Is this JSON an experiment record? The JSON Schema, and the few rules a schema cannot say.

:func:`check_record` validates with ``jsonschema`` against ``attention_core/experiment-record.schema.json``
(versions 1 and 2), then checks what a schema cannot express: every matrix is T×T for the
record's own T, widths agree with ``d_k``/``d_v``/``d_model``, a created_at is a real date, text
holds no lone surrogates, and numbers are finite. The record format (and so its validation)
belongs to the core, as PRODUCT.md allows; ``jsonschema`` is imported on the first check, never
at import time, so ``import attention_core`` still needs numpy alone.

Checks run where records come from outside (a file, an upload, an import); a record built by
:meth:`~attention_core.records.ExperimentRecord.from_result` is the schema's shape by
construction (the tests validate every mode and input kind), and a store trusts what it stored.

Left out: building records (see :mod:`attention_core.records`).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import cache
from importlib.resources import files
from typing import Any

SCHEMA_VERSION = 2  # what new records are written as; every version from 1 up to it is read
READABLE_VERSIONS = (1, 2)
# Package data (pyproject.toml): the schema ships inside the wheel, beside the code that reads it.
SCHEMA_PATH = files("attention_core") / "experiment-record.schema.json"
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
TEXT_LIMITS = {"learner": 100, "label": 100, "prediction": 2000, "explanation": 2000, "notes": 2000}
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


def check_record(data: Any) -> None:
    """Check that ``data`` is an experiment record of schema version 1 or 2.

    The JSON Schema (``jsonschema``, draft 2020-12), then the rules it cannot say: ``keys`` have
    the queries' shape and ``values`` their T; ``d_k`` (and in version 2 ``d_v``) is the inputs'
    width; the padding mask has T entries; every result matrix is T×T and every vector T long;
    ``output`` and ``contributions`` match the values; a projection's X is T×d_model and its W's
    d_model×d_k (d_model×d_v); ``created_at`` is a real date; numbers are finite; text holds no
    lone surrogates.

    Raises
    ------
    NewerSchemaError
        ``schema_version`` is an integer above :data:`SCHEMA_VERSION`.
    RecordError
        Anything else that is not an experiment record of a version this workbench reads; the
        message names the key (``inputs.queries``, ``results.checks[0].passed``, …).
    """
    if not isinstance(data, dict):
        raise RecordError("not an experiment record: not a JSON object")
    version = data.get("schema_version")
    if type(version) is int and version > SCHEMA_VERSION:
        raise NewerSchemaError(version)
    for field in TEXT_LIMITS:  # first: its messages name the field and the length
        if isinstance(data.get(field), str):
            check_text(field, data[field])
    try:
        json.dumps(data, allow_nan=False)
    except ValueError:
        raise RecordError("not an experiment record: a number must be finite (NaN and Infinity "
                          "are not strict JSON)") from None
    except (TypeError, RecursionError) as error:
        raise RecordError(f"not an experiment record: not JSON data ({error})") from None
    error = _first_error(data)
    if error is not None:
        raise error
    try:
        datetime.fromisoformat(data["created_at"])
    except ValueError:
        raise _fail("created_at", "a real date and time") from None
    _shape_rules(data)


def _where(path) -> str:
    where = ""
    for part in path:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else part)
    return where or "the record"


def _first_error(data: Any) -> RecordError | None:
    from jsonschema.exceptions import best_match

    validator = _validator(inline=True)
    if validator.is_valid(data):
        return None
    error = best_match(validator.iter_errors(data))
    message = error.message if len(error.message) <= 200 else error.message[:200] + "…"
    return RecordError(f"not an experiment record: {_where(error.absolute_path)}: {message}")


def _shape(value: Any, where: str) -> tuple[int, ...]:
    """The shape of a rectangular nested list (the schema has checked its leaves and lengths)."""
    shape, level = [], [value]
    while level and type(level[0]) is list:
        lengths = {len(v) if type(v) is list else -1 for v in level}
        if len(lengths) != 1 or -1 in lengths:
            raise _fail(where, "rectangular: every row the same length")
        shape.append(lengths.pop())
        level = [x for v in level for x in v]
    return tuple(shape)


def _shape_rules(data: dict) -> None:
    inputs, results = data["inputs"], data["results"]
    q_shape = _shape(inputs["queries"], "inputs.queries")
    T = q_shape[0]
    if _shape(inputs["keys"], "inputs.keys") != q_shape:
        raise _fail("inputs.keys", f"the same shape as the queries {q_shape}")
    v_shape = None if inputs["values"] is None else _shape(inputs["values"], "inputs.values")
    if v_shape is not None and v_shape[0] != T:
        raise _fail("inputs.values", f"{T} tokens like the queries")
    if type(inputs["d_k"]) is not int or inputs["d_k"] != (q_shape + (1,))[1]:
        raise _fail("inputs.d_k", "the width of the queries")
    if inputs["padding_mask"] is not None and len(inputs["padding_mask"]) != T:
        raise _fail("inputs.padding_mask", f"{T} entries, one per token")
    if data["schema_version"] >= 2:
        d_v = None if v_shape is None else (v_shape + (1,))[1]
        if inputs["d_v"] != d_v or type(inputs["d_v"]) not in (int, type(None)):
            raise _fail("inputs.d_v", "the width of the values (null without values)")
        if inputs["projection"] is not None:
            _projection_rules(inputs["projection"], q_shape, v_shape)
    for key, axes in (("scores", 2), ("mask", 2), ("masked_scores", 2), ("weights", 2),
                      ("row_sums", 1), ("future_weight", 1)):
        if _shape(results[key], f"results.{key}") != (T,) * axes:
            raise _fail(f"results.{key}", "×".join([str(T)] * axes) + f" for {T} tokens")
    for key, lead in (("output", (T,)), ("contributions", (T, T))):
        if (results[key] is None) != (v_shape is None):
            raise _fail(f"results.{key}", "null exactly when there are no values")
        if v_shape is not None and _shape(results[key], f"results.{key}") != lead + v_shape[1:]:
            raise _fail(f"results.{key}", f"of shape {lead + v_shape[1:]} for these values")


def _projection_rules(projection: dict, q_shape: tuple, v_shape: tuple | None) -> None:
    """Matrix mode: X is T×d_model, W_Q and W_K d_model×d_k, W_V d_model×d_v or null without values."""
    where = "inputs.projection"
    d_model = projection["d_model"]
    if len(q_shape) != 2:
        raise _fail("inputs.queries", "one row per token in matrix mode (Q = X W_Q)")
    T, d_k = q_shape
    if type(d_model) is not int:
        raise _fail(f"{where}.d_model", "a whole number")
    if _shape(projection["X"], f"{where}.X") != (T, d_model):
        raise _fail(f"{where}.X", f"{T}×{d_model} (T × d_model)")
    for key in ("W_Q", "W_K"):
        if _shape(projection[key], f"{where}.{key}") != (d_model, d_k):
            raise _fail(f"{where}.{key}", f"{d_model}×{d_k} (d_model × d_k)")
    if (projection["W_V"] is None) != (v_shape is None):
        raise _fail(f"{where}.W_V", "null exactly when there are no values")
    if v_shape is not None:
        if len(v_shape) != 2:
            raise _fail("inputs.values", "one row per token in matrix mode (V = X W_V)")
        if _shape(projection["W_V"], f"{where}.W_V") != (d_model, v_shape[1]):
            raise _fail(f"{where}.W_V", f"{d_model}×{v_shape[1]} (d_model × d_v)")


def _refuse_constant(token: str) -> None:
    raise ValueError(f"{token} is not allowed in strict JSON")


@cache
def _validator(inline: bool = False) -> Any:
    """The schema's validator; ``inline``: with every local ``$ref`` replaced by what it names
    (the same rules: the schema has no recursion), which spares jsonschema a reference lookup at
    every number of every matrix, most of its time on a record."""
    import jsonschema  # lazily: attention_core needs only numpy at import time

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(_inlined(schema, schema["$defs"]) if inline else schema)


def _inlined(node: Any, defs: dict) -> Any:
    if isinstance(node, list):
        return [_inlined(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        rest = {k: _inlined(v, defs) for k, v in node.items() if k != "$ref"}
        if set(rest) & set(target) - {"description"}:
            return {"allOf": [target], **rest}  # keep both when a keyword would collide
        return {**target, **rest}
    return {k: _inlined(v, defs) for k, v in node.items()}


def validate_record(data: Any) -> None:
    """Validate JSON-native ``data`` against ``attention_core/experiment-record.schema.json``.

    Imports ``jsonschema`` (a project dependency) on first call, not at import time, so the core
    still imports with numpy alone. The schema alone: :func:`check_record` adds the rules a
    schema cannot say and turns the error into a :class:`RecordError`.

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
