"""The attention problem of one call, its dense reference path, and its kernel registry.

The pipeline turns the modifiers' outputs into an :class:`AttentionProblem`. When the caller
needs the probabilities (weights, post-softmax modifiers, analyses) it runs
:func:`dense_attention`, the reference. Otherwise :func:`fast_attention` asks the registered
kernels (``localnmt/attention/fast/``, in the order of the table there) and takes the first that
accepts the problem; the reference runs when all decline. Every kernel must give the same
numbers as the reference (docs/design.md, "Kernels").

Each kernel says why it declines (:class:`Declined`, reasons for people, in the manner of
xformers' ``not_supported_reasons``); :mod:`localnmt.attention.dispatch` keeps the registries,
forcing (:func:`forced_kernel`) and the trace of which kernel ran (:func:`trace`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.context import (
    MASK_VALUE,
    AttentionSite,
    BandMask,
    CallPositions,
    QuadraticBias,
    RelativeTerms,
)
from localnmt.attention.deferred import TensorSlot, stored_shape
from localnmt.attention.dispatch import (
    Declined,
    Kernel,
    KernelCall,
    KernelDeclined,
    KernelRegistry,
    KernelTrace,
    forced_kernel,
    is_forced,
    trace,
)
from localnmt.attention.head_area import HeadArea
from localnmt.attention.shared_source import grouped_matmul

__all__ = [
    "AttentionProblem",
    "Declined",
    "KernelCall",
    "KernelDeclined",
    "KernelTrace",
    "REGISTRY",
    "dense_attention",
    "dense_logits",
    "dense_probabilities",
    "dropped_product",
    "explain",
    "fast_attention",
    "forced_kernel",
    "is_forced",
    "kernel_names",
    "masked_sdpa",
    "register_kernel",
    "trace",
]


@dataclass
class AttentionProblem:
    """Everything needed to compute ``softmax(q·kᵀ + bias, allowed) · v``.

    ``q`` is pre-scaled; all tensors are ``(B, H, T, d)``, except that ``k`` and ``v`` hold
    one row per ``key_group`` consecutive rows of ``q`` (beam search's shared source,
    :mod:`localnmt.attention.shared_source`). The allowed set is the intersection of: real
    keys (``key_padding_mask``), the causal triangle (``causal``, in index space),
    ``allowed`` (a dense bool tensor) and each band of ``bands``. Bands and quadratic biases
    are over ``positions`` (counted from each sentence's first real token), which ``site``
    (where the call sits: traces, and kernels that take only some sites) completes.
    """

    site: AttentionSite
    q: Tensor
    k: Tensor = TensorSlot()  # may hold a Deferred: see localnmt.attention.deferred
    v: Tensor = TensorSlot()
    #: the call's key and query positions, computed on first read (None: the problem has no
    #: band or quadratic bias, which are all that read them)
    positions: CallPositions | None = None
    key_padding_mask: Tensor | None = None
    causal: bool = False
    allowed: Tensor | None = None
    bands: list[BandMask] = field(default_factory=list)
    dense_bias: Tensor | None = None
    quadratic: list[QuadraticBias] = field(default_factory=list)
    #: Shaw et al.'s relative key rows as a bias ``q_i · a^K_ij`` (one method's, structured)
    relative: RelativeTerms | None = None
    #: whether the output also takes ``relative``'s value term ``Σ_j α_ij a^V_ij`` (eq. 3 of
    #: Shaw et al.): set by the pipeline where it is the call's only value term and no
    #: attention dropout is active (the layer's own dropout module then runs on the dense
    #: path). Only kernels registered with ``relative_values=True`` take such a problem.
    relative_values: bool = False
    dropout_p: float = 0.0
    key_group: int = 1
    #: The padding mask as the layer received it, before any transform (2D-CSAN repeats it per
    #: key group): the same object in every layer of a forward pass, so kernels can cache what
    #: they build from it by identity.
    padding_source: Tensor | None = None
    #: Key groups stacked along the key axis by a transform (``k`` holds ``G`` groups of the
    #: same ``Tk`` positions; 2D-CSAN's neighbouring heads): 1 otherwise.
    stacked_groups: int = 1
    #: 2D-CSAN's keys before stacking, which the band kernel reads in place (or None).
    head_area: HeadArea | None = None

    @cached_property
    def band_reach(self) -> tuple[Tensor, Tensor]:
        """Per-head ``(left, right)`` reach, int64 ``(H,)``: the intersection of all bands
        (``1 << 30`` where none limits a head), the causal triangle capping ``right`` at 0.
        Computed once per problem: a kernel's check and run both read it."""
        heads, device = self.q.size(1), self.q.device
        left = torch.full((heads,), 1 << 30, dtype=torch.long, device=device)
        right = left.clone()
        for band in self.bands:
            left = torch.minimum(
                left, torch.as_tensor(band.left, device=device).long().expand(heads)
            )
            right = torch.minimum(
                right, torch.as_tensor(band.right, device=device).long().expand(heads)
            )
        if self.causal:
            right = right.clamp(max=0)
        return left, right

    @cached_property
    def band_extent(self) -> tuple[int, int]:
        """The widest reach over heads, ``(max left, max right)``, read in one device sync."""
        left, right = self.band_reach
        widest_left, widest_right = torch.stack([left.max(), right.max()]).tolist()
        return int(widest_left), int(widest_right)

    @property
    def key_positions(self) -> Tensor:
        """``(B, Tk)`` float32: each key's position from its sentence's first real token."""
        return self._positions().key

    def _positions(self) -> CallPositions:
        assert self.positions is not None, "a band or quadratic bias needs the call's positions"
        return self.positions

    @property
    def has_bias(self) -> bool:
        return self.dense_bias is not None or bool(self.quadratic) or self.relative is not None

    def total_bias(self) -> Tensor | None:
        """All biases as one float32 tensor broadcastable to ``(B, H, Tq, Tk)``."""
        bias = self.dense_bias
        if self.relative is not None:
            relative = self.relative.bias(self.q)
            bias = relative if bias is None else bias + relative
        for quad in self.quadratic:
            dense = quad.dense(self._positions())
            bias = dense if bias is None else bias + dense
        return bias

    def dense_blocked(self) -> Tensor | None:
        """The complement of :meth:`dense_allowed` (True = blocked), or None: padding alone
        is the padding mask itself, with no new tensor."""
        if self.causal or self.allowed is not None or self.bands:
            allowed = self.dense_allowed()
            return None if allowed is None else ~allowed
        if self.key_padding_mask is not None:
            return self.key_padding_mask.bool()[:, None, None, :]
        return None

    def dense_allowed(self) -> Tensor | None:
        """All restrictions as one bool tensor broadcastable to ``(B, H, Tq, Tk)``, or None."""
        allowed = None
        tq, tk = self.q.size(2), self.k.size(2)
        if self.key_padding_mask is not None:
            allowed = ~self.key_padding_mask.bool()[:, None, None, :]
        if self.causal:
            tri = torch.ones(tq, tk, dtype=torch.bool, device=self.q.device).tril(tk - tq)
            allowed = tri if allowed is None else allowed & tri
        for extra in [self.allowed, *(band.dense(self._positions()) for band in self.bands)]:
            if extra is not None:
                allowed = extra if allowed is None else allowed & extra
        return allowed

    def describe(self) -> str:
        """Where and what, for traces and logs, e.g. ``encoder_self layer 1, B=2 H=4 Tq=9
        Tk=9, float32 on cpu``."""
        site = self.site
        bsz, heads, tq, _ = self.q.shape
        tk = stored_shape(self, "k")[2]
        dtype = str(self.q.dtype).removeprefix("torch.")
        return (
            f"{site.kind} layer {site.layer + 1}, B={bsz} H={heads} Tq={tq} Tk={tk}, "
            f"{dtype} on {self.q.device.type}"
        )


def known_without_empty_rows(empty: Tensor) -> bool:
    """Whether no query of ``empty`` (True where a query has no allowed key) is empty, where
    that is known without a device sync (on the CPU): then no pass over the attention map
    needs to guard or zero such rows. False on other devices."""
    return empty.device.type == "cpu" and not bool(empty.any())


def guard_empty_rows(allowed: Tensor) -> Tensor:
    """Rows with no allowed key allow every key, so a fused kernel gives no NaN there; the
    caller then zeroes those rows' output (:func:`zero_empty_rows`)."""
    return allowed | ~allowed.any(dim=-1, keepdim=True)


def zero_empty_rows(out: Tensor, allowed: Tensor | None) -> Tensor:
    """A query with no allowed key attends to nothing: its output is 0 on every path (e.g.
    prev-k windows at the first k tokens, a window holding only padding)."""
    if allowed is None:
        return out
    return out * allowed.any(dim=-1, keepdim=True).to(out.dtype)


def masked_sdpa(
    q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, bias: Tensor | None, dropout_p: float
) -> Tensor:
    """Fused SDPA with a bool ``allowed`` set and an optional float32 ``bias``, no NaN rows."""
    mask, guarded = allowed, allowed
    if allowed is not None and known_without_empty_rows(~allowed.any(dim=-1, keepdim=True)):
        guarded = None  # nothing to guard or to zero
    elif allowed is not None:
        mask = guard_empty_rows(allowed)
    if bias is not None:
        mask = bias if mask is None else bias.masked_fill(~mask, MASK_VALUE)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=1.0)
    return zero_empty_rows(out, guarded)


