"""How an attention problem is computed: the dense reference, and faster kernels.

The pipeline turns the modifiers' outputs into an :class:`AttentionProblem`. When the caller
needs the probabilities (weights, post-softmax modifiers, analyses) it runs
:func:`dense_attention`, the reference. Otherwise :func:`fast_attention` tries the registered
kernels in priority order and takes the first that accepts the problem; fused SDPA with a
materialised mask is the last resort before the reference. Every kernel must give the same
numbers as the reference (docs/design.md, "Kernels": the kernels, what each declines, and the
tests that compare them with the reference).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.context import MASK_VALUE, AttentionContext, BandMask, QuadraticBias
from localnmt.attention.deferred import TensorSlot
from localnmt.attention.shared_source import from_groups, grouped_matmul, to_groups


@dataclass
class AttentionProblem:
    """Everything needed to compute ``softmax(q·kᵀ + bias, allowed) · v``.

    ``q`` is pre-scaled; all tensors are ``(B, H, T, d)``, except that ``k`` and ``v`` hold
    one row per ``key_group`` consecutive rows of ``q`` (beam search's shared source,
    :mod:`localnmt.attention.shared_source`). The allowed set is the intersection of: real
    keys (``key_padding_mask``), the causal triangle (``causal``, in index space),
    ``allowed`` (a dense bool tensor) and each band of ``bands``.
    """

    ctx: AttentionContext
    q: Tensor
    k: Tensor = TensorSlot()  # may hold a Deferred: see localnmt.attention.deferred
    v: Tensor = TensorSlot()
    key_padding_mask: Tensor | None = None
    causal: bool = False
    allowed: Tensor | None = None
    bands: list[BandMask] = field(default_factory=list)
    dense_bias: Tensor | None = None
    quadratic: list[QuadraticBias] = field(default_factory=list)
    dropout_p: float = 0.0
    key_group: int = 1
    #: The padding mask as the layer received it, before any transform (2D-CSAN repeats it per
    #: key group): the same object in every layer of a forward pass, so kernels can cache what
    #: they build from it by identity.
    padding_source: Tensor | None = None

    @property
    def has_bias(self) -> bool:
        return self.dense_bias is not None or bool(self.quadratic)

    def total_bias(self) -> Tensor | None:
        """All biases as one float32 tensor broadcastable to ``(B, H, Tq, Tk)``."""
        bias = self.dense_bias
        for quad in self.quadratic:
            dense = quad.dense(self.ctx)
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
        for extra in [self.allowed, *(band.dense(self.ctx) for band in self.bands)]:
            if extra is not None:
                allowed = extra if allowed is None else allowed & extra
        return allowed


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
    mask: Tensor | None = None if allowed is None else guard_empty_rows(allowed)
    if bias is not None:
        mask = bias if mask is None else bias.masked_fill(~mask, MASK_VALUE)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=1.0)
    return zero_empty_rows(out, allowed)


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
        probs = probs.masked_fill(blocked.all(dim=-1, keepdim=True), 0.0)
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
    the same dropped probabilities (value terms)."""
    used = probs.type_as(problem.v)
    if dropout is not None:
        used = dropout(used)
    return grouped_matmul(used, problem.v, problem.key_group), used


Kernel = Callable[[AttentionProblem], Tensor | None]
_KERNELS: list[tuple[int, str, Kernel]] = []


def register_kernel(name: str, priority: int) -> Callable[[Kernel], Kernel]:
    """Decorator: add a kernel; higher priority is tried first. A kernel returns None to
    decline a problem it cannot compute exactly."""

    def wrap(fn: Kernel) -> Kernel:
        _KERNELS[:] = [entry for entry in _KERNELS if entry[1] != name]
        _KERNELS.append((priority, name, fn))
        _KERNELS.sort(key=lambda entry: -entry[0])
        return fn

    return wrap


def kernel_names() -> list[str]:
    return [name for _, name, _ in _KERNELS]


#: Set to a kernel name to force it (tests, benchmarks); None = automatic choice.
FORCE_KERNEL: str | None = None


@contextlib.contextmanager
def forced_kernel(name: str | None) -> Iterator[None]:
    """Set :data:`FORCE_KERNEL` to ``name`` inside the block (None: automatic), then restore."""
    global FORCE_KERNEL
    old, FORCE_KERNEL = FORCE_KERNEL, name
    try:
        yield
    finally:
        FORCE_KERNEL = old


def fast_attention(problem: AttentionProblem) -> Tensor:
    """Output ``(B, H, Tq, d)`` from the first kernel that accepts the problem."""
    if problem.key_group > 1:
        if FORCE_KERNEL is None:
            return shared_source_attention(problem)
        problem = replace(  # the forced kernel, on one key row per query row
            problem,
            k=problem.k.repeat_interleave(problem.key_group, dim=0),
            v=problem.v.repeat_interleave(problem.key_group, dim=0),
            key_group=1,
        )
    for _, name, kernel in _KERNELS:
        if FORCE_KERNEL is not None and name != FORCE_KERNEL:
            continue
        out = kernel(problem)
        if out is not None:
            return out
    if FORCE_KERNEL is not None:
        raise RuntimeError(f"kernel '{FORCE_KERNEL}' declined the problem")
    return dense_attention(problem)[0]


def shared_source_attention(problem: AttentionProblem) -> Tensor:
    """A problem whose keys serve groups of queries (``key_group``): fused SDPA on each
    group's queries side by side where only padding restricts them (the padding is the same
    within a group), else the dense path."""
    restricted = problem.causal or problem.allowed is not None or bool(problem.bands)
    if restricted or problem.has_bias:
        return dense_attention(problem)[0]
    group, tq = problem.key_group, problem.q.size(2)
    mask = problem.key_padding_mask
    allowed = None if mask is None else ~mask[::group, None, None, :]
    queries = to_groups(problem.q, group)
    out = masked_sdpa(queries, problem.k, problem.v, allowed, None, problem.dropout_p)
    return from_groups(out, group, tq)


@register_kernel("sdpa", priority=0)
def sdpa_kernel(problem: AttentionProblem) -> Tensor | None:
    """Fused ``scaled_dot_product_attention`` with a materialised mask (and bias in float32)."""
    bias = None
    if problem.has_bias:
        if problem.q.dtype != torch.float32:
            return None  # keep the bias in float32: the reference path does
        bias = problem.total_bias()
    only_causal = (
        problem.causal
        and problem.key_padding_mask is None
        and problem.allowed is None
        and not problem.bands
        and problem.q.size(2) == problem.k.size(2)
    )
    if only_causal and bias is None:
        return F.scaled_dot_product_attention(
            problem.q, problem.k, problem.v, dropout_p=problem.dropout_p, is_causal=True, scale=1.0
        )
    return masked_sdpa(
        problem.q, problem.k, problem.v, problem.dense_allowed(), bias, problem.dropout_p
    )
