"""What one attention call knows, and the structured pieces modifiers hand back to it.

Every tensor here is in the pipeline's layout: ``(batch, heads, time, dim)`` for q/k/v and
``(batch, heads, query_time, key_time)`` for logits. Positions count from the first real
token of each sentence, whatever the padding side (docs/design.md, "Padding side and
positions").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import torch
from torch import Tensor

from localnmt.attention.deferred import TensorSlot
from localnmt.attention.head_area import HeadArea
from localnmt.attention.record import AttentionRecord

#: Finite fill for disallowed logits: large enough that ``exp`` underflows to exactly 0 in
#: float32, finite so that a row with no allowed key gives no NaN (the pipeline then zeroes
#: that row: docs/design.md, "Numerics").
MASK_VALUE = -1e30

SITES = ("encoder_self", "decoder_self", "cross")

T = TypeVar("T")


@dataclass(frozen=True)
class AttentionSite:
    """Where an attention module sits in the model (fixed at construction)."""

    kind: str  # one of SITES
    layer: int  # 0-based layer index
    num_layers: int
    embed_dim: int
    num_heads: int
    max_positions: int = 1024

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @property
    def causal(self) -> bool:
        return self.kind == "decoder_self"


@dataclass
class AffinePost:
    """A post-softmax stage that is affine in the probabilities: ``p ↦ keep·p + add``.

    ``keep`` is ``(B, H, Tq, 1)`` or a number, ``add`` ``(B, H, Tq, Tk)`` float32 (None: 0).
    Since ``(keep·p + add) @ V = keep·(p @ V) + add @ V``, the pipeline can then take ``p @ V``
    from a fused kernel that never forms ``p`` (GMM cross-attention's eq. 13 is one)."""

    keep: Tensor | float
    add: Tensor | None


@dataclass
class QuadraticBias:
    """A logit bias ``a·j² + b·j`` per query row, over key positions ``j`` (Yang et al. 2018 eq. 5
    expanded: −(j−P)²/(2σ²) = a·j² + b·j + const; the constant cancels in softmax).

    ``a`` and ``b`` have shape ``(batch, heads, query_time)``, float32. Kernels may fold it into
    two extra query/key dimensions instead of materialising it.
    """

    a: Tensor
    b: Tensor

    def dense(self, positions: CallPositions) -> Tensor:
        """The bias as a float32 tensor ``(B, H, Tq, Tk)``, computed around each row's vertex
        ``c = −b/(2a)`` as ``a·(j−c)² + (b+2ac)·(j−c)``: the same function up to a per-row
        constant (which cancels in softmax), without the float32 cancellation of ``a·j² + b·j``
        when ``|a|`` is large (a narrow Gaussian far from position 0)."""
        j = positions.key[:, None, None, :]  # (B, 1, 1, Tk)
        a, shift, slope = self.vertex_form()
        jc = j - shift.unsqueeze(-1)
        return a.unsqueeze(-1) * jc * jc + slope.unsqueeze(-1) * jc

    def vertex_form(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(a, c, b + 2ac)`` in float32: the bias is ``a·(j−c)² + (b+2ac)·(j−c)`` + const."""
        a, b = self.a.float(), self.b.float()
        nonzero = a != 0
        shift = torch.where(nonzero, -b / (2 * torch.where(nonzero, a, 1.0)), 0.0)
        return a, shift, b + 2 * a * shift


@dataclass(frozen=True)
class RelativeTerms:
    """Relative key and value rows of one call (Shaw et al. 2018, eqs. 3-5), kept structured:
    ``a^K_ij = key_table[buckets_ij]`` and ``a^V_ij = value_table[buckets_ij]``, tables
    ``(R, d)``, ``buckets`` int64 ``(B, 1, Tq, Tk)`` (``clip(j − i, k) + k``).

    As a bias it is ``q_i · a^K_ij`` (:meth:`bias`); where its method's value term
    ``Σ_j α_ij a^V_ij`` (:meth:`value_term`) is the call's only one, the pipeline hands both
    to the kernels with the problem (``AttentionProblem.relative_values``), so that a kernel
    can add them inside its own loops instead of materialising either."""

    key_table: Tensor
    value_table: Tensor
    buckets: Tensor

    def bias(self, q: Tensor) -> Tensor:
        """``q_i · a^K_ij`` for ``q`` ``(B, H, Tq, d)`` (pre-scaled), float32 ``(B, H, Tq, Tk)``:
        the products with all ``R`` rows, then the row of each pair."""
        scores = torch.matmul(q.to(self.key_table.dtype), self.key_table.t()).float()
        idx = self.buckets.expand(scores.size(0), scores.size(1), *self.buckets.shape[2:])
        return scores.gather(-1, idx)

    def value_term(self, probs: Tensor, dtype: torch.dtype) -> Tensor:
        """``Σ_j α_ij a^V_ij`` for ``probs`` ``(B, H, Tq, Tk)``: the probabilities summed per
        bucket, times the value table; in ``dtype``."""
        idx = self.buckets.expand(*probs.shape)
        size = self.value_table.size(0)
        per_bucket = probs.float().new_zeros(*probs.shape[:3], size)
        per_bucket = per_bucket.scatter_add(-1, idx, probs.float())
        return torch.matmul(per_bucket.to(self.value_table.dtype), self.value_table).to(dtype)


@dataclass
class BandMask:
    """Allow key ``j`` for query ``i`` iff ``-left <= pos(j) - pos(i) <= right`` (positions in
    real-token space). ``left`` / ``right`` are ints or per-head int tensors of shape ``(heads,)``.
    Kernels may use an O(T·w) layout instead of a T×T mask."""

    left: int | Tensor
    right: int | Tensor

    def dense(self, positions: CallPositions) -> Tensor:
        rel = positions.key[:, None, None, :] - positions.query[:, None, :, None]
        device = positions.key.device
        left = _as_head_tensor(self.left, device)
        right = _as_head_tensor(self.right, device)
        return (rel >= -left) & (rel <= right)  # (B, H|1, Tq, Tk)


def _as_head_tensor(value: int | Tensor, device: torch.device) -> Tensor:
    if isinstance(value, Tensor):
        return value.to(device, torch.float32).view(1, -1, 1, 1)
    return torch.tensor(float(value), device=device)


class CallPositions:
    """Where the keys and queries of one call sit, computed on first read: calls whose
    modifiers and kernels never read them (the baseline) pay nothing.

    ``key`` ``(B, Tk)`` float32, index of each key counted from the first real key; ``query``
    ``(B, Tq)`` float32, index of each query in its own sequence; ``key_lengths`` ``(B, Tq)``
    float32, real keys each query may see. A ``transform`` modifier may replace them (2D-CSAN
    repeats the key positions per stacked group); the kernel problem holds the same object."""

    def __init__(self, compute: Callable[[], tuple[Tensor, Tensor, Tensor]] | None):
        self._compute = compute
        self._values: list[Tensor] | None = None

    def _get(self) -> list[Tensor]:
        if self._values is None:
            assert self._compute is not None, "no positions for this attention call"
            self._values = list(self._compute())
        return self._values

    @property
    def computed(self) -> bool:
        """Whether anything has read (or replaced) the positions yet."""
        return self._values is not None

    @property
    def key(self) -> Tensor:
        return self._get()[0]

    @key.setter
    def key(self, value: Tensor) -> None:
        self._get()[0] = value

    @property
    def query(self) -> Tensor:
        return self._get()[1]

    @query.setter
    def query(self, value: Tensor) -> None:
        self._get()[1] = value

    @property
    def key_lengths(self) -> Tensor:
        return self._get()[2]

    @key_lengths.setter
    def key_lengths(self, value: Tensor) -> None:
        self._get()[2] = value


@dataclass(frozen=True)
class CacheKey(Generic[T]):
    """A key of :class:`CallCache`, typed by the value it holds: ``key: CacheKey[Tensor] =
    CacheKey("rel_pos buckets", clip)`` (annotated, not subscripted: a subscripted call costs
    a caught exception on this frozen class). ``part`` tells apart values of the same name (an
    option, a modifier)."""

    name: str
    part: Hashable = None


class CallCache:
    """What the modifiers of one call compute once and share (relative-position buckets read
    by rel_pos's bias and its value term, LOCAL_HARD's centre read by its bias and its window).
    Gone with the call; kernels never read it."""

    def __init__(self) -> None:
        self._values: dict[CacheKey[Any], Any] = {}

    def get(self, key: CacheKey[T], build: Callable[[], T]) -> T:
        """The value under ``key``, built by ``build()`` on the first request of this call."""
        if key not in self._values:
            self._values[key] = build()
        return self._values[key]


@dataclass
class AttentionContext:
    """Inputs and derived facts of one attention call, shared by all its modifiers.

    Attributes:
        site: where the module sits.
        query_input: the layer input the queries come from, ``(Tq, B, C)``.
        q, k, v: projected, head-split tensors ``(B, H, T, d)``; ``q`` is already scaled by
            ``1/sqrt(d)``. Modifiers of the ``transform`` stage may replace them.
        key_padding_mask: ``(B, Tk)`` bool, True at padding, or None.
        key_positions: ``(B, Tk)`` float32, index of each key counted from the first real key.
        query_positions: ``(B, Tq)`` float32, index of each query in its own sequence.
        key_lengths: ``(B, Tq)`` float32, number of real keys each query may see: I in encoder
            self-attention, the visible prefix in decoder self-attention, J in cross-attention.
        state: the incremental buffer of this module (or None): modifiers keep per-hypothesis
            tensors here under their own keys, batch first; the pipeline reorders them in beam
            search.
        record: when not None (the module is recording), modifiers add their own typed
            values here with :meth:`keep` (analyses; see :mod:`localnmt.attention.record`).
        key_group: ``k`` and ``v`` hold one row per this many consecutive query rows (beam
            search's hypotheses of one sentence: :mod:`localnmt.attention.shared_source`;
            only in layers whose modifiers do not read the keys); 1 otherwise.
        stacked_groups: ``k`` and ``v`` hold this many groups of the same key positions,
            stacked along the key axis by a transform (2D-CSAN's neighbouring heads); 1
            otherwise. The pipeline hands it to the kernels with the problem.
        head_area: 2D-CSAN's unstacked keys (:class:`~localnmt.attention.head_area.HeadArea`),
            which the band kernel reads in place, or None.
        cache: the modifiers' own typed cache within one call (:class:`CallCache`).
    """

    site: AttentionSite
    query_input: Tensor
    q: Tensor
    k: Tensor = TensorSlot()  # a transform may store a Deferred (built on first read)
    v: Tensor = TensorSlot()
    key_padding_mask: Tensor | None
    #: computes ``(key_positions, query_positions, key_lengths)`` on first use: calls whose
    #: modifiers never read positions (the baseline) pay nothing for them
    positions_fn: Callable[[], tuple[Tensor, Tensor, Tensor]] | None = None
    state: dict[str, Any] | None = None
    record: AttentionRecord | None = None
    cache: CallCache = field(default_factory=CallCache)
    key_group: int = 1
    stacked_groups: int = 1
    head_area: HeadArea | None = None
    positions: CallPositions = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.positions = CallPositions(self.positions_fn)

    @property
    def positions_computed(self) -> bool:
        """Whether a modifier has read (or replaced) the positions of this call yet."""
        return self.positions.computed

    @property
    def key_positions(self) -> Tensor:
        return self.positions.key

    @key_positions.setter
    def key_positions(self, value: Tensor) -> None:
        self.positions.key = value

    @property
    def query_positions(self) -> Tensor:
        return self.positions.query

    @query_positions.setter
    def query_positions(self, value: Tensor) -> None:
        self.positions.query = value

    @property
    def key_lengths(self) -> Tensor:
        return self.positions.key_lengths

    @key_lengths.setter
    def key_lengths(self, value: Tensor) -> None:
        self.positions.key_lengths = value

    @property
    def batch_size(self) -> int:
        return self.q.size(0)

    @property
    def num_heads(self) -> int:
        return self.q.size(1)

    @property
    def incremental(self) -> bool:
        return self.state is not None

    @property
    def recording(self) -> bool:
        """Whether this call keeps a record (build a method record only then)."""
        return self.record is not None

    def keep(self, values: Any) -> None:
        """Add a modifier's typed values (a dataclass of tensors) to the record of this call;
        a no-op when the call is not recorded."""
        if self.record is not None:
            self.record.add(values)


def key_positions_from_padding(
    key_padding_mask: Tensor | None, batch: int, length: int, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Positions counted from the first real token, and real lengths, from a padding mask.

    Returns ``(positions (B, T) float32, lengths (B,) float32)``; padded slots get position 0.
    """
    if key_padding_mask is None:
        pos = torch.arange(length, device=device, dtype=torch.float32).expand(batch, length)
        return pos, torch.full((batch,), float(length), device=device)
    real = ~key_padding_mask.bool()
    pos = (real.cumsum(dim=1) - 1).clamp(min=0).to(torch.float32)
    return pos, real.sum(dim=1).to(torch.float32)
