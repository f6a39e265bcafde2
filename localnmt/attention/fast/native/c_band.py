"""Band attention on the CPU in C: each query visits only its window (``localnmt/csrc/band.c``).

The band kernel's :func:`~localnmt.attention.fast.band.band_attention` calls
:func:`c_band_attention` first. It computes the
same softmax over the same keys as the blocked kernels, directly: query ``i`` of head ``h``
meets the real keys ``j`` with ``-left[h] ≤ j - i ≤ right[h]`` of its own head (1D) or of
heads ``h - a … h + a`` read in place (2D-CSAN's head area), with no query blocks, key windows
or masks in between. Backward recomputes the probabilities from the saved log-sum-exp, so
memory is the inputs, the output and one float per query. Sentences are split among
``torch.get_num_threads()`` threads (the C code releases the GIL; each sentence writes only
its own rows of the key and value gradients).

It declines (returns None) dropout, dtypes other than float32, GPU tensors, stacked key groups
that are not a head area (head selection), tensors without memory of their own (``torch.func``
transforms, tracing subclasses), or when the optional extension ``localnmt._band`` was not
built (no C compiler at install time). Under a vmap over backward (``jacobian(vectorize=True)``)
and with ``create_graph`` (double backward) backward differentiates the same attention in
torch ops.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from localnmt.attention.fast.native import (
    cpu_float32,
    has_memory,
    load,
    run_by_sentences,
    use_torchs_threads,
)
from localnmt.attention.head_area import area_view

# None without a C compiler at install time, or when built from other sources
# (localnmt/cbuild.py): the blocked kernels run
_band = load("_band", "band.c")

#: Switch for tests and benchmarks (False: the blocked kernels of band.py).
ENABLED = _band is not None
#: Built with OpenMP: each call splits its sentences among torch's threads itself.
TEAM = use_torchs_threads(_band)


def takes(q: Tensor, k: Tensor, v: Tensor, dropout_p: float) -> bool:
    """Whether the C kernel takes these inputs (1D or head-area layout: ``k``/``v`` shaped like
    ``q``): built, float32 on the CPU, no dropout, plain tensors with memory (not
    ``torch.func``'s wrapped tensors or a tracing subclass)."""
    return (
        ENABLED
        and dropout_p == 0.0
        and k.shape == q.shape
        and v.shape == q.shape
        and cpu_float32(q, k, v)
    )


def c_band_attention(q: Tensor, k: Tensor, v: Tensor, left: Tensor, right: Tensor,
                     key_padding_mask: Tensor | None, area: int | None,
                     dropout_p: float) -> Tensor | None:  # fmt: skip
    """``(B, H, T, d)`` band attention (``q`` pre-scaled; ``k``/``v`` ``(B, H, T, d)``;
    ``key_padding_mask`` ``(B, T)`` or, with ``area``, ``(B, G·T)``), or None if declined."""
    if not takes(q, k, v, dropout_p):
        return None
    bsz, heads, t, _ = q.shape
    if area == 0:  # a head area of one head is the 1D layout
        area = None
    if area is not None and not 0 < 2 * area + 1 <= heads:
        return None
    real = None
    if key_padding_mask is not None:
        real = (~key_padding_mask.view(bsz, -1, t)[:, 0].bool()).to(torch.uint8).contiguous()
    # one band per head, as the blocked kernels broadcast it; reaches beyond T change nothing
    left = left.to(device="cpu", dtype=torch.int64).expand(heads).clamp(-t, t).contiguous()
    right = right.to(device="cpu", dtype=torch.int64).expand(heads).clamp(-t, t).contiguous()
    # contiguous here, under autograd, not inside forward: the copies are what backward keeps,
    # and they stay differentiable for a double backward (the strided originals, head-split
    # views of the projections, can be freed; keeping them too cost a third copy of q, k, v)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    return _CBand.apply(q, k, v, left, right, real, -1 if area is None else area)


class _CBand(torch.autograd.Function):
    """Forward and backward of band.c; keeps q, k, v, the output and the log-sum-exp."""

    @staticmethod
    def _args(q, k, v, out, lse, real, left, right, area) -> tuple:
        bsz, heads, t, dim = q.shape
        groups = 1 if area < 0 else 2 * area + 1
        return (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
                0 if real is None else real.data_ptr(), left.data_ptr(), right.data_ptr(),
                heads, t, dim, groups, area)  # fmt: skip

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, left: Tensor, right: Tensor,
                real: Tensor | None, area: int) -> Tensor:  # fmt: skip
        # the inputs as given (contiguous) are saved: a double backward differentiates
        # through them
        ctx.save_for_backward(q, k, v)
        out = torch.empty_like(q)
        lse = q.new_empty(q.shape[:3])
        args = _CBand._args(q, k, v, out, lse, real, left, right, area)
        run_by_sentences(_band.forward, args, q.size(0), (0, 0, 0, 0), TEAM)
        ctx.rest = (out, lse, left, right, real)
        ctx.area = area
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        q, k, v = ctx.saved_tensors
        out, lse, left, right, real = ctx.rest
        none = (None, None, None, None)
        if torch.is_grad_enabled():  # create_graph: a backward to differentiate, in torch ops
            inputs = [t for t in (q, k, v) if t.requires_grad]
            dense = _dense_band(q, k, v, left, right, real, ctx.area)
            found = iter(torch.autograd.grad(dense, inputs, grad, create_graph=True))
            return (*(next(found) if t.requires_grad else None for t in (q, k, v)), *none)
        if not has_memory(grad):  # vmap over backward (jacobian(vectorize=True)): torch ops
            with torch.enable_grad():
                inputs = [t.detach().requires_grad_() for t in (q, k, v)]
                dense = _dense_band(*inputs, left, right, real, ctx.area)
                return (*torch.autograd.grad(dense, inputs, grad), *none)
        grad = grad.contiguous()
        dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        args = _CBand._args(q, k, v, out, lse, real, left, right, ctx.area)
        grads = (grad.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        run_by_sentences(_band.backward, args, q.size(0), grads, TEAM)
        return dq, dk, dv, *none


def _dense_band(q: Tensor, k: Tensor, v: Tensor, left: Tensor, right: Tensor,
                real: Tensor | None, area: int) -> Tensor:  # fmt: skip
    """The same attention with torch ops over a materialised (T, G·T) mask, rows without keys
    0: what backward differentiates where C cannot run (a ``torch.func`` batched gradient, or
    ``create_graph``). Plain matmul and softmax rather than problem.masked_sdpa: fused SDPA's
    CPU backward cannot be differentiated again (tests/attention/fast/test_band_native.py)."""
    bsz, heads, t, _ = q.shape
    groups = 1
    if area >= 0:
        groups = 2 * area + 1
        k, v = area_view(k, groups), area_view(v, groups)
    i = torch.arange(t, device=q.device)[:, None]
    rel = torch.arange(t, device=q.device).repeat(groups)[None, :] - i  # (T, G·T)
    allowed = (rel >= -left.view(-1, 1, 1)) & (rel <= right.view(-1, 1, 1))  # (H, T, G·T)
    allowed = allowed.unsqueeze(0)
    if real is not None:
        allowed = allowed & real.bool().repeat(1, groups)[:, None, None, :]
    empty = ~allowed.any(-1, keepdim=True)  # rows without keys: 0, and no NaN in any gradient
    logits = (q @ k.transpose(-1, -2)).masked_fill(~allowed, float("-inf")).masked_fill(empty, 0)
    return torch.softmax(logits, dim=-1).masked_fill(empty, 0.0) @ v
