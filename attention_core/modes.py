"""Failure modes of masked attention, expressed as data.

Each mode is a frozen description of how one pipeline deviates from correct masked scaled
dot-product attention, plus the names of the checks it is expected to break on an input that
exposes it. The pipeline in :mod:`attention_core.attention` reads these knobs; there is no
forked copy of the pipeline per mode. The list follows Self-attention, "Common failure modes".

Review, "The Complete Layer", adds three that only the whole layer can show: the output
projection transposed, batch items mixed (a batch flattened into one sequence) and rows and
columns swapped (the lesson's "Swapping rows and columns": values mixed with ``A^T``).

Left out: modes that need more than one head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class FailureMode:
    """One way to compute attention, right or wrong.

    Attributes
    ----------
    name : str
        Stable identifier used in JSON records and on the command line.
    title : str
        Short human title shown in the UI.
    description : str
        One sentence saying what goes wrong (or that nothing does).
    breaks : frozenset of str
        Names of the checks (see :mod:`attention_core.checks`) this mode fails on an input
        that exposes it, and no others.
    scale : bool
        Divide scores by ``sqrt(d_k)``.
    mask : {"before", "after", "none"}
        Where the masks are applied: to softmax's input (correct), to its output without
        renormalising (broken), or "none": the causal mask is forgotten while a padding mask
        still applies before softmax (Review, "Distinctions to Keep": they are different rules).
    softmax : {"stable", "naive"}
        Stable softmax subtracts the row maximum; naive exponentiates raw scores.
    softmax_axis : int
        Axis softmax normalises over: -1 (key axis, correct) or 0 (query axis, wrong).
    mix : {"values", "keys", "values_transposed"}
        What the weights mix into the output: ``A V`` (correct), ``A K``, or ``A^T V`` (rows and
        columns swapped: column ``j`` of ``A`` answers "who reads token j?", not "what does
        token i read?").
    output_projection : {"normal", "transposed"}
        ``Y = H W_O`` (correct) or ``Y = H W_O^T``.
    batch : {"per_item", "flattened"}
        Each batch item attends within itself (correct), or the batch is flattened into one
        sequence of ``B·T`` tokens so that items read each other.
    """

    name: str
    title: str
    description: str
    breaks: frozenset[str]
    scale: bool = True
    mask: Literal["before", "after", "none"] = "before"
    softmax: Literal["stable", "naive"] = "stable"
    softmax_axis: int = -1
    mix: Literal["values", "keys", "values_transposed"] = "values"
    output_projection: Literal["normal", "transposed"] = "normal"
    batch: Literal["per_item", "flattened"] = "per_item"


CORRECT = FailureMode(
    "correct", "Correct", "Mask before a stable softmax over each row; mix values.", frozenset()
)
MASK_AFTER_SOFTMAX = FailureMode(
    "mask_after_softmax",
    "Mask after softmax (broken)",
    "Softmax sees the future scores, then future weights are zeroed without renormalising, "
    "so rows sum to less than 1.",
    frozenset({"mask", "row_sums"}),
    mask="after",
)
NO_MASK = FailureMode(
    "no_mask",
    "No mask",
    "The causal mask is forgotten (padding is still masked), so future tokens receive weight.",
    frozenset({"mask", "forbidden_zeros"}),
    mask="none",
)
NO_SCALING = FailureMode(
    "no_scaling",
    "No sqrt(d_k) scaling",
    "Scores are not divided by sqrt(d_k), so wider heads give sharper weights.",
    frozenset({"score_scale"}),
    scale=False,
)
NAIVE_SOFTMAX = FailureMode(
    "naive_softmax",
    "Naive softmax",
    "Exponentials of large scores overflow to infinity and give invalid weights.",
    frozenset({"finite_weights", "row_sums"}),
    softmax="naive",
)
WRONG_AXIS = FailureMode(
    "wrong_axis",
    "Softmax over the wrong axis",
    "Softmax normalises down each key column instead of across each query row.",
    frozenset({"row_sums"}),
    softmax_axis=0,
)
KEYS_AS_VALUES = FailureMode(
    "keys_as_values",
    "Keys mixed instead of values",
    "The weights mix the key vectors, so the output carries the wrong information.",
    frozenset({"output"}),
    mix="keys",
)
OUTPUT_PROJECTION_TRANSPOSED = FailureMode(
    "output_projection_transposed",
    "Output projection transposed",
    "Y = H W_Oᵀ instead of H W_O: a shape error when d_v ≠ d_model, and with d_v = d_model the "
    "right shape with the wrong values.",
    frozenset({"output_projection"}),
    output_projection="transposed",
)
BATCH_ITEMS_MIXED = FailureMode(
    "batch_items_mixed",
    "Batch items mixed",
    "The batch is flattened into one sequence of B·T tokens, so a sequence reads another "
    "sequence's tokens.",
    frozenset({"score_scale", "mask", "forbidden_zeros", "batch_independence"}),
    batch="flattened",
)
ROWS_AND_COLUMNS_SWAPPED = FailureMode(
    "rows_and_columns_swapped",
    "Rows and columns swapped",
    "The values are mixed with Aᵀ, so row i answers \"who reads token i?\" instead of \"what does "
    "token i read?\".",
    frozenset({"output"}),
    mix="values_transposed",
)

FAILURE_MODES: dict[str, FailureMode] = {
    m.name: m
    for m in (
        CORRECT,
        MASK_AFTER_SOFTMAX,
        NO_MASK,
        NO_SCALING,
        NAIVE_SOFTMAX,
        WRONG_AXIS,
        KEYS_AS_VALUES,
        OUTPUT_PROJECTION_TRANSPOSED,
        BATCH_ITEMS_MIXED,
        ROWS_AND_COLUMNS_SWAPPED,
    )
}


def get_mode(name: str) -> FailureMode:
    """Return the failure mode called ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`FAILURE_MODES`, e.g. ``"correct"`` or ``"mask_after_softmax"``.

    Returns
    -------
    FailureMode

    Raises
    ------
    ValueError
        If no mode has that name; the message lists the known names.
    """
    try:
        return FAILURE_MODES[name]
    except KeyError:
        known = ", ".join(FAILURE_MODES)
        raise ValueError(f"unknown failure mode {name!r}; known modes: {known}") from None


def run_title(failure_mode: str, causal: bool, T: int) -> str:
    """The one name of a run, as every page, table and export shows it.

    The mode's title, qualified where the mode alone would mislead: causal attention is named
    as such, bidirectional attention (no causal mask) is legitimate and says so, and "mask after
    softmax" with no cell to mask (no causal mask, or a single token) computes correct weights.

    Parameters
    ----------
    failure_mode : str
        A key of :data:`FAILURE_MODES`.
    causal : bool
        Whether the run asked for a causal mask.
    T : int
        Number of tokens, at least 1.

    Returns
    -------
    str
        ``"Correct, causal"``, ``"Correct, bidirectional (no causal mask)"``, ``"Mask after
        softmax (broken)"``, ``"Mask after softmax (broken), nothing to mask: bidirectional"``
        (or ``": one token"``), else the mode's title, with ``", bidirectional"`` when
        ``causal`` is false.

    Raises
    ------
    ValueError
        An unknown ``failure_mode``, or ``T`` below 1.

    Examples
    --------
    >>> run_title("correct", False, 3)
    'Correct, bidirectional (no causal mask)'
    >>> run_title("mask_after_softmax", True, 1)
    'Mask after softmax (broken), nothing to mask: one token'
    """
    mode = get_mode(failure_mode)
    if T < 1:
        raise ValueError(f"a run has at least 1 token, not {T}")
    if mode.name == "correct":
        return f"{mode.title}, causal" if causal else f"{mode.title}, bidirectional (no causal mask)"
    if mode.name == "mask_after_softmax":
        if causal and T > 1:  # some cell is a future token's
            return mode.title
        return f"{mode.title}, nothing to mask: {'one token' if causal else 'bidirectional'}"
    return mode.title if causal else f"{mode.title}, bidirectional"
