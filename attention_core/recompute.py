"""A record's results, computed again from its inputs and settings: what an import may believe.

An experiment record carries its inputs, its settings and its results; only the first two are
evidence. :func:`recomputed_record` runs the core on them again (:meth:`RunInputs.compute`, and
the saved ablation) and compares every number, flag and name of the record's ``settings``,
``inputs`` and ``results`` with what the core gives, refusing the record at the first
disagreement. A run this workbench saved recomputes exactly (floats are written by their
shortest ``repr``); a record another tool wrote is taken when its numbers agree to within
:data:`RTOL` and :data:`ATOL`, and is then stored with the core's numbers.

Left out: parsing and the JSON Schema (:mod:`attention_core.record_checks`, run first), storage.
"""

from __future__ import annotations

import json
import math
from typing import Any

from attention_core.records import ExperimentRecord, RecordError

# Tolerances of math.isclose: |given - computed| <= max(RTOL * max(|given|, |computed|), ATOL).
# About six significant digits (a tool writing float32, or numbers rounded to 6 digits), and a
# weight under ATOL written as 0.
RTOL = 1e-6
ATOL = 1e-9
# Checks added in version 3 (the complete layer): a version-1 or -2 record holds the others.
_V3_CHECKS = ("projections", "output_projection", "batch_independence")
# The core's words about a check, taken from the recomputation rather than compared: they say
# what the numbers, compared exactly, already say.
_WORDS = ("title", "message")
# The summaries first, so a refusal names the number a page shows (the smallest row sum).
_FIRST = ("min_row_sum", "max_row_sum_error", "total_future_weight", "failed_checks", "checks")


class ResultsDisagreeError(RecordError):
    """A record whose results are not what its inputs and settings give.

    Attributes
    ----------
    where : str
        The first key that differs, e.g. ``"results.min_row_sum"`` or ``"results.weights[2][0]"``.
    says, gives : object
        The record's value there and the core's.
    """

    def __init__(self, where: str, says: Any, gives: Any) -> None:
        self.where, self.says, self.gives = where, says, gives
        super().__init__(f"{where} says {_shown(says)}; its inputs give {_shown(gives)} "
                         "(results are computed again on import)")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    return text if len(text) <= 80 else f"{text[:77]}…"


def recomputed_record(record: ExperimentRecord) -> ExperimentRecord:
    """``record`` checked against the core's recomputation of it, with the core's numbers.

    Every number of ``settings``, ``inputs`` and ``results`` must agree with the recomputation
    to within :data:`RTOL` (relative) and :data:`ATOL` (absolute), as :func:`math.isclose`
    compares; every flag, integer, name, ``null`` and list length must be the same. Checks'
    ``title`` and ``message`` (words, not evidence) are the core's. A version-1 or -2 record is
    compared on the keys it has (its 7 checks among the core's 10).

    Parameters
    ----------
    record : ExperimentRecord
        Already checked (:meth:`ExperimentRecord.from_dict` or :meth:`~ExperimentRecord.from_json`).

    Returns
    -------
    ExperimentRecord
        ``record`` itself when it agrees exactly (a run this workbench saved); else a copy with
        the core's numbers and words in place of the record's, in the record's own version.

    Raises
    ------
    ResultsDisagreeError
        The first key that differs beyond the tolerance, with both values: ``"results.min_row_sum
        says 1.0; its inputs give 0.0012…"``.
    RecordError
        The core refuses the inputs (e.g. scores that overflow float64); the message is the core's.
    """
    run = record.run_inputs
    try:
        layer = run.compute()
        ablation = run.compute_ablation(layer)
    except (ValueError, OverflowError, FloatingPointError) as error:  # AttentionInputError among them
        raise RecordError(f"its inputs cannot be computed again: {error}") from None
    computed = ExperimentRecord.from_result(layer, ablation=ablation, record_id=record.id)
    version = record.schema_version
    same = {part: _agreed(getattr(record, part), getattr(computed, part), part, version)
            for part in ("settings", "inputs", "results")}
    if all(same[part] == getattr(record, part) and _floats_alike(same[part], getattr(record, part))
           for part in same):
        return record
    return ExperimentRecord(**{**record.to_dict(), **same})


def _agreed(given: Any, computed: Any, where: str, version: int) -> Any:
    """``given`` with the core's numbers and words, or :class:`ResultsDisagreeError` at the first
    key that differs."""
    if isinstance(given, dict):
        if not isinstance(computed, dict):
            raise ResultsDisagreeError(where, given, computed)
        order = [k for k in _FIRST if k in given] + [k for k in given if k not in _FIRST]
        out = {}
        for key in order:
            if key not in computed:
                raise ResultsDisagreeError(f"{where}.{key}", given[key], None)
            if key in _WORDS and where.rpartition(".")[2].startswith(("checks[", "statements[")):
                out[key] = computed[key]
            else:
                out[key] = _agreed(given[key], computed[key], f"{where}.{key}", version)
        return {k: out[k] for k in given}
    if isinstance(given, list):
        if not isinstance(computed, list):
            raise ResultsDisagreeError(where, given, computed)
        if where == "results.checks" and version < 3:
            computed = [c for c in computed if c["name"] not in _V3_CHECKS]
        if len(given) != len(computed):
            raise ResultsDisagreeError(where, given, computed)
        return [_agreed(g, c, f"{where}[{i}]", version) for i, (g, c) in enumerate(zip(given, computed, strict=True))]
    if not _alike(given, computed):
        raise ResultsDisagreeError(where, given, computed)
    return computed


def _alike(given: Any, computed: Any) -> bool:
    if type(computed) is float and type(given) in (int, float):
        try:
            return math.isclose(given, computed, rel_tol=RTOL, abs_tol=ATOL)
        except OverflowError:  # an integer beyond float64 (JSON allows one)
            return False
    if type(given) is not type(computed) and not (type(given) in (int, float) and type(computed) is int):
        return False
    return given == computed


def _floats_alike(a: Any, b: Any) -> bool:
    """Whether two equal JSON values also agree in number type (1 is not 1.0 in the text)."""
    if isinstance(a, dict):
        return all(_floats_alike(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return all(_floats_alike(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b)


__all__ = ["ATOL", "RTOL", "ResultsDisagreeError", "recomputed_record"]
