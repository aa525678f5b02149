"""Is this JSON an experiment record? The JSON Schema, and the few rules a schema cannot say.

:func:`check_record` validates with ``jsonschema`` against ``attention_core/experiment-record.schema.json``
(versions 1, 2 and 3), then checks what a schema cannot express: every matrix is T×T_k for the
record's own T and T_k, widths agree with ``d_k``/``d_v``/``d_model``, a version-3 batch, its
maps and an ablation agree with the first map, a created_at is a real date, text holds no lone
surrogates, and numbers are finite. The record format (and so its validation)
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

from attention_core.validation import MAX_TOKENS  # per sequence; a flattened batch map holds up to 3

SCHEMA_VERSION = 3  # what new records are written as; every version from 1 up to it is read
READABLE_VERSIONS = (1, 2, 3)
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


SELF_CHECK_QUESTION = re.compile(r"[a-z][a-z0-9_]{0,63}")
SELF_CHECK_CHOICE_LIMIT = 200


def check_self_check(value: object) -> None:
    """Refuse a ``self_check`` that is not the schema's ``selfCheck``: exactly ``question`` (an
    id such as ``softmax_axis``), ``choice`` (1 to 200 characters of text) and ``correct`` (a bool).

    Raises
    ------
    RecordError
        The message names ``self_check`` and the key at fault.
    """
    if not isinstance(value, dict) or set(value) != {"question", "choice", "correct"}:
        raise _fail("self_check", "an object of exactly question, choice and correct")
    if not isinstance(value["question"], str) or not SELF_CHECK_QUESTION.fullmatch(value["question"]):
        raise _fail("self_check.question", "a question id such as softmax_axis")
    choice = value["choice"]
    if (not isinstance(choice, str) or not 1 <= len(choice) <= SELF_CHECK_CHOICE_LIMIT
            or _SURROGATE.search(choice)):
        raise _fail("self_check.choice", f"text of 1 to {SELF_CHECK_CHOICE_LIMIT} characters")
    if type(value["correct"]) is not bool:
        raise _fail("self_check.correct", "true or false")


def _fail(where: str, expected: str) -> RecordError:
    return RecordError(f"not an experiment record: {where} must be {expected}")


def check_record(data: Any) -> None:
    """Check that ``data`` is an experiment record of schema version 1, 2 or 3.

    The JSON Schema (``jsonschema``, draft 2020-12), then the rules it cannot say: ``keys`` have
    the queries' width (and before version 3 their shape) and ``values`` as many rows as the keys;
    ``d_k`` (from version 2 ``d_v``) is the inputs' width; the padding mask has T_k entries; every
    result matrix is T×T_k and every vector T long; ``output`` and ``contributions`` match the
    values; a projection's X is T×d_model and its W's d_model×d_k (d_model×d_v). In version 3
    also: X_kv is T_k×d_model, W_O d_v×d_model, Y T×d_model; a batch is B×T×d_model with its
    first item (every item, flattened, in the ``batch_items_mixed`` mode) the first map's, and
    ``results.maps`` holds the other B − 1 maps; a causal mask over T ≠ T_k names its alignment;
    an ablation changes a matrix the run has, in its shape, and its results hold every map.
    ``created_at`` is a real date; numbers are finite; text holds no lone surrogates.

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
    if "self_check" in data:  # the schema has checked its shape; this also refuses lone surrogates
        check_self_check(data["self_check"])
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
    version = data["schema_version"]
    inputs, results = data["inputs"], data["results"]
    q_shape = _shape(inputs["queries"], "inputs.queries")
    k_shape = _shape(inputs["keys"], "inputs.keys")
    T, T_k = q_shape[0], k_shape[0]
    if version < 3 and k_shape != q_shape:
        raise _fail("inputs.keys", f"the same shape as the queries {q_shape}")
    if k_shape[1:] != q_shape[1:]:
        raise _fail("inputs.keys", "one key per key token, as wide as the queries (d_k)")
    v_shape = None if inputs["values"] is None else _shape(inputs["values"], "inputs.values")
    if v_shape is not None and v_shape[0] != T_k:
        raise _fail("inputs.values", f"{T_k} tokens like the keys")
    if type(inputs["d_k"]) is not int or inputs["d_k"] != (q_shape + (1,))[1]:
        raise _fail("inputs.d_k", "the width of the queries")
    if inputs["padding_mask"] is not None and len(inputs["padding_mask"]) != T_k:
        raise _fail("inputs.padding_mask", f"{T_k} entries, one per key token")
    if version >= 2:
        d_v = None if v_shape is None else (v_shape + (1,))[1]
        if inputs["d_v"] != d_v or type(inputs["d_v"]) not in (int, type(None)):
            raise _fail("inputs.d_v", "the width of the values (null without values)")
        if inputs["projection"] is not None:
            _projection_rules(inputs["projection"], q_shape, k_shape, v_shape, version)
    # What H and Y look like: weights times the values (the keys in the keys_as_values mode).
    mode = data["settings"]["failure_mode"]
    mixed = k_shape if mode == "keys_as_values" and v_shape is not None else v_shape
    unformed = mode == "rows_and_columns_swapped" and T != T_k  # H = Aᵀ V needs T = T_k
    maps = [("results", results)]
    if version >= 3:
        _layer_rules(data, T, T_k)
        maps += [(f"results.maps[{i}]", m) for i, m in enumerate(results["maps"] or ())]
    projection = inputs.get("projection") if version >= 3 else None
    # Y = H W_O is T×d_model, and null without W_O; version 2 and 1 records have no Y (False).
    d_model = None if projection is None or projection["W_O"] is None else projection["d_model"]
    for where, m in maps:
        _map_rules(m, where, T, T_k, mixed, unformed, d_model if version >= 3 else False)
    if version >= 3:
        if (inputs["ablation"] is None) != (results["ablation"] is None):
            raise _fail("results.ablation", "null exactly when inputs.ablation is")
        if inputs["ablation"] is not None:
            _ablation_rules(data, T, T_k, mixed, unformed, d_model, len(maps))


