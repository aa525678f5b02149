"""Experiment records: one saved run as strict JSON (schema version 3; versions 1 and 2 still read).

An :class:`ExperimentRecord` holds JSON-native data only (dicts, lists, floats, bools, str,
``None``), never numpy, so it round-trips exactly: ``ExperimentRecord.from_json(r.to_json()) == r``
(floats via their shortest ``repr``). Numbers that are not finite are written as ``null`` (a
masked score beside the explicit boolean ``mask``; a weight only the ``naive_softmax`` mode can
make), so no ``NaN`` or ``Infinity`` token is ever written (RFC 8259). The contract is
``attention_core/experiment-record.schema.json`` (JSON Schema draft 2020-12).

Version 2 (issue 14) adds to ``inputs`` the values' width ``d_v`` and, for a run computed from X
(matrix mode, as in Self-Attention in Matrix Form), ``projection``: ``{"X", "W_Q", "W_K", "W_V",
"d_model"}``, of which ``queries``, ``keys`` and ``values`` are the projections. Version 1 already
held vectors (lists of lists), ``d_k``, the padding mask, the failure mode and the explanation.

Version 3 (issue 23, Review, "The Complete Layer") holds a whole layer. The version-2 keys of
``inputs`` and ``results`` still describe one attention map, the layer's first (the run itself for
one sequence, batch item 1 of a batch, the one flattened map of the ``batch_items_mixed`` mode),
so every reader of version 2 keeps working; keys may have ``T_k != T`` rows (cross-attention).
Added, always present: ``inputs.projection.W_O`` and ``.X_kv``, ``inputs.batch`` (the whole
batch: ``X``, ``X_kv``, ``padding_mask``), ``inputs.ablation``, ``settings.causal_alignment``,
``results.y``, ``results.maps`` (the other maps) and ``results.ablation``. The checks and the three
summaries of ``results`` are the layer's, over the whole batch. Optional in version 3 only:
``self_check``, the learner's answer to one of the course's self-check questions (Self-Attention in
Matrix Form, "Q1. Identify the softmax axis"), ``{"question", "choice", "correct"}``; a record
without one has no such key (:meth:`ExperimentRecord.to_json` leaves it out), so every record
written before reads and writes back byte for byte.

Records are read as they were written: a version-1 record stays version 1 when shown, exported or
updated. What a run was computed from is read back the same way for every version by
:attr:`ExperimentRecord.run_inputs`.

Free text (learner, label, prediction, explanation, notes) is data, never markup: it is kept
exactly as typed, control characters and right-to-left marks included (JSON escapes them), and
only refused when too long or when it holds lone surrogates (not text, cannot be UTF-8 encoded).

Left out: rendering, storage (the application's: ``app.store``).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from attention_core._version import __version__
from attention_core.layer import LayerResult
from attention_core.modes import run_title
from attention_core.record_checks import (
    ID_PATTERN,
    READABLE_VERSIONS,
    SCHEMA_PATH,
    SCHEMA_VERSION,
    TEXT_LIMITS,
    NewerSchemaError,
    RecordError,
    _refuse_constant,
    check_record,
    check_self_check,
    check_text,
    validate_record,
)
from attention_core.run_inputs import RunInputs

if TYPE_CHECKING:
    from attention_core.ablation import Ablation
    from attention_core.attention import AttentionResult
    from attention_core.checks import Check

# What each attention map of a layer holds in ``results`` (map 1 at its top level, in the keys
# version 2 had, the others in ``results.maps``).
MAP_KEYS = ("scores", "mask", "masked_scores", "weights", "row_sums", "future_weight", "output",
            "contributions", "y")

def _jsonable(array: np.ndarray | None) -> Any:
    """Nested lists of float (``None`` where not finite), bool, or ``None`` for no array."""
    if array is None:
        return None
    if array.dtype == bool:
        return array.tolist()
    finite = np.isfinite(array)
    return np.where(finite, array, None).tolist() if not finite.all() else array.tolist()


def _map_results(m: AttentionResult) -> dict:
    """One map's results (:data:`MAP_KEYS`): T×T_k matrices, T vectors, H, the contributions, Y."""
    return {"scores": _jsonable(m.scores), "mask": _jsonable(m.allowed),
            "masked_scores": _jsonable(m.masked_scores), "weights": _jsonable(m.weights),
            "row_sums": _jsonable(m.row_sums), "future_weight": _jsonable(m.future_weight),
            "output": _jsonable(m.output), "contributions": _jsonable(m.contributions),
            "y": _jsonable(m.y)}


