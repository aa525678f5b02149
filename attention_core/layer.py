"""The complete single-head layer over a batch: Review, "The Complete Layer".

For batch-major input ``X: B×T×d_model`` one set of parameters (``W_Q``, ``W_K``, ``W_V``,
``W_O``) is shared by every batch item, and each item attends only within itself:
``S: B×T×T``, ``A = softmax_last(S + M)``, ``H = A V: B×T×d_v``, ``Y = H W_O: B×T×d_model``.
Padding is per item ("artificial positions added to make sequence lengths equal in a batch",
Review, "Distinctions to Keep"), so two sequences of different lengths make one batch. In
cross-attention the keys and values come from a second batch ``X_kv: B×T_k×d_model``.

:func:`attention_layer` runs :func:`~attention_core.attention.attend`, the one pipeline, once per
item (or, in the ``batch_items_mixed`` mode, once over the batch flattened into ``B·T`` tokens) and
audits the whole layer in the nine steps of Review, "Audit Order"; step 9, independence between
batch items, changes every other item and sees whether an item's weights or output move.
:class:`LayerResult` wraps a one-sequence result too (:meth:`LayerResult.of`), so a page reads
every run the same way.

Left out: several heads, residual paths, normalisation (Review: "This chapter's layer ends at
Y = H W_O").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attention_core.attention import AttentionResult, Projection, attend
from attention_core.checks import CHECK_NAMES, CHECK_TITLES, Check
from attention_core.masks import combine_masks, future_cells
from attention_core.modes import CORRECT, FailureMode, get_mode
from attention_core.projection import project
from attention_core.validation import AttentionInputError, key_padding

MAX_BATCH = 3  # batch items a layer takes; enough to see sharing and mixing side by side


@dataclass(frozen=True)
class LayerResult:
    """One layer over a batch: its maps, its inputs and its nine-step audit.

    Attributes
    ----------
    maps : tuple of AttentionResult
        What the pipeline computed: one result per batch item (each ``T × T_k``), or, in the
        ``batch_items_mixed`` mode with ``B > 1``, one result over the flattened batch
        (``B·T × B·T_k``).
    B : int
        Number of batch items.
    mode : FailureMode
    checks : tuple of Check
        One per name in :data:`~attention_core.checks.CHECK_NAMES`, in the order of Review, "Audit
        Order", over the whole batch: a failed check names the first item (``Item b: ...``) that
        fails it; ``batch_independence`` is real here.
    x : numpy.ndarray, shape (B, T, d_model), or None
        Matrix mode only, like ``x_kv`` (cross-attention, shape (B, T_k, d_model)) and the W's.
    w_q, w_k, w_v, w_o : numpy.ndarray or None
    padding_mask : numpy.ndarray of bool, shape (B, T_k), or None
    causal : bool
    causal_alignment : str or None
    """

    maps: tuple[AttentionResult, ...]
    B: int
    mode: FailureMode
    checks: tuple[Check, ...]
    x: np.ndarray | None = None
    x_kv: np.ndarray | None = None
    w_q: np.ndarray | None = None
    w_k: np.ndarray | None = None
    w_v: np.ndarray | None = None
    w_o: np.ndarray | None = None
    padding_mask: np.ndarray | None = None
    causal: bool = True
    causal_alignment: str | None = None

    @classmethod
    def of(cls, result: AttentionResult) -> LayerResult:
        """A one-sequence result as a layer of batch size 1 (its checks unchanged)."""
        p = result.projection
        matrices = {}
        if p is not None:
            matrices = dict(x=p.x[None], x_kv=None if p.x_kv is None else p.x_kv[None], w_q=p.w_q,
                            w_k=p.w_k, w_v=p.w_v, w_o=p.w_o)
        return cls(maps=(result,), B=1, mode=result.mode, checks=result.checks,
                   padding_mask=None if result.key_is_real is None else result.key_is_real[None],
                   causal=result.causal, causal_alignment=result.causal_alignment, **matrices)

    @property
    def flattened(self) -> bool:
        """Whether the batch was attended as one sequence (``batch_items_mixed`` with ``B > 1``)."""
        return len(self.maps) != self.B

    @property
    def cross(self) -> bool:
        """Whether keys and values came from a second sequence (cross-attention)."""
        return self.x_kv is not None

    @property
    def T(self) -> int:
        """Tokens (queries) per batch item."""
        return self.maps[0].T // self.B if self.flattened else self.maps[0].T

    @property
    def T_k(self) -> int:
        """Keys per batch item."""
        return self.maps[0].T_k // self.B if self.flattened else self.maps[0].T_k

    @property
    def d_model(self) -> int | None:
        return None if self.x is None else self.x.shape[2]

    @property
    def d_k(self) -> int:
        return self.maps[0].d_k

    @property
    def d_v(self) -> int | None:
        return self.maps[0].d_v

    @property
    def output(self) -> np.ndarray | None:
        """``H``, shape (B, T, d_v) (``(B, T)`` with one number per token); ``None`` without it."""
        outs = [m.output for m in self.maps]
        if any(o is None for o in outs):
            return None
        return np.stack(outs).reshape((self.B, self.T) + outs[0].shape[1:])

    @property
    def y(self) -> np.ndarray | None:
        """``Y = H W_O``, shape (B, T, d_model); ``None`` without W_O or where it was not formed."""
        ys = [m.y for m in self.maps]
        if any(y is None for y in ys):
            return None
        return np.stack(ys).reshape(self.B, self.T, -1)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """Names of the checks that failed, in audit order."""
        return tuple(c.name for c in self.checks if c.passed is False)

    @property
    def first_incorrect(self) -> Check | None:
        """The first failed check in dependency order: the object to inspect first (Review,
        "Audit Order"); ``None`` when every check passed or did not apply."""
        return next((c for c in self.checks if c.passed is False), None)

    @property
    def total_future_weight(self) -> float:
        """Weight on future cells over the whole batch (``nan`` if a weight is not finite)."""
        return float(sum(m.total_future_weight for m in self.maps))

    @property
    def min_row_sum(self) -> float:
        return float(min(m.min_row_sum for m in self.maps))

    @property
    def max_row_sum_error(self) -> float:
        return float(max(m.max_row_sum_error for m in self.maps))

    def item_of(self, position: int) -> tuple[int, int]:
        """``(item, token)``, both from 1, of a query row of the flattened map (from 0)."""
        return position // self.T + 1, position % self.T + 1

    def recompute(self, **changes: object) -> LayerResult:
        """The same layer again with some inputs changed (``x``, ``x_kv``, ``w_q`` ... ``w_o``,
        ``padding_mask``, ``failure_mode``), e.g. for an ablation.

        Raises
        ------
        ValueError
            Not a matrix-mode layer, or inputs the core refuses (as for :func:`attention_layer`).
        """
        if self.x is None:
            raise ValueError("only a layer projected from X (matrix mode) can be recomputed with other matrices")
        args = dict(x=self.x, x_kv=self.x_kv, w_q=self.w_q, w_k=self.w_k, w_v=self.w_v, w_o=self.w_o,
                    padding_mask=self.padding_mask, failure_mode=self.mode)
        args.update(changes)
        return attention_layer(args.pop("x"), args.pop("w_q"), args.pop("w_k"), args.pop("w_v"),
                               args.pop("w_o"), causal=self.causal,
                               causal_alignment=self.causal_alignment, **args)


def _batch(field: str, data: object) -> list | None:
    """``data`` as a list of B token matrices (B = 1 for a matrix), or an error naming the field."""
    if data is None:
        return None
    row_like = (list, tuple, np.ndarray)
    if isinstance(data, np.ndarray):
        items = list(data) if data.ndim == 3 else [data]
    elif (isinstance(data, row_like) and len(data) and isinstance(data[0], row_like) and len(data[0])
          and isinstance(data[0][0], row_like)):
        items = list(data)  # a list of matrices: one per batch item
    else:
        items = [data]
    if len(items) > MAX_BATCH:
        raise AttentionInputError(field, f"{field} has {len(items)} batch items; the layer takes at most {MAX_BATCH}")
    return items


_SHARED = ("W_Q", "W_K", "W_V", "W_O", "causal_alignment")  # one for every item: no item is at fault


def _item_error(error: AttentionInputError, b: int, B: int) -> AttentionInputError:
    """The same error, naming batch item ``b`` (from 1) when there is more than one and the fault
    is that item's (its tokens), not a shared W's or the alignment's."""
    if B == 1 or (error.field in _SHARED and error.token is None):
        return error
    return AttentionInputError(error.field, f"Batch item {b}: {error}", error.token, row=error.row,
                               column=error.column, item=b)