def _map_rules(m: dict, where: str, T: int, T_k: int, mixed: tuple | None, unformed: bool,
               d_model: int | None | bool) -> None:
    """One attention map's results: T×T_k matrices, T vectors, H and its contributions, Y.
    ``d_model`` is False for a record before version 3 (no ``y``)."""
    for key, shape in (("scores", (T, T_k)), ("mask", (T, T_k)), ("masked_scores", (T, T_k)),
                       ("weights", (T, T_k)), ("row_sums", (T,)), ("future_weight", (T,))):
        if key in m and _shape(m[key], f"{where}.{key}") != shape:
            raise _fail(f"{where}.{key}", "×".join(map(str, shape)) + f" for {T} queries and {T_k} keys")
    for key, lead in (("output", (T,)), ("contributions", (T, T_k))):
        if key not in m:
            continue
        if m[key] is None:
            if mixed is None or unformed:
                continue
            raise _fail(f"{where}.{key}", "null exactly when there are no values")
        if mixed is None:
            raise _fail(f"{where}.{key}", "null exactly when there are no values")
        if _shape(m[key], f"{where}.{key}") != lead + mixed[1:]:
            raise _fail(f"{where}.{key}", f"of shape {lead + mixed[1:]} for these values")
    if d_model is not False and "y" in m and m["y"] is not None:
        if d_model is None:
            raise _fail(f"{where}.y", "null without W_O (Y = H W_O)")
        if _shape(m["y"], f"{where}.y") != (T, d_model):
            raise _fail(f"{where}.y", f"{T}×{d_model} (T × d_model)")


def _projection_rules(projection: dict, q_shape: tuple, k_shape: tuple, v_shape: tuple | None,
                      version: int) -> None:
    """Matrix mode: X is T×d_model, W_Q and W_K d_model×d_k, W_V d_model×d_v or null without
    values; from version 3 X_kv T_k×d_model (null in self-attention) and W_O d_v×d_model or null."""
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
    if version < 3:
        return
    T_k = k_shape[0]
    if projection["X_kv"] is None:
        if T_k != T:
            raise _fail(f"{where}.X_kv", f"given: {T_k} keys for {T} queries is cross-attention")
    elif _shape(projection["X_kv"], f"{where}.X_kv") != (T_k, d_model):
        raise _fail(f"{where}.X_kv", f"{T_k}×{d_model} (T_k × d_model)")
    if projection["W_O"] is not None:
        if v_shape is None:
            raise _fail(f"{where}.W_O", "null without values (Y = H W_O needs H = A V)")
        if _shape(projection["W_O"], f"{where}.W_O") != (v_shape[1], d_model):
            raise _fail(f"{where}.W_O", f"{v_shape[1]}×{d_model} (d_v × d_model)")


