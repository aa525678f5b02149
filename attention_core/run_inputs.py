"""What a saved run was computed from, read back from its record whatever its schema version.

A page that opens a saved run again needs the inputs and settings exactly as saved, not the
record's JSON layout: :class:`RunInputs` gives them the same way for version-1 records (scalar or
vector inputs, no ``d_v`` or ``projection`` keys) and version-2 records (matrix mode too), and
:meth:`RunInputs.compute` runs the core on them again, which gives the saved results exactly.

Left out: the record format itself (:mod:`attention_core.records`, which reads a record into a
:class:`RunInputs` and imports this module, never the reverse) and any formatting for a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from attention_core.attention import AttentionResult, scaled_dot_product_attention
from attention_core.projection import self_attention

Numbers = tuple  # tuple of float, or tuple of tuples of float (one per row)


@dataclass(frozen=True)
class RunInputs:
    """A saved run's inputs, settings and texts, as saved; the same for schema versions 1 and 2.

    Numbers are nested tuples of float, rows first, exactly the floats of the record.

    Attributes
    ----------
    schema_version : int
        The record's version (1 or 2).
    input_mode : {"scalar", "vector", "matrix"}
        ``"matrix"`` when the run was projected from X; ``"vector"`` when any of the queries,
        keys or values is one row per token (a ``(T, 1)`` column included); else ``"scalar"``.
    T, d_k : int
        Tokens and head width.
    d_v : int or None
        Width of the values (1 when one number per token); ``None`` without values.
    d_model : int or None
        Width of X in matrix mode, else ``None``.
    queries, keys : tuple, shape (T,) or (T, d_k)
        In matrix mode, the projections ``X W_Q`` and ``X W_K`` as computed when saved.
    values : tuple, shape (T,) or (T, d_v), or None
    x : tuple, shape (T, d_model), or None
        Matrix mode only, like ``w_q``, ``w_k`` (d_model × d_k) and ``w_v`` (d_model × d_v, or
        ``None`` without values).
    padding_mask : tuple of bool, shape (T,), or None
        ``True`` for a real token; ``None`` when no padding mask was given.
    causal : bool
    failure_mode : str
        A key of :data:`~attention_core.modes.FAILURE_MODES`.
    mask_after_softmax : bool
        Whether the broken "mask after softmax" setting was on (the same as
        ``failure_mode == "mask_after_softmax"``).
    learner, label, prediction, explanation, notes : str or None
        The free text saved with the run.
    """

    schema_version: int
    input_mode: Literal["scalar", "vector", "matrix"]
    T: int
    d_k: int
    d_v: int | None
    d_model: int | None
    queries: Numbers
    keys: Numbers
    values: Numbers | None
    x: Numbers | None
    w_q: Numbers | None
    w_k: Numbers | None
    w_v: Numbers | None
    padding_mask: tuple[bool, ...] | None
    causal: bool
    failure_mode: str
    mask_after_softmax: bool
    learner: str | None
    label: str | None
    prediction: str | None
    explanation: str | None
    notes: str | None

    def compute(self) -> AttentionResult:
        """Run the core again on these inputs and settings.

        Returns
        -------
        AttentionResult
            From :func:`~attention_core.projection.self_attention` in matrix mode, else
            :func:`~attention_core.attention.scaled_dot_product_attention`; its record (same
            id, time and texts) equals the saved one, results included.

        Raises
        ------
        ValueError
            Only for a record the checks let through that the core refuses (not expected).
        """
        settings = {"causal": self.causal, "padding_mask": self.padding_mask, "failure_mode": self.failure_mode}
        if self.input_mode == "matrix":
            return self_attention(self.x, self.w_q, self.w_k, self.w_v, **settings)
        return scaled_dot_product_attention(self.queries, self.keys, self.values, **settings)

