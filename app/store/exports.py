"""Exports: a strict-JSON bundle of experiment records, and CSV with one row per run.

Pure functions of the runs they are given, streamed a run at a time (``iter_…``), so a class of
100,000 runs is written as it is read. The bundle is the unit of exchange the import reads back
(:mod:`app.store.importing`); the learner page's *Download my runs* writes the same formats.

An export never writes what it cannot stand behind: a stored run that cannot be read (text that
is not a record's strict JSON, a number beyond float64, ``inf`` or ``nan`` in a CSV column) is left
out as an :class:`UnreadableRunError`, collected in the caller's ``left_out`` list and named in the
bundle's ``skipped``; the bundle stays valid JSON and no CSV cell says ``inf`` or ``nan``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from attention_core.records import SCHEMA_VERSION, ExperimentRecord, RecordError

EXPORT_FORMAT = "attention-workbench-runs"
# Later columns are appended ("mode", the run's title; then d_k and d_model; then the complete
# layer's sizes) so that the older columns keep their places in spreadsheets built on them.
CSV_COLUMNS = ("id", "created_at", "learner", "label", "causal", "mask_after_softmax",
               "failure_mode", "T", "total_future_weight", "min_row_sum", "max_row_sum_error",
               "failed_checks", "prediction", "explanation", "notes", "mode", "d_k", "d_model",
               "B", "T_k", "d_v", "has_w_o", "cross_attention", "causal_alignment", "ablation_target")


class UnreadableRunError(RecordError):
    """A stored run an export cannot read, so leaves out (a store edited by hand).

    Parameters
    ----------
    run_id : str
        The run's id (its row's, whatever its text says).
    reason : str
        Why, in a few words: ``"not a record's strict JSON (…)"``, ``"min_row_sum is inf, not a
        finite number"``.
    """

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"run {run_id} could not be read and was left out: {reason}")
        self.run_id, self.reason = run_id, reason


def leave_out(error: UnreadableRunError, left_out: list | None) -> None:
    """Put ``error`` in ``left_out``, or raise it when there is no list."""
    if left_out is None:
        raise error
    left_out.append(error)


def export_json(records: Iterable[ExperimentRecord | str], left_out: list[UnreadableRunError] | None = None) -> str:
    """A strict-JSON bundle of ``records``, lossless (free text exactly as saved).

    Parameters
    ----------
    records : iterable of ExperimentRecord, or of their ``to_json()`` text
        In the order to write them (the store gives its stored text, written as it is, having
        left out what it could not read: ``RunStore.iter_texts(left_out=…)``).
    left_out : list of UnreadableRunError, optional
        The runs left out, filled while ``records`` is read (the same list given to the store):
        written last, as ``skipped``.

    Returns
    -------
    str
        ``{"format": "attention-workbench-runs", "schema_version": 3, "exported_at": <UTC ISO
        8601>, "runs": [record, ...], "skipped": []}`` with a final newline; no
        ``NaN``/``Infinity`` tokens. One run per line. Each record is written as it is stored, in
        its own schema version (a version-1 run stays version 1, a version-2 run version 2);
        ``schema_version`` is the
        newest record version the bundle may hold. ``skipped`` lists the runs left out,
        ``{"id", "reason"}`` each (empty but for a store edited by hand).
    """
    return "".join(iter_export_json(records, left_out))


def iter_export_json(records: Iterable[ExperimentRecord | str],
                     left_out: list[UnreadableRunError] | None = None) -> Iterator[str]:
    """:func:`export_json` in pieces, a run at a time, for writing a large class as it is read."""
    head = json.dumps({"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION,
                       "exported_at": datetime.now(UTC).isoformat(timespec="microseconds")})
    yield head[:-1] + ', "runs": ['
    separator = "\n"
    for record in records:
        yield separator + (record if isinstance(record, str) else record.to_json())
        separator = ",\n"
    skipped = json.dumps([{"id": e.run_id, "reason": e.reason} for e in left_out or ()], ensure_ascii=False)
    yield ("\n" if separator != "\n" else "") + f'], "skipped": {skipped}}}\n'


def _csv_text(value: str | None) -> str:
    if value is None:
        return ""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _csv_number(run_id: str, column: str, value: float | int | None) -> str:
    if value is None:
        return ""
    if not math.isfinite(value):  # only a store edited by hand: the core writes null
        raise UnreadableRunError(run_id, f"{column} is {value!r}, not a finite number")
    return repr(value)


def export_csv(records: Iterable, left_out: list[UnreadableRunError] | None = None) -> str:
    """One CSV row per run (columns :data:`CSV_COLUMNS`, RFC 4180 quoting, ``\\r\\n`` lines).

    Parameters
    ----------
    records : iterable of ExperimentRecord or RunSummary
    left_out : list of UnreadableRunError, optional
        Where a run with a number that is ``inf`` or ``nan`` goes, left out of the CSV; without
        a list, such a run raises :class:`UnreadableRunError`.

    Returns
    -------
    str
        A header row, then one row per run. Booleans are ``true``/``false``; a number that was
        not finite is an empty cell; failed checks are joined by ``;``; ``mode`` is the run's
        title (:func:`~attention_core.modes.run_title`), as the pages name it; ``inf`` and ``nan``
        are never written (see ``left_out``); ``d_k`` is the
        head width and ``d_model`` the width of X, empty unless the run was in matrix mode.
        Then the complete layer (Review, "The Complete Layer"): ``B`` the batch size (1 for one
        sequence), ``T_k`` the keys per item (``T`` unless cross-attention), ``d_v`` the values'
        width (empty without values), ``has_w_o`` whether W_O was given, ``cross_attention``
        whether keys and values came from a second sequence, ``causal_alignment``
        (``top_left``, ``bottom_right`` or empty) and ``ablation_target`` (``W_Q`` … ``W_O``,
        empty without an ablation). A version-1 or -2 run is one sequence without W_O.

    Notes
    -----
    Free-text cells (learner, label, prediction, explanation, notes) starting with ``=``,
    ``+``, ``-``, ``@``, tab or CR get a leading ``'`` so spreadsheets do not run them as
    formulas (OWASP "CSV injection"); number cells are never changed. The JSON export keeps
    text exactly as saved.
    """
    return "".join(iter_export_csv(records, left_out=left_out))


def csv_row(run_id: str, created_at: str, learner: str | None, label: str | None, causal: bool,
            mask_after_softmax: bool, failure_mode: str, T: int, total_future_weight: float | None,
            min_row_sum: float | None, max_row_sum_error: float | None, failed_checks: str,
            prediction: str | None, explanation: str | None, notes: str | None, title: str, d_k: int,
            d_model: int | None, B: int, T_k: int, d_v: int | None, has_w_o: bool, cross_attention: bool,
            causal_alignment: str | None, ablation_target: str | None) -> list:
    """One run's cells in :data:`CSV_COLUMNS` order (see :func:`export_csv`); ``failed_checks``
    already joined by ``;``, ``title`` the run's title. The one place a CSV cell is formatted.

    Raises
    ------
    UnreadableRunError
        A number is ``inf`` or ``nan`` (a store edited by hand), named with the run.
    """
    return [run_id, created_at, _csv_text(learner), _csv_text(label), "true" if causal else "false",
            "true" if mask_after_softmax else "false", failure_mode, T,
            _csv_number(run_id, "total_future_weight", total_future_weight),
            _csv_number(run_id, "min_row_sum", min_row_sum),
            _csv_number(run_id, "max_row_sum_error", max_row_sum_error), failed_checks, _csv_text(prediction),
            _csv_text(explanation), _csv_text(notes), title, d_k, "" if d_model is None else d_model,
            B, T_k, "" if d_v is None else d_v, "true" if has_w_o else "false",
            "true" if cross_attention else "false", causal_alignment or "", ablation_target or ""]


def csv_cells(r) -> list:
    """The CSV row of an :class:`ExperimentRecord` or a :class:`~app.store.RunSummary`."""
    return csv_row(r.id, r.created_at, r.learner, r.label, r.causal, r.mask_after_softmax, r.failure_mode,
                   r.T, r.total_future_weight, r.min_row_sum, r.max_row_sum_error, ";".join(r.failed_checks),
                   r.prediction, r.explanation, r.notes, r.title, r.d_k, r.d_model, r.B, r.T_k, r.d_v,
                   r.has_w_o, r.cross_attention, r.causal_alignment, r.ablation_target)


def iter_export_csv(records: Iterable, batch: int = 1000,
                    left_out: list[UnreadableRunError] | None = None) -> Iterator[str]:
    """:func:`export_csv` in pieces of up to ``batch`` rows."""
    return iter_csv(csv_rows(records, csv_cells, left_out), batch)


def csv_rows(items: Iterable, cells, left_out: list[UnreadableRunError] | None) -> Iterator[list]:
    """``cells(item)`` for each item, a run that cannot be written going to ``left_out``."""
    for item in items:
        try:
            yield cells(item)
        except UnreadableRunError as error:
            leave_out(error, left_out)


def iter_csv(rows: Iterable[list], batch: int = 1000) -> Iterator[str]:
    """The CSV text of ``rows`` (lists of cells from :func:`csv_row`, e.g.
    :meth:`~app.store.RunStore.iter_csv_rows`) under the header, in pieces of up to ``batch`` rows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for count, row in enumerate(rows, 1):
        writer.writerow(row)
        if count % batch == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


__all__ = ["CSV_COLUMNS", "EXPORT_FORMAT", "UnreadableRunError", "csv_cells", "csv_row", "csv_rows", "export_csv",
           "export_json", "iter_csv", "iter_export_csv", "iter_export_json", "leave_out"]
