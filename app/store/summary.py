"""A run without its matrices: what the instructor's table, chart, filters and the CSV need.

Built from a store row (:meth:`RunSummary.from_row`, no JSON parsed) or from a full record
(:meth:`RunSummary.of`). Left out: the matrices (read the record with ``RunStore.get``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from attention_core.modes import run_title
from attention_core.records import ExperimentRecord

# The complete layer's sizes (record schema version 3), the same on records and summaries.
LAYER_FIELDS = ("B", "T_k", "d_v", "has_w_o", "cross_attention", "causal_alignment", "ablation_target")


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run without its matrices; attribute names match :class:`ExperimentRecord`'s.

    So code that reads ``id``, ``created_at``, the free text, ``causal``, ``mask_after_softmax``,
    ``failure_mode``, ``T``, ``d_k``, ``d_model`` (``None`` unless matrix mode), ``title``,
    ``total_future_weight``, ``min_row_sum``, ``max_row_sum_error``, ``failed_checks``, or the
    complete layer's ``B``, ``T_k``, ``d_v``, ``has_w_o``, ``cross_attention``,
    ``causal_alignment`` and ``ablation_target`` (the table, the chart,
    :func:`~app.store.exports.export_csv`) takes either. ``created_datetime``
    is the aware UTC time the store sorts by.
    """

    id: str
    created_at: str
    learner: str | None
    label: str | None
    prediction: str | None
    explanation: str | None
    notes: str | None
    causal: bool
    mask_after_softmax: bool
    failure_mode: str
    T: int
    d_k: int
    d_model: int | None
    total_future_weight: float | None
    min_row_sum: float | None
    max_row_sum_error: float | None
    failed_checks: tuple[str, ...]
    B: int
    T_k: int
    d_v: int | None
    has_w_o: bool
    cross_attention: bool
    causal_alignment: str | None
    ablation_target: str | None
    created_datetime: datetime = field(default=None, repr=False, compare=False)
    # Its explanation was written with the key of the page that saved it (store version 6): only
    # the store knows; a record alone never says so (RunSummary.of gives False).
    explained_by_owner: bool = False

    def __post_init__(self) -> None:
        if self.created_datetime is None:
            object.__setattr__(self, "created_datetime", datetime.fromisoformat(self.created_at))

    @property
    def title(self) -> str:
        """The run's one name on every page and export (:func:`~attention_core.modes.run_title`)."""
        return run_title(self.failure_mode, self.causal, self.T)

    @classmethod
    def of(cls, record: ExperimentRecord) -> RunSummary:
        """The summary of a full record."""
        return cls(
            id=record.id, created_at=record.created_at, learner=record.learner,
            label=record.label, prediction=record.prediction, explanation=record.explanation,
            notes=record.notes, causal=record.causal, mask_after_softmax=record.mask_after_softmax,
            failure_mode=record.failure_mode, T=record.T, d_k=record.d_k, d_model=record.d_model,
            total_future_weight=record.total_future_weight, min_row_sum=record.min_row_sum,
            max_row_sum_error=record.max_row_sum_error, failed_checks=record.failed_checks,
            **{name: getattr(record, name) for name in LAYER_FIELDS},
        )

    @classmethod
    def from_row(cls, row) -> RunSummary:
        """The summary of a ``workbench_runs`` row (a mapping with its columns; ``record`` unused).

        ``created_at`` is given back in the record's own form (UTC, microseconds, ``+00:00``).
        """
        created = row["created_at"].astimezone(UTC)
        failed = row["failed_checks"]
        return cls(
            id=row["id"], created_at=created.isoformat(timespec="microseconds"),
            learner=row["learner"], label=row["label"], prediction=row["prediction"],
            explanation=row["explanation"], notes=row["notes"], causal=bool(row["causal"]),
            mask_after_softmax=bool(row["mask_after_softmax"]), failure_mode=row["failure_mode"],
            T=row["T"], d_k=row["d_k"], d_model=row["d_model"],
            total_future_weight=row["total_future_weight"], min_row_sum=row["min_row_sum"],
            max_row_sum_error=row["max_row_sum_error"],
            failed_checks=tuple(failed.split(";")) if failed else (), created_datetime=created,
            B=row["B"], T_k=row["T_k"], d_v=row["d_v"], has_w_o=bool(row["has_w_o"]),
            cross_attention=bool(row["cross_attention"]), causal_alignment=row["causal_alignment"],
            ablation_target=row["ablation_target"], explained_by_owner=bool(row["explained_by_owner"]),
        )


__all__ = ["RunSummary"]