def _layer_rules(data: dict, T: int, T_k: int) -> None:
    """Version 3: the batch and the maps agree with the first map; one sequence has 16 tokens at most."""
    inputs, settings, results = data["inputs"], data["settings"], data["results"]
    if settings["causal"] and T != T_k and settings["causal_alignment"] is None:
        raise _fail("settings.causal_alignment", "top_left or bottom_right: a causal mask over "
                    f"{T} queries and {T_k} keys needs one")
    batch, projection = inputs["batch"], inputs["projection"]
    if batch is None:
        if max(T, T_k) > MAX_TOKENS:
            raise _fail("inputs.queries" if T > MAX_TOKENS else "inputs.keys",
                        f"at most {MAX_TOKENS} tokens in one sequence")
        if results["maps"] is not None:
            raise _fail("results.maps", "null for one sequence (one map)")
        return
    if projection is None:
        raise _fail("inputs.batch", "null unless the run was projected from X (matrix mode)")
    x = _shape(batch["X"], "inputs.batch.X")
    B, T_item, d_model = x
    if d_model != projection["d_model"]:
        raise _fail("inputs.batch.X", f"{B}×{T_item}×{projection['d_model']} (B × T × d_model)")
    if (batch["X_kv"] is None) != (projection["X_kv"] is None):
        raise _fail("inputs.batch.X_kv", "null exactly when inputs.projection.X_kv is")
    T_k_item = T_item
    if batch["X_kv"] is not None:
        kv = _shape(batch["X_kv"], "inputs.batch.X_kv")
        if kv[0] != B or kv[2] != d_model:
            raise _fail("inputs.batch.X_kv", f"{B}×T_k×{d_model} (B × T_k × d_model)")
        T_k_item = kv[1]
    if (batch["padding_mask"] is None) != (inputs["padding_mask"] is None):
        raise _fail("inputs.batch.padding_mask", "null exactly when inputs.padding_mask is")
    if batch["padding_mask"] is not None and _shape(batch["padding_mask"], "inputs.batch.padding_mask") != (
            B, T_k_item):
        raise _fail("inputs.batch.padding_mask", f"{B}×{T_k_item} (B × T_k)")
    flattened = settings["failure_mode"] == "batch_items_mixed"
    first = (lambda items: [row for item in items for row in item]) if flattened else (lambda items: items[0])
    if (T, T_k) != ((B * T_item, B * T_k_item) if flattened else (T_item, T_k_item)):
        raise _fail("inputs.queries", f"the first map's {'flattened ' if flattened else ''}queries "
                    "of inputs.batch (B·T rows when batch items are mixed, else item 1's T)")
    for key, items, kept in (("X", batch["X"], projection["X"]), ("X_kv", batch["X_kv"], projection["X_kv"]),
                             ("padding_mask", batch["padding_mask"], inputs["padding_mask"])):
        if items is not None and first(items) != kept:
            where = "inputs.padding_mask" if key == "padding_mask" else f"inputs.projection.{key}"
            raise _fail(where, "the first map's " + ("(every batch item's, flattened)" if flattened
                                                     else "(batch item 1's)") + f" of inputs.batch.{key}")
    others = results["maps"]
    if flattened and others is not None:
        raise _fail("results.maps", "null when the batch items are mixed into one map")
    if not flattened and (others is None or len(others) != B - 1):
        raise _fail("results.maps", f"the other {B - 1} batch item{'s' if B > 2 else ''}' maps")


def _ablation_rules(data: dict, T: int, T_k: int, mixed: tuple | None, unformed: bool,
                    d_model: int | None, n_maps: int) -> None:
    """Version 3: an ablation changes a matrix the run has, keeping its shape; its results hold
    the layer's maps after the change."""
    where = "inputs.ablation"
    ablation, projection = data["inputs"]["ablation"], data["inputs"]["projection"]
    if projection is None:
        raise _fail(where, "null unless the run was projected from X (matrix mode)")
    original = projection[ablation["target"]]
    if original is None:
        raise _fail(f"{where}.target", f"a matrix this run has ({ablation['target']} was not given)")
    if _shape(ablation["matrix"], f"{where}.matrix") != _shape(original, "inputs.projection"):
        raise _fail(f"{where}.matrix", f"the shape of {ablation['target']}")
    if (ablation["factor"] is None) != (ablation["change"] != "scale"):
        raise _fail(f"{where}.factor", "a number exactly when the change is scale")
    after = data["results"]["ablation"]
    if after is None:
        raise _fail("results.ablation", "the ablation's statements and maps (inputs.ablation is given)")
    if len(after["maps"]) != n_maps:
        raise _fail("results.ablation.maps", f"{n_maps} map{'s' if n_maps > 1 else ''}, as many as the run")
    for i, m in enumerate(after["maps"]):
        _map_rules(m, f"results.ablation.maps[{i}]", T, T_k, mixed, unformed, d_model)


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