def _check_dict(c: Check) -> dict:
    return {"name": c.name, "title": c.title, "passed": c.passed, "message": c.message,
            "rows": list(c.rows), "cells": [list(cell) for cell in c.cells]}


def new_record_id(now: datetime | None = None) -> str:
    """A fresh run id: UTC time to the microsecond, then 32 random hex digits (128 bits from
    :func:`secrets.token_hex`), 55 characters in all.

    Matches ``[A-Za-z0-9_-]{1,64}`` and sorts by creation time, e.g.
    ``20250131T091502123456Z-3f2a…``. The random part makes an id impossible to guess (a run's
    id is what its link, ``/?run=<id>``, reads it by), not only unique; ids made before it had
    16 hex digits and still load.
    """
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{now:%Y%m%dT%H%M%S%fZ}-{secrets.token_hex(16)}"


@dataclass(frozen=True)
class ExperimentRecord:
    """One saved run. Fields mirror the JSON keys; treat the nested dicts as read-only.

    Attributes
    ----------
    schema_version : int
        3 for records made now; 2 for records made before issue 23 and 1 before issue 14, read
        as they are.
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
        Of the first map: ``queries`` (T or T×d_k), ``keys`` (T_k or T_k×d_k), ``values`` (T_k or
        T_k×d_v, or None), ``d_k``, ``padding_mask`` (T_k); from version 2 also ``d_v`` (None
        without values) and ``projection`` (None, or matrix mode's ``X`` T×d_model, ``W_Q``/``W_K``
        d_model×d_k, ``W_V`` d_model×d_v or None, and ``d_model``; from version 3 ``W_O``
        d_v×d_model and ``X_kv`` T_k×d_model, each None when not given). From version 3 also
        ``batch`` (None for one sequence, else ``X`` B×T×d_model, ``X_kv`` B×T_k×d_model or None,
        ``padding_mask`` B×T_k or None) and ``ablation`` (None, or ``target``, ``change``,
        ``factor``, ``matrix``: the changed matrix).
    self_check : dict or None
        Version 3 only, optional: ``{"question": "softmax_axis", "choice": <the chosen answer in
        the course's words>, "correct": bool}``, the self-check answer the learner checked since
        the run saved before; ``None`` (no key in the JSON) without one.
    settings : dict
        ``causal``, ``mask_after_softmax``, ``failure_mode`` (a mode name); from version 3
        ``causal_alignment`` (None, ``"top_left"`` or ``"bottom_right"``).
    results : dict
        Of the first map: ``scores``, ``mask``, ``masked_scores``, ``weights`` (T×T_k),
        ``row_sums``, ``future_weight`` (T), ``output``, ``contributions``; from version 3 ``y``
        (T×d_model or None). Of the whole layer (every map): the three summaries, ``checks`` and
        ``failed_checks``. From version 3 ``maps`` (None for one map, else the other maps' results,
        each with the keys of :data:`MAP_KEYS`) and ``ablation`` (None, or ``statements``, checks,
        and ``maps``, the after-layer's ``weights``, ``output`` and ``y`` per map). ``None``
        wherever a number is not finite.
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
    self_check: dict | None = None

    @classmethod
    def from_result(
        cls, result: AttentionResult | LayerResult, *, ablation: Ablation | None = None,
        learner: str | None = None, label: str | None = None, prediction: str | None = None,
        explanation: str | None = None, notes: str | None = None, record_id: str | None = None,
        created_at: datetime | None = None, self_check: dict | None = None,
    ) -> ExperimentRecord:
        """Build a record from an attention result (or a whole layer) and the learner's free text.

        Parameters
        ----------
        result : AttentionResult or LayerResult
            One sequence from :func:`~attention_core.attention.scaled_dot_product_attention`
            (scalar or vector inputs) or :func:`~attention_core.projection.self_attention` (matrix
            mode: X and the W matrices are saved too), or a layer from
            :func:`~attention_core.layer.attention_layer` (a batch, cross-attention, W_O).
        ablation : Ablation, optional
            An ablation of this layer (:func:`~attention_core.ablation.ablate`, its ``before``
            being ``result``): the changed matrix, the chapter's statements and the after-layer's
            weights, H and Y are saved beside the run.
        learner, label, prediction, explanation, notes : str, optional
        record_id : str, optional
            Defaults to :func:`new_record_id`; must match ``[A-Za-z0-9_-]{1,64}``.
        self_check : dict, optional
            ``{"question": str, "choice": str, "correct": bool}``: the learner's answer to a
            self-check question, saved with this run.
        created_at : datetime, optional
            Timezone-aware; stored in UTC. Defaults to now.

        Returns
        -------
        ExperimentRecord
            A record of the current :data:`SCHEMA_VERSION` (3). The version-2 keys hold the
            layer's first map; ``results.maps`` the others (``None`` for one map).

        Raises
        ------
        ValueError
            A text field is too long, not a string, or holds lone surrogates (the message names
            the field); a bad ``record_id``; a naive ``created_at``; a ``self_check`` that is
            not the schema's ``selfCheck`` (the message names ``self_check``).
        """
        if self_check is not None:
            check_self_check(self_check)
        now = created_at or datetime.now(UTC)
        if now.tzinfo is None:
            raise ValueError("created_at must be timezone-aware (UTC)")
        text = dict(learner=learner, label=label, prediction=prediction, explanation=explanation,
                    notes=notes)
        for field, value in text.items():
            check_text(field, value)
        layer = result if isinstance(result, LayerResult) else LayerResult.of(result)
        r = layer.maps[0]
        p = r.projection
        first = _map_results(r)
        y = first.pop("y")
        data = {
            "schema_version": SCHEMA_VERSION,
            "id": record_id or new_record_id(now),
            "created_at": now.astimezone(UTC).isoformat(timespec="microseconds"),
            "app_version": __version__,
            **text,
            "inputs": {
                "queries": _jsonable(r.queries), "keys": _jsonable(r.keys),
                "values": _jsonable(r.values), "d_k": int(r.d_k),
                "padding_mask": _jsonable(r.key_is_real), "d_v": r.d_v,
                "projection": None if p is None else {
                    "X": _jsonable(p.x), "W_Q": _jsonable(p.w_q), "W_K": _jsonable(p.w_k),
                    "W_V": _jsonable(p.w_v), "d_model": p.d_model, "W_O": _jsonable(p.w_o),
                    "X_kv": _jsonable(p.x_kv),
                },
                "batch": None if layer.B == 1 else {
                    "X": _jsonable(layer.x), "X_kv": _jsonable(layer.x_kv),
                    "padding_mask": _jsonable(layer.padding_mask),
                },
                "ablation": None if ablation is None else {
                    "target": ablation.target, "change": ablation.change, "factor": ablation.factor,
                    "matrix": _jsonable(ablation.matrix),
                },
            },
            "settings": {
                "causal": bool(layer.causal), "mask_after_softmax": layer.mode.name == "mask_after_softmax",
                "failure_mode": layer.mode.name, "causal_alignment": layer.causal_alignment,
            },
            "results": {
                **first,
                **{k: _jsonable(np.float64(getattr(layer, k)))
                   for k in ("total_future_weight", "min_row_sum", "max_row_sum_error")},
                "checks": [_check_dict(c) for c in layer.checks],
                "failed_checks": list(layer.failed_checks),
                "y": y,
                "maps": None if len(layer.maps) == 1 else [_map_results(m) for m in layer.maps[1:]],
                "ablation": None if ablation is None else {
                    "statements": [_check_dict(c) for c in ablation.statements],
                    "maps": [{"weights": _jsonable(m.weights), "output": _jsonable(m.output),
                              "y": _jsonable(m.y)} for m in ablation.after.maps],
                },
            },
            **({} if self_check is None else {"self_check": self_check}),
        }
        # Built to the schema's shape (the tests validate every mode and input kind), so not
        # validated again here: jsonschema takes up to 0.4 s on the largest run a learner saves.
        # The JSON round trip still refuses a non-finite number and leaves JSON-native data only.
        return cls(**json.loads(json.dumps(data, allow_nan=False)))

    @classmethod
    def from_dict(cls, data: Any) -> ExperimentRecord:
        """Validate JSON-native ``data`` (:func:`check_record`: the JSON Schema and the shape rules)
        and wrap a deep copy of it.

        Raises
        ------
        RecordError
            Not an experiment record of version 1, 2 or 3; :class:`NewerSchemaError` for a newer
            version.
        """
        check_record(data)
        return cls(**json.loads(json.dumps(data, allow_nan=False)))

    @classmethod
    def from_json(cls, text: str | bytes) -> ExperimentRecord:
        """Parse strict JSON (``NaN``/``Infinity`` tokens refused) and check it.

        Raises
        ------
        RecordError
            Not valid strict JSON (or not UTF-8), or not an experiment record of version 1, 2
            or 3; :class:`NewerSchemaError` for a newer version.
        """
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError
            raise RecordError(f"not valid JSON: {error}") from None
        check_record(data)
        return cls(**data)

    def to_dict(self) -> dict:
        """The record as a fresh JSON-native dict (the schema's shape; no ``self_check`` key
        without one)."""
        data = asdict(self)
        if data["self_check"] is None:
            del data["self_check"]
        return data

    def to_json(self, *, indent: int | None = None) -> str:
        """Strict RFC 8259 JSON; UTF-8 text is written as is (``ensure_ascii=False``)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if self.self_check is None:
            del fields["self_check"]
        return json.dumps(fields, allow_nan=False, ensure_ascii=False, indent=indent)

    @property
    def T(self) -> int:
        """Number of tokens (queries) per batch item."""
        batch = self.inputs.get("batch")
        return len(self.inputs["queries"]) if batch is None else len(batch["X"][0])

    @property
    def T_k(self) -> int:
        """Number of keys per batch item: ``T`` unless cross-attention gave another sequence."""
        batch = self.inputs.get("batch")
        if batch is None:
            return len(self.inputs["keys"])
        return self.T if batch["X_kv"] is None else len(batch["X_kv"][0])

    @property
    def B(self) -> int:
        """Number of batch items (1 for one sequence and in every version-1 or -2 record)."""
        batch = self.inputs.get("batch")
        return 1 if batch is None else len(batch["X"])

    @property
    def d_v(self) -> int | None:
        """Width of the values (1 when one number per token), ``None`` without values."""
        if "d_v" in self.inputs:
            return self.inputs["d_v"]
        values = self.inputs["values"]  # version 1
        return None if values is None else (len(values[0]) if isinstance(values[0], list) else 1)

    @property
    def has_w_o(self) -> bool:
        """Whether the output projection W_O was given (``Y = H W_O``; version 3 only)."""
        projection = self.inputs.get("projection")
        return projection is not None and projection.get("W_O") is not None

    @property
    def cross_attention(self) -> bool:
        """Whether keys and values came from a second sequence X_kv (version 3 only)."""
        projection = self.inputs.get("projection")
        return projection is not None and projection.get("X_kv") is not None

    @property
    def causal_alignment(self) -> str | None:
        """``"top_left"``, ``"bottom_right"``, or ``None`` (not asked; every version-1 or -2 record)."""
        return self.settings.get("causal_alignment")

    @property
    def ablation_target(self) -> str | None:
        """The matrix an ablation changed (``"W_Q"`` … ``"W_O"``), ``None`` without one."""
        ablation = self.inputs.get("ablation")
        return None if ablation is None else ablation["target"]

    @property
    def maps(self) -> list[dict]:
        """Each attention map's results, the first map first (:data:`MAP_KEYS`, and for the first
        map every other key of ``results``): ``[results]`` for one map and every version-1 or -2
        record; the dicts are the record's own, read-only."""
        return [self.results, *(self.results.get("maps") or ())]

    @property
    def d_k(self) -> int:
        """Head width of the queries and keys (1 in scalar mode)."""
        return self.inputs["d_k"]

    @property
    def d_model(self) -> int | None:
        """Width of X in matrix mode, ``None`` otherwise (and in every version-1 record)."""
        projection = self.inputs.get("projection")
        return None if projection is None else projection["d_model"]

    @property
    def run_inputs(self) -> RunInputs:
        """What the run was computed from, and its texts, for every schema version.

        See :class:`~attention_core.run_inputs.RunInputs`: the input mode (scalar, vector or
        matrix), sizes, numbers, padding, causal mask, failure mode and free text, with
        ``compute()`` to run it again exactly as saved.
        """
        return _run_inputs_of(self)

    @property
    def failure_mode(self) -> str:
        """Name of the failure mode the run used (``"correct"`` when none)."""
        return self.settings["failure_mode"]

    @property
    def causal(self) -> bool:
        return self.settings["causal"]

    @property
    def title(self) -> str:
        """The run's one name on every page and export (:func:`~attention_core.modes.run_title`)."""
        return run_title(self.failure_mode, self.causal, self.T)

    @property
    def mask_after_softmax(self) -> bool:
        return self.settings["mask_after_softmax"]

    @property
    def total_future_weight(self) -> float | None:
        """Total future-token weight over every map of the layer, ``None`` if it was not finite."""
        return self.results["total_future_weight"]

    @property
    def min_row_sum(self) -> float | None:
        return self.results["min_row_sum"]

    @property
    def max_row_sum_error(self) -> float | None:
        return self.results["max_row_sum_error"]

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """Names of the layer's failed checks, in audit order."""
        return tuple(self.results["failed_checks"])

    @property
    def created_datetime(self) -> datetime:
        """``created_at`` as an aware datetime."""
        return datetime.fromisoformat(self.created_at)