def dense_logits(problem: AttentionProblem) -> Tensor:
    """Float32 logits with biases added and disallowed keys filled with a finite large negative."""
    return _logits_and_blocked(problem)[0]


def _logits_and_blocked(problem: AttentionProblem) -> tuple[Tensor, Tensor | None]:
    logits = grouped_matmul(problem.q, problem.k.transpose(-1, -2), problem.key_group).float()
    bias = problem.total_bias()
    if bias is not None:
        logits = logits + bias
    blocked = problem.dense_blocked()
    if blocked is not None:
        logits = logits.masked_fill(blocked, MASK_VALUE)
    return logits, blocked


def dense_probabilities(
    problem: AttentionProblem, post: Callable[[Tensor], Tensor] | None = None
) -> tuple[Tensor, Tensor]:
    """``(probs, logits)``, float32: the softmax of the reference path, after ``post``."""
    logits, blocked = _logits_and_blocked(problem)
    probs = torch.softmax(logits, dim=-1)
    if blocked is not None:  # a query with no allowed key attends to nothing (zero_empty_rows)
        # on the mask's own (broadcast) shape: padding alone costs a (B, 1, 1, 1) reduction
        empty = blocked.all(dim=-1, keepdim=True)
        if not known_without_empty_rows(empty):
            probs = probs.masked_fill(empty, 0.0)
    if post is not None:
        probs = post(probs)
    return probs, logits