def _flattened(items: list[AttentionResult], causal: bool, alignment: str | None):
    """Masks of the batch flattened into one sequence: ``(allowed, applied, future)``.

    ``allowed`` is the rule (block-diagonal: each item's own causal and padding mask, nothing
    across items), ``applied`` what the broken pipeline lets through (one causal mask over all
    ``B·T`` positions, every item's padding), ``future`` each item's own future cells.
    """
    T, T_k, B = items[0].T, items[0].T_k, len(items)
    allowed = np.zeros((B * T, B * T_k), dtype=bool)
    future = np.zeros_like(allowed)
    for b, r in enumerate(items):
        allowed[b * T:(b + 1) * T, b * T_k:(b + 1) * T_k] = r.allowed
        future[b * T:(b + 1) * T, b * T_k:(b + 1) * T_k] = future_cells(T, T_k, alignment)
    real = None if items[0].key_is_real is None else np.concatenate([r.key_is_real for r in items])
    applied = combine_masks(B * T, causal=causal, key_is_real=real, T_k=B * T_k, alignment=alignment)
    return allowed, applied, future


def _compute(xs, x_kvs, w_q, w_k, w_v, w_o, padding, mode, causal, alignment, audit=True):
    """The maps of one layer (no layer checks yet); ``audit=False``: maps without their checks."""
    B = len(xs)
    items = []
    for b in range(B):
        try:
            p = project(xs[b], w_q, w_k, w_v, w_o, x_kv=None if x_kvs is None else x_kvs[b])
            items.append(attend(p.queries, p.keys, p.values, causal=causal, causal_alignment=alignment,
                                padding_mask=None if padding is None else padding[b],
                                failure_mode=CORRECT if mode.batch == "flattened" else mode, projection=p,
                                audit=audit))
        except AttentionInputError as error:
            raise _item_error(error, b + 1, B) from None
    if mode.batch != "flattened" or B == 1:
        if mode.batch == "flattened":  # one item: nothing to mix, the mode computes correctly
            items = [attend(r.queries, r.keys, r.values, causal=causal, causal_alignment=alignment,
                            padding_mask=r.key_is_real, failure_mode=mode, projection=r.projection, audit=audit)
                     for r in items]
        return tuple(items)
    # The flattened sequence may pass the core's token limit, so it is stacked from the items'
    # projections (the same numbers: each row is projected on its own) rather than projected again.
    ps = [r.projection for r in items]

    def stack(name: str) -> np.ndarray | None:
        parts = [getattr(q, name) for q in ps]
        return None if parts[0] is None else np.concatenate(parts)

    p = Projection(x=stack("x"), w_q=ps[0].w_q, w_k=ps[0].w_k, w_v=ps[0].w_v, queries=stack("queries"),
                   keys=stack("keys"), values=stack("values"), w_o=ps[0].w_o, x_kv=stack("x_kv"))
    real = None if padding is None else np.concatenate(padding)
    return (attend(p.queries, p.keys, p.values, causal=causal, causal_alignment=alignment,
                   padding_mask=real, failure_mode=mode, projection=p,
                   masks=_flattened(items, causal, alignment), audit=audit),)


