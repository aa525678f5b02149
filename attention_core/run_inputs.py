"""What a saved run was computed from, read back from its record whatever its schema version.

A page that opens a saved run again needs the inputs and settings exactly as saved, not the
record's JSON layout: :class:`RunInputs` gives them the same way for version-1 records (scalar or
vector inputs, no ``d_v`` or ``projection`` keys), version-2 records (matrix mode too) and
version-3 records (a batch, cross-attention, W_O, a causal alignment, an ablation).
:meth:`RunInputs.compute` runs the core on them again as a whole layer, which gives the saved
results exactly, and :meth:`RunInputs.compute_ablation` the saved ablation.

Left out: the record format itself (:mod:`attention_core.records`, which reads a record into a
:class:`RunInputs` and imports this module, never the reverse) and any formatting for a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from attention_core.ablation import Ablation, ablate
from attention_core.attention import scaled_dot_product_attention
from attention_core.layer import LayerResult, attention_layer

Numbers = tuple  # tuple of float, or tuple of tuples of float (one per row), or deeper


@dataclass(frozen=True)
class RunInputs:
    """A saved run's inputs, settings and texts, as saved; the same for schema versions 1 to 3.

    Numbers are nested tuples of float, rows first, exactly the floats of the record.

    Attributes
    ----------
    schema_version : int
        The record's version (1, 2 or 3).
    input_mode : {"scalar", "vector", "matrix"}
        ``"matrix"`` when the run was projected from X; ``"vector"`` when any of the queries,
        keys or values is one row per token (a ``(T, 1)`` column included); else ``"scalar"``.
    T, d_k : int
        Tokens (queries) per batch item and head width.
    d_v : int or None
        Width of the values (1 when one number per token); ``None`` without values.
    d_model : int or None
        Width of X in matrix mode, else ``None``.
    queries : tuple, shape (T,) or (T, d_k)
        The first map's, as saved: in matrix mode the projections ``X W_Q`` as computed; in the
        ``batch_items_mixed`` mode over a batch, the flattened ``B·T`` rows.
    keys : tuple, shape (T_k,) or (T_k, d_k)
        Likewise (``X_kv W_K`` in cross-attention).
    values : tuple, shape (T_k,) or (T_k, d_v), or None
    x : tuple, shape (T, d_model), or None
        Matrix mode only: batch item 1's X, like ``w_q``, ``w_k`` (d_model × d_k), ``w_v``
        (d_model × d_v, or ``None`` without values) and ``w_o`` (d_v × d_model, or ``None``).
    padding_mask : tuple of bool, shape (T_k,), or None
        Batch item 1's, ``True`` for a real token; ``None`` when no padding mask was given.
    causal : bool
    failure_mode : str
        A key of :data:`~attention_core.modes.FAILURE_MODES`.
    mask_after_softmax : bool
        Whether the broken "mask after softmax" setting was on (the same as
        ``failure_mode == "mask_after_softmax"``).
    learner, label, prediction, explanation, notes : str or None
        The free text saved with the run.
    B : int
        Batch items (1 for one sequence and every version-1 or -2 record).
    T_k : int
        Keys per batch item (``T`` unless cross-attention).
    w_o : tuple, shape (d_v, d_model), or None
    x_kv : tuple, shape (T_k, d_model), or None
        Cross-attention only: batch item 1's second sequence.
    batch : tuple, shape (B, T, d_model), or None
        Matrix mode only: every batch item's X (``(x,)`` for one sequence).
    batch_kv : tuple, shape (B, T_k, d_model), or None
        Cross-attention only: every batch item's X_kv.
    padding : tuple of tuples of bool, shape (B, T_k), or None
        Every batch item's padding mask.
    causal_alignment : {"top_left", "bottom_right"} or None
    ablation : dict or None
        ``{"target", "change", "factor", "matrix"}`` of a saved ablation (``matrix`` the changed
        matrix as nested tuples), as :func:`~attention_core.ablation.ablate` takes them.
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
    B: int
    T_k: int
    w_o: Numbers | None
    x_kv: Numbers | None
    batch: Numbers | None
    batch_kv: Numbers | None
    padding: tuple[tuple[bool, ...], ...] | None
    causal_alignment: str | None
    ablation: dict | None

    def compute(self) -> LayerResult:
        """Run the core again on these inputs and settings, as a whole layer.

        Returns
        -------
        LayerResult
            From :func:`~attention_core.layer.attention_layer` in matrix mode, else
            ``LayerResult.of`` a :func:`~attention_core.attention.scaled_dot_product_attention`
            result. Its record (same id, time and texts, and :meth:`compute_ablation`) equals a
            saved version-3 record, results included. For a version-1 or -2 record every saved
            key of ``results`` is the same except ``checks``: those records hold 7 checks, the
            core now makes 10 (``projections``, ``output_projection`` and ``batch_independence``
            added), and the 7 saved ones are the same by name.

        Raises
        ------
        ValueError
            Only for a record the checks let through that the core refuses (not expected).
        """
        settings = {"causal": self.causal, "failure_mode": self.failure_mode,
                    "causal_alignment": self.causal_alignment}
        if self.input_mode == "matrix":
            return attention_layer(self.batch, self.w_q, self.w_k, self.w_v, self.w_o, x_kv=self.batch_kv,
                                   padding_mask=self.padding, **settings)
        return LayerResult.of(scaled_dot_product_attention(
            self.queries, self.keys, self.values, padding_mask=self.padding_mask, **settings))

    def compute_ablation(self, layer: LayerResult | None = None) -> Ablation | None:
        """The saved ablation computed again (``None`` when the run has none).

        Parameters
        ----------
        layer : LayerResult, optional
            :meth:`compute`'s result, if already at hand (computed again otherwise).

        Returns
        -------
        Ablation or None
            :func:`~attention_core.ablation.ablate` of the layer with the saved target, change,
            factor and matrix.
        """
        if self.ablation is None:
            return None
        a = self.ablation
        return ablate(layer or self.compute(), a["target"], a["change"], factor=a["factor"], matrix=a["matrix"])
