"""Attention with relative position representations on the CPU in C (``localnmt/csrc/
relative.c``): Shaw et al. (2018) eqs. 3-5 without a ``(Tq, Tk)`` tensor.

Query ``i`` of a head attends its allowed keys ``j`` (real keys; the causal triangle in
decoder self-attention) with logits ``q_i·(k_j + w^K[r_ij])`` and output ``Σ_j p_ij (v_j +
w^V[r_ij])``, ``r_ij`` the row of the clipped distance. Backward recomputes the
probabilities from the saved log-sum-exp. Sentences are split among torch's threads (or, where
the extension is bound to another OpenMP runtime, among a pool's); the table gradients of all
of them are summed.

The kernel ``relative`` (``fast/relative.py``) calls :func:`c_relative_attention`; it
declines (returns None) what the C code does not take. With ``create_graph`` (double
backward) or under a vmap over backward, backward differentiates the same attention in torch
ops.
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
    view_of,
)

# None without a C compiler at install time, or when built from other sources
# (localnmt/cbuild.py): the dense reference runs
_relative = load("_relative", "relative.c")

#: Switch for tests and benchmarks (False: the dense reference).
ENABLED = _relative is not None
#: Built with OpenMP: each call splits its sentences among torch's threads itself.
TEAM = use_torchs_threads(_relative)


def takes(*tensors: Tensor) -> bool:
    """Whether the C kernel takes these tensors: built, float32 on the CPU, plain tensors with
    memory (not ``torch.func``'s wrapped tensors or a tracing subclass)."""
    return ENABLED and cpu_float32(*tensors)


def c_relative_attention(q: Tensor, k: Tensor, v: Tensor, key_table: Tensor,
                         value_table: Tensor, buckets: Tensor, key_padding_mask: Tensor | None,
                         causal: bool) -> Tensor | None:  # fmt: skip
    """``(B, H, Tq, d)``: ``q`` pre-scaled, ``k``/``v`` ``(B, H, Tk, d)``, tables ``(R, d)``,
    ``buckets`` int ``(B or 1, 1, Tq, Tk)`` in ``[0, R)``, ``key_padding_mask`` ``(B, Tk)``
    True at padding; or None if declined."""
    if not takes(q, k, v, key_table, value_table):
        return None
    bsz, _, tq, _ = q.shape
    tk = k.size(2)
    real = None
    if key_padding_mask is not None:
        real = (~key_padding_mask.bool()).to(torch.uint8).contiguous()
    buckets = buckets.reshape(-1, tq, tk).expand(bsz, tq, tk).to(torch.int64).contiguous()
    # q, k, v are read in place (the head-split views of the projections): only a last
    # dimension that is not contiguous is copied
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    key_table, value_table = key_table.contiguous(), value_table.contiguous()
    inputs = (q, k, v, key_table, value_table)
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return _CRelative.apply(q, k, v, key_table, value_table, buckets, real, causal)
    return _forward(q, k, v, key_table, value_table, buckets, real, causal)[0]


def _forward(q: Tensor, k: Tensor, v: Tensor, wk: Tensor, wv: Tensor, buckets: Tensor,
             real: Tensor | None, causal: bool) -> tuple[Tensor, Tensor]:  # fmt: skip
    """The output (``(B, Tq, H, d)`` in memory, as fused SDPA gives it: merging the heads is
    then free) and the log-sum-exp ``(B, H, Tq)`` of one forward call."""
    bsz, heads, tq, dim = q.shape
    out = q.new_empty(bsz, tq, heads, dim).transpose(1, 2)
    lse = q.new_empty(q.shape[:3])
    args = _CRelative._args(q, k, v, wk, wv, out, lse, buckets, real, causal)
    unused = (view_of(out),) * 4 + (0, 0)
    run_by_sentences(_relative.forward, args, bsz, unused, TEAM)
    return out, lse


class _CRelative(torch.autograd.Function):
    """Forward and backward of relative.c; keeps q, k, v, the tables, the output and the
    log-sum-exp."""

    @staticmethod
    def _args(q, k, v, wk, wv, out, lse, buckets, real, causal) -> tuple:
        _, heads, tq, dim = q.shape
        return (view_of(q), view_of(k), view_of(v), view_of(out), lse.data_ptr(), wk.data_ptr(),
                wv.data_ptr(), buckets.data_ptr(), 0 if real is None else real.data_ptr(),
                heads, tq, k.size(2), dim, wk.size(0), int(causal))  # fmt: skip

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, wk: Tensor, wv: Tensor,
                buckets: Tensor, real: Tensor | None, causal: bool) -> Tensor:  # fmt: skip
        ctx.save_for_backward(q, k, v, wk, wv)
        out, lse = _forward(q, k, v, wk, wv, buckets, real, causal)
        ctx.rest = (out, lse, buckets, real, causal)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        q, k, v, wk, wv = ctx.saved_tensors
        out, lse, buckets, real, causal = ctx.rest
        none = (None, None, None)
        inputs = (q, k, v, wk, wv)
        if torch.is_grad_enabled():  # create_graph: a backward to differentiate, in torch ops
            wanted = [t for t in inputs if t.requires_grad]
            dense = dense_relative(q, k, v, wk, wv, buckets, real, causal)
            found = iter(torch.autograd.grad(dense, wanted, grad, create_graph=True))
            return (*(next(found) if t.requires_grad else None for t in inputs), *none)
        if not has_memory(grad):  # vmap over backward (jacobian(vectorize=True)): torch ops
            with torch.enable_grad():
                leaves = [t.detach().requires_grad_() for t in inputs]
                dense = dense_relative(*leaves, buckets, real, causal)
                return (*torch.autograd.grad(dense, leaves, grad), *none)
        if grad.stride(-1) != 1:
            grad = grad.contiguous()
        # laid out as the inputs are (empty_like keeps a dense layout's strides)
        dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dwk, dwv = torch.zeros_like(wk), torch.zeros_like(wv)
        args = _CRelative._args(q, k, v, wk, wv, out, lse, buckets, real, causal)
        grads = (*map(view_of, (grad, dq, dk, dv)), dwk.data_ptr(), dwv.data_ptr())
        run_by_sentences(_relative.backward, args, q.size(0), grads, TEAM)
        return dq, dk, dv, dwk, dwv, *none


def dense_relative(q: Tensor, k: Tensor, v: Tensor, wk: Tensor, wv: Tensor, buckets: Tensor,
                   real: Tensor | None, causal: bool) -> Tensor:  # fmt: skip
    """The same attention in torch ops, rows without keys 0: what backward differentiates
    where C cannot run (a ``torch.func`` batched gradient, or ``create_graph``)."""
    tq, tk = q.size(2), k.size(2)
    idx = buckets[:, None].expand(q.size(0), q.size(1), tq, tk)
    logits = q @ k.transpose(-1, -2) + (q @ wk.t()).gather(-1, idx)
    allowed = torch.ones(tq, tk, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril(tk - tq)
    allowed = allowed.expand(q.size(0), 1, tq, tk)
    if real is not None:
        allowed = allowed & real.bool()[:, None, None, :]
    empty = ~allowed.any(-1, keepdim=True)
    logits = logits.masked_fill(~allowed, float("-inf")).masked_fill(empty, 0)
    probs = torch.softmax(logits, dim=-1).masked_fill(empty, 0.0)
    per_bucket = probs.new_zeros(*probs.shape[:3], wv.size(0)).scatter_add(-1, idx, probs)
    return probs @ v + per_bucket @ wv