def attention_layer(
    x: object,
    w_q: object,
    w_k: object,
    w_v: object = None,
    w_o: object = None,
    *,
    x_kv: object = None,
    causal: bool = True,
    causal_alignment: str | None = None,
    padding_mask: object = None,
    failure_mode: str | FailureMode = "correct",
) -> LayerResult:
    """One single-head attention layer over a batch, audited in the nine steps of Review, "Audit Order".

    ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``, ``S = Q K^T / sqrt(d_k)``,
    ``A = softmax_last(S + M)``, ``H = A V``, ``Y = H W_O`` for each batch item with shared W's
    (Review, "The Complete Layer"); with ``x_kv`` keys and values come from the second sequence.

    Parameters
    ----------
    x : array_like of float, shape (B, T, d_model) or (T, d_model)
        ``1 <= B <= 3`` batch items of the same length ``1 <= T <= 16`` (pad the shorter ones
        and say so in ``padding_mask``); 2-D is one item.
    w_q, w_k : array_like of float, shape (d_model, d_k)
    w_v : array_like of float, shape (d_model, d_v), optional
    w_o : array_like of float, shape (d_v, d_model), optional
    x_kv : array_like of float, shape (B, T_k, d_model) or (T_k, d_model), optional
        Cross-attention: the sequence of each item that keys and values are projected from.
    causal : bool, default True
    causal_alignment : {"top_left", "bottom_right"}, optional
        Required with ``causal`` when ``T_k != T`` (:data:`~attention_core.masks.ALIGNMENTS`).
    padding_mask : array_like of bool, shape (B, T_k) or (T_k,), optional
        Per item, ``True`` for a real key token.
    failure_mode : str or FailureMode, default "correct"

    Returns
    -------
    LayerResult

    Raises
    ------
    ValueError
        :class:`~attention_core.validation.AttentionInputError` naming the field, the batch item
        (``item``, from 1, when ``B > 1``), the token and the component: anything
        :func:`~attention_core.projection.project` refuses, more than 3 items, items of different
        lengths, ``x_kv`` with another number of items, a padding mask of the wrong shape, or a
        causal mask over ``T != T_k`` without an alignment. Plain ``ValueError`` for an unknown
        failure mode.

    Examples
    --------
    Two sequences, the second one token shorter (padded), share every W; neither reads the other:

    >>> import numpy as np
    >>> x = [[[1, 0], [0, 1], [1, 1]], [[0, 2], [1, 0], [0, 0]]]
    >>> r = attention_layer(x, np.eye(2), np.eye(2), np.eye(2), np.eye(2),
    ...                     padding_mask=[[True, True, True], [True, True, False]])
    >>> r.y.shape, r.first_incorrect, r.checks[-1].passed
    ((2, 3, 2), None, True)

    Flattened into one sequence, item 2 reads item 1; the first incorrect object is the scores:

    >>> mixed = r.recompute(failure_mode="batch_items_mixed")
    >>> mixed.first_incorrect.name, mixed.failed_checks[-1]
    ('score_scale', 'batch_independence')
    """
    mode = failure_mode if isinstance(failure_mode, FailureMode) else get_mode(failure_mode)
    xs = _batch("X", x)
    B = len(xs)
    x_kvs = _batch("X_kv", x_kv)
    if x_kvs is not None and len(x_kvs) != B:
        raise AttentionInputError("X_kv", f"X_kv has {len(x_kvs)} batch item{'' if len(x_kvs) == 1 else 's'} but "
                                  f"X has {B}; each item needs its own keys' and values' sequence")
    for field, seqs in (("X", xs), ("X_kv", x_kvs)):
        lengths = [len(s) for s in seqs or ()]
        if len(set(lengths)) > 1:
            b = next(i for i, n in enumerate(lengths) if n != lengths[0]) + 1
            raise AttentionInputError(
                field, f"Batch item {b} of {field} has {lengths[b - 1]} tokens, item 1 has {lengths[0]}: "
                "items of a batch have the same length; pad the shorter sequence and mark the padding "
                "in the padding mask", item=b)
    padding = None
    if padding_mask is not None:
        T_k = len((x_kvs or xs)[0])
        row_like = (list, tuple, np.ndarray)
        # Rows of booleans (one per item) or one row; one row of T booleans is not T rows.
        several = isinstance(padding_mask, row_like) and any(isinstance(r, row_like) for r in padding_mask)
        rows = list(padding_mask) if several else [padding_mask]
        if len(rows) != B:
            n = len(rows)
            raise AttentionInputError("padding_mask", f"padding_mask has {n} row{'' if n == 1 else 's'} for {B} "
                                      "batch items; give one row of booleans per item")
        padding = []
        for b, row in enumerate(rows, 1):
            try:
                padding.append(key_padding(row, T_k))
            except AttentionInputError as error:
                raise _item_error(error, b, B) from None
    maps = _compute(xs, x_kvs, w_q, w_k, w_v, w_o, padding, mode, causal, causal_alignment)
    first = maps[0]
    layer = LayerResult(
        maps=maps, B=B, mode=mode, checks=(),
        x=np.stack([np.asarray(s, dtype=np.float64) for s in xs]),
        x_kv=None if x_kvs is None else np.stack([np.asarray(s, dtype=np.float64) for s in x_kvs]),
        w_q=first.projection.w_q, w_k=first.projection.w_k, w_v=first.projection.w_v,
        w_o=first.projection.w_o, padding_mask=None if padding is None else np.stack(padding),
        causal=causal, causal_alignment=first.causal_alignment,
    )
    return replace(layer, checks=layer_checks(layer))


