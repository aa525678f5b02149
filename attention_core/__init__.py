"""attention_core: a small, exact, documented reference for masked scaled dot-product attention.

Needs only numpy at import time. Public names (see PRODUCT.md): ``scaled_dot_product_attention``,
matrix mode's ``project`` and ``self_attention`` (``Q = X W_Q`` ...), the whole layer over a batch
(``attention_layer``: ``Y = H W_O``, cross-attention, the nine audit steps) and its projection
ablations (``ablate``), ``stable_softmax``, the
failure modes, the checks, one row's steps (``row_steps``) and whether an input exposes its mode
(``exposure``), and experiment records (build, strict JSON, round trip, validation). Storage is
the application's (``app.store``).
"""

from attention_core._version import __version__ as __version__  # re-exported, not in __all__
from attention_core.ablation import ABLATION_CHANGES, ABLATION_TARGETS, Ablation, ablate, changed_matrix
from attention_core.attention import AttentionResult, scaled_dot_product_attention
from attention_core.checks import CHECK_NAMES, CHECK_OBJECTS, CHECK_STEPS, Check, is_row_stochastic, run_checks
from attention_core.layer import MAX_BATCH, LayerResult, attention_layer
from attention_core.masks import ALIGNMENTS, additive_mask, causal_mask, combine_masks, future_cells, padding_mask
from attention_core.modes import FAILURE_MODES, FailureMode, get_mode
from attention_core.projection import Projection, project, self_attention
from attention_core.records import ExperimentRecord, NewerSchemaError, RecordError, RunInputs, validate_record
from attention_core.softmax import naive_softmax, stable_softmax
from attention_core.steps import RowSteps, exposure, row_steps
from attention_core.validation import MAX_TOKENS, AttentionInputError

__all__ = [
    "ABLATION_CHANGES",
    "ABLATION_TARGETS",
    "ALIGNMENTS",
    "Ablation",
    "AttentionInputError",
    "AttentionResult",
    "CHECK_NAMES",
    "CHECK_OBJECTS",
    "CHECK_STEPS",
    "Check",
    "ExperimentRecord",
    "FAILURE_MODES",
    "FailureMode",
    "LayerResult",
    "MAX_BATCH",
    "MAX_TOKENS",
    "NewerSchemaError",
    "Projection",
    "RecordError",
    "RowSteps",
    "RunInputs",
    "ablate",
    "additive_mask",
    "attention_layer",
    "causal_mask",
    "changed_matrix",
    "combine_masks",
    "exposure",
    "future_cells",
    "get_mode",
    "is_row_stochastic",
    "naive_softmax",
    "padding_mask",
    "project",
    "row_steps",
    "run_checks",
    "scaled_dot_product_attention",
    "self_attention",
    "stable_softmax",
    "validate_record",
]