def dense_attention(
    problem: AttentionProblem,
    post: Callable[[Tensor], Tensor] | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The reference path. Returns ``(out (B,H,Tq,d), probs float32, logits float32)``;
    ``probs`` is after ``post`` and before dropout; ``out`` uses the dropped-out probs."""
    probs, logits = dense_probabilities(problem, post)
    return dropped_product(problem, probs, dropout)[0], probs, logits


def dropped_product(
    problem: AttentionProblem, probs: Tensor, dropout: Callable[[Tensor], Tensor] | None = None
) -> tuple[Tensor, Tensor]:
    """``(dropout(p) @ v, dropout(p))``: one dropout mask, returned for terms that must use
    the same dropped probabilities (value terms); with ``relative_values``, the relative value
    term of those probabilities added."""
    used = probs.type_as(problem.v)
    if dropout is not None:
        used = dropout(used)
    out = grouped_matmul(used, problem.v, problem.key_group)
    if problem.relative_values:
        assert problem.relative is not None
        out = out + problem.relative.value_term(used, problem.v.dtype)
    return out, used


def _common_reason(kernel: Kernel, problem: AttentionProblem) -> str | None:
    if problem.key_group > 1 and not kernel.shares_source:
        return (
            f"keys shared by groups of {problem.key_group} queries (beam search's shared "
            "source): only shared_source takes them"
        )
    if problem.relative_values and not kernel.relative_values:
        return "relative value term (Shaw et al.'s a^V) needs the probabilities"
    return None


#: The attention kernels (``@register_kernel``; their order: ``fast/__init__.py``), with the
#: dense reference as the fallback.
REGISTRY: KernelRegistry[AttentionProblem] = KernelRegistry(
    "attention",
    reference_name="dense",
    reference=lambda problem: dense_attention(problem)[0],
    common_reason=_common_reason,
    describe=AttentionProblem.describe,
)
register_kernel = REGISTRY.register
explain = REGISTRY.explain


def kernel_names() -> list[str]:
    """The registered attention kernels, in the order tried."""
    return REGISTRY.names()


def fast_attention(problem: AttentionProblem) -> Tensor:
    """Output ``(B, H, Tq, d)`` from the first kernel that accepts the problem (the dense
    reference when all decline); a forced kernel that declines raises :class:`KernelDeclined`."""
    forced = REGISTRY.forced()
    if problem.key_group > 1 and forced is not None and not REGISTRY.shares_source(forced):
        problem = replace(  # the forced kernel, on one key row per query row
            problem,
            k=problem.k.repeat_interleave(problem.key_group, dim=0),
            v=problem.v.repeat_interleave(problem.key_group, dim=0),
            key_group=1,
        )
    return REGISTRY.run(problem)


def note_reference(problem: AttentionProblem, why: str) -> None:
    """Record in an active :func:`trace` that the pipeline itself took the dense reference
    (it needs the probabilities), and why."""
    REGISTRY.note_reference(problem, why)