def _frozen(value: object) -> object:
    """Nested lists as nested tuples (the record's own lists stay untouched and unshared)."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _run_inputs_of(record: ExperimentRecord) -> RunInputs:
    """The :class:`RunInputs` of a (checked) record of schema version 1, 2 or 3, for
    :attr:`ExperimentRecord.run_inputs`."""
    inputs, settings = record.inputs, record.settings
    projection = inputs.get("projection")  # absent in version 1
    batch = inputs.get("batch")  # absent before version 3
    ablation = inputs.get("ablation")
    values = inputs["values"]
    two_d = any(isinstance(inputs[k], list) and isinstance(inputs[k][0], list)
                for k in ("queries", "keys", "values") if inputs[k] is not None)
    matrix = {"x": None, "w_q": None, "w_k": None, "w_v": None, "w_o": None, "x_kv": None,
              "batch": None, "batch_kv": None}
    padding = None if inputs["padding_mask"] is None else [inputs["padding_mask"]]
    if projection is not None:
        xs = [projection["X"]] if batch is None else batch["X"]
        x_kvs = None
        if projection.get("X_kv") is not None:
            x_kvs = [projection["X_kv"]] if batch is None else batch["X_kv"]
        matrix = {"x": xs[0], "w_q": projection["W_Q"], "w_k": projection["W_K"],
                  "w_v": projection["W_V"], "w_o": projection.get("W_O"),
                  "x_kv": None if x_kvs is None else x_kvs[0], "batch": xs, "batch_kv": x_kvs}
        if batch is not None:
            padding = batch["padding_mask"]
    return RunInputs(
        schema_version=record.schema_version,
        input_mode="matrix" if projection is not None else ("vector" if two_d else "scalar"),
        T=record.T, d_k=inputs["d_k"], d_v=record.d_v, d_model=record.d_model,
        queries=_frozen(inputs["queries"]), keys=_frozen(inputs["keys"]), values=_frozen(values),
        **{k: _frozen(v) for k, v in matrix.items()},
        padding_mask=None if padding is None else _frozen(padding[0]),
        causal=settings["causal"], failure_mode=settings["failure_mode"],
        mask_after_softmax=settings["mask_after_softmax"],
        learner=record.learner, label=record.label, prediction=record.prediction,
        explanation=record.explanation, notes=record.notes,
        B=record.B, T_k=record.T_k, padding=_frozen(padding),
        causal_alignment=settings.get("causal_alignment"),
        ablation=None if ablation is None else {k: _frozen(v) for k, v in ablation.items()},
    )


__all__ = ["ID_PATTERN", "READABLE_VERSIONS", "SCHEMA_PATH", "SCHEMA_VERSION", "TEXT_LIMITS",
           "ExperimentRecord", "NewerSchemaError", "RecordError", "RunInputs", "check_record",
           "check_self_check", "check_text", "new_record_id", "validate_record"]