def _per_item(layer: LayerResult, name: str) -> Check:
    """One check over every item: the first failing item's outcome, named."""
    checks = [m.checks[CHECK_NAMES.index(name)] for m in layer.maps]
    failed = next(((b, c) for b, c in enumerate(checks, 1) if c.passed is False), None)
    if failed is not None:
        b, c = failed
        return c if layer.B == 1 else replace(c, message=f"Item {b}: {c.message}")
    if all(c.passed is None for c in checks):
        return checks[0]
    return checks[0] if layer.B == 1 else replace(checks[0], message=f"Every item: {checks[0].message}")


def _where(layer: LayerResult, cells: list[tuple[int, int]]) -> str:
    """Flattened cells as "item 2 token 1 reads item 1 token 1" phrases (at most three)."""
    parts = []
    for i, j in cells[:3]:
        (qi, qt), (ki, kt) = layer.item_of(i - 1), (((j - 1) // layer.T_k) + 1, (j - 1) % layer.T_k + 1)
        parts.append(f"item {qi} token {qt} reads item {ki} token {kt}")
    return "; ".join(parts) + (f" and {len(cells) - 3} more" if len(cells) > 3 else "")


def _flattened_check(layer: LayerResult, name: str) -> Check:
    """A check of the flattened map, said in items and tokens."""
    m = layer.maps[0]
    c = m.checks[CHECK_NAMES.index(name)]
    B, T, T_k = layer.B, layer.T, layer.T_k
    if name == "score_scale":
        return replace(c, passed=False, message=(
            f"scores are {m.T}×{m.T_k} over the batch flattened into one sequence; expected {B} maps of "
            f"{T}×{T_k}, one per batch item (S: B×T×T)"))
    if name in ("mask", "forbidden_zeros") and c.passed is False:
        across = [cell for cell in c.cells
                  if (cell[0] - 1) // T != (cell[1] - 1) // T_k]
        if across:
            verb = "softmax saw finite scores where" if name == "mask" else "weight where"
            return replace(c, message=f"{verb} one batch item reads another: {_where(layer, across)}")
    if c.passed is False and c.rows:  # rows of the B·T map mean nothing to a reader of T-token items
        named = ", ".join("row {} is item {} token {}".format(r, *layer.item_of(r - 1)) for r in c.rows[:3])
        return replace(c, message=f"{c.message} (over the flattened batch: {named})")
    return c


def _independence(layer: LayerResult) -> Check:
    """Step 9: change every other item; an item's weights and output must not move."""
    name = "batch_independence"
    if layer.B == 1:
        return Check(name, CHECK_TITLES[name], None, "One batch item, so there is no other sequence to mix with.")
    if layer.x is None:
        return Check(name, CHECK_TITLES[name], None, "Not projected from X, so there is no batch.")
    # Another sequence in place of the item: random rows, so no nonzero W can map the change to
    # zero (adding 1 everywhere is invisible to a W whose columns sum to 0), sized to the item's
    # numbers so that it is not lost in their rounding.
    rng = np.random.default_rng(0)
    tested = 0
    for changed in range(layer.B):
        x = layer.x.copy()
        x[changed] = x[changed] + rng.standard_normal(x[changed].shape) * (1.0 + np.abs(x[changed]).max())
        x_kv = None if layer.x_kv is None else layer.x_kv.copy()
        if x_kv is not None:
            x_kv[changed] = x_kv[changed] + rng.standard_normal(x_kv[changed].shape) * (
                1.0 + np.abs(x_kv[changed]).max())
        if not np.isfinite(x).all() or (x_kv is not None and not np.isfinite(x_kv).all()):
            continue
        try:
            # Only its weights and outputs are compared: its own checks would be dropped unread.
            other = _compute(list(x), None if x_kv is None else list(x_kv), layer.w_q, layer.w_k,
                             layer.w_v, layer.w_o, None if layer.padding_mask is None else list(layer.padding_mask),
                             layer.mode, layer.causal, layer.causal_alignment, audit=False)
        except AttentionInputError:  # the changed input overflows: try the next item
            continue
        tested += 1
        for b in range(layer.B):
            if b == changed:
                continue
            before, after = _item_view(layer.maps, layer, b), _item_view(other, layer, b)
            moved = [what for what, u, v in zip(("weights", "output H", "output Y"), before, after, strict=True)
                     if not _same(u, v)]
            if moved:
                return Check(name, CHECK_TITLES[name], False, (
                    f"changing item {changed + 1} moved item {b + 1}'s {' and '.join(moved)}: a sequence "
                    "reads another sequence's tokens"), rows=(b + 1,))
    if not tested:  # every changed input overflowed: no evidence either way
        return Check(name, CHECK_TITLES[name], None, (
            "Changing an item overflows float64 here, so independence cannot be tested."))
    return Check(name, CHECK_TITLES[name], True, (
        f"Changing any one of the {layer.B} items leaves every other item's weights and output as they were."))


def _item_view(maps, layer: LayerResult, b: int):
    """Item ``b``'s (weights, H, Y) from per-item maps or the flattened map."""
    if len(maps) == layer.B:
        m = maps[b]
        return m.weights, m.output, m.y
    m, T = maps[0], layer.T
    rows = slice(b * T, (b + 1) * T)
    return (m.weights[rows], None if m.output is None else m.output[rows],
            None if m.y is None else m.y[rows])


def _same(u: np.ndarray | None, v: np.ndarray | None) -> bool:
    if u is None or v is None:
        return u is v
    return u.shape == v.shape and bool(np.isclose(u, v, rtol=1e-12, atol=1e-12, equal_nan=True).all())


def layer_checks(layer: LayerResult) -> tuple[Check, ...]:
    """The nine steps of Review, "Audit Order", over a whole layer (see :data:`CHECK_NAMES`).

    Steps 1 to 8 are each item's checks, the first failing item named; over a flattened batch
    they are the flattened map's, said in items and tokens, and the score shape fails. Step 9
    changes each item in turn (its X, and X_kv, plus fixed random rows of the item's size) and
    fails when another item's weights, H or Y move; it does not apply where every change overflows.

    Parameters
    ----------
    layer : LayerResult
        Its ``checks`` are ignored.

    Returns
    -------
    tuple of Check
        One per name in :data:`~attention_core.checks.CHECK_NAMES`, in that order.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        per = _flattened_check if layer.flattened else _per_item
        checks = [per(layer, name) for name in CHECK_NAMES if name != "batch_independence"]
        return (*checks, _independence(layer))
