"""Builders and plain re-statements shared by the attention tests: padding masks, counters
around C extensions, a dropout that keeps its masks, and the band oracles (a plain softmax over
the window, 2D-CSAN's stacked keys). Everything here is written without the pipeline's
helpers, so that it can judge them. The layer builders ``localnmt-check`` uses too live in
:mod:`localnmt.check.layer_runs` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from localnmt.attention import dispatch, step_plan
from localnmt.attention.pipeline import LocalAttention
from localnmt.check.layer_runs import (  # noqa: F401  (the tests' builders too)
    LOW_PRECISION_TOLERANCE,
    METHOD_CASES,
    Comparison,
    LayerBatch,
    LayerRun,
    compare_with_float32,
    make_attention,
    padded_batch,
    padding_mask,
    run_layer,
)

#: GMM's ``approx`` variant under each option the C kernels handle (decoding step, training
#: mixture): the kernel tests run the C and the torch paths on these.
GMM_APPROX_SPECS = [
    "gmm",
    "gmm[k=1]",
    "gmm[k=7]",
    "gmm[share=mean]",
    "gmm[share=variance]",
    "gmm[share=weight]",
    "gmm[fusion=average]",
    "gmm[fusion=gmm]",
    "gmm[sigma_min=1.5,offset=0]",
]


def one_layer_self_attention(
    spec: str, kind: str = "encoder_self", embed_dim: int = 32, heads: int = 4
) -> LocalAttention:
    """Self-attention at ``kind`` with ``spec``: one layer of 6 (64 positions), training
    mode (the windowed methods' tests)."""
    return make_attention(kind, spec, embed_dim=embed_dim, heads=heads, num_layers=6,
                          max_positions=64, self_attention=True, train=True)  # fmt: skip


def two_sentences(side: str, lengths: Sequence[int] = (6, 11), embed_dim: int = 32):
    """Seeded inputs ``(T, 2, embed_dim)`` and their padding mask, padded on ``side``."""
    torch.manual_seed(3)
    t = max(lengths)
    return torch.randn(t, len(lengths), embed_dim), padding_mask(lengths, t, side)


def mixed_padding(batch: int, length: int, real: int, side: str) -> Tensor:
    """True at padding: sentence 1 has ``real`` tokens (padded on ``side``), sentence 2 is
    padding only, the others are full."""
    lengths = [length] * batch
    lengths[1], lengths[2] = real, 0
    return padding_mask(lengths, length, side)


def linear(lin: torch.nn.Linear, x: Tensor) -> Tensor:
    """``x Wᵀ + b`` from the layer's raw weights."""
    return x @ lin.weight.t() + (0.0 if lin.bias is None else lin.bias)


class CountCalls:
    """Counts calls into a C extension module by function name (a stand-in around the real
    module: ``monkeypatch.setattr(native_module, "_ext", CountCalls(native_module._ext))``)."""

    def __init__(self, module: Any):
        self.module, self.calls = module, {}

    def __getattr__(self, name: str) -> Callable:
        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return getattr(self.module, name)(*args)

        return call


class RecordingDropout(torch.nn.Module):
    """Attention dropout with a fresh random mask per call, each mask kept for the reference."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.apply_during_inference, self.masks = p, False, []
        self.generator = torch.Generator().manual_seed(7)

    def forward(self, probs: Tensor) -> Tensor:
        keep = torch.rand(probs.shape, generator=self.generator) >= self.p
        self.masks.append(keep)
        return probs * keep / (1 - self.p)


# ---- per-sentence re-statements -------------------------------------------------------------
def sentence_projections(
    attention: LocalAttention, x: Tensor, pad: Tensor, b: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Sentence ``b`` alone: ``(real indices, its real inputs (I, C), q (H, I, d) scaled by
    1/√d, k (H, I, d))``, projected with the layer's own weights."""
    heads, dim = attention.num_heads, attention.head_dim
    real = (~pad[b]).nonzero().squeeze(1)
    xs = x[real, b]
    q = (attention.q_proj(xs) * attention.scaling).view(-1, heads, dim).transpose(0, 1)
    k = attention.k_proj(xs).view(-1, heads, dim).transpose(0, 1)
    return real, xs, q, k


def assert_probs_per_sentence(
    attention: LocalAttention,
    x: Tensor,
    pad: Tensor,
    expected: Callable[[Tensor, Tensor, Tensor], Tensor],
) -> None:
    """The layer's per-head probabilities of self-attention over ``x`` ``(T, B, C)`` equal
    ``expected(q, k, xs)`` ``(H, I, I)`` computed on each sentence's real tokens alone."""
    weights = attention(x, x, x, key_padding_mask=pad, need_head_weights=True)[1]
    for b in range(x.size(1)):
        real, xs, q, k = sentence_projections(attention, x, pad, b)
        got = weights[:, b][:, real][:, :, real]
        torch.testing.assert_close(got, expected(q, k, xs), atol=1e-5, rtol=1e-4)


# ---- band oracles -----------------------------------------------------------------------------
def dense_band(q, k, v, left, right, pad, groups: int = 1, causal: bool = False) -> Tensor:
    """Plain restatement of band attention: softmax over keys with ``-left <= j-i <= right``
    (per head), real keys only; ``k``/``v`` hold ``groups`` stacked groups of the same
    positions; a query without keys gives 0."""
    t = q.size(2)
    i = torch.arange(t)[:, None]
    j = torch.arange(t).repeat(groups)[None, :]
    rel = j - i
    allowed = (rel[None] >= -left.view(-1, 1, 1)) & (rel[None] <= right.view(-1, 1, 1))
    if causal:
        allowed = allowed & (rel[None] <= 0)
    allowed = allowed[None] & ~pad[:, None, None, :]
    logits = (q @ k.transpose(-1, -2)).masked_fill(~allowed, float("-inf"))
    return torch.softmax(logits, -1).nan_to_num(0.0) @ v  # padded queries: no key


def stacked_heads(x: Tensor, groups: int) -> Tensor:
    """Plain restatement of 2D-CSAN's key layout (Yang et al. 2019, eq. 7-8): group ``g`` of
    head ``h`` is head ``(h + g - G//2) mod H``, wrapping at the edge heads, stacked along the
    key axis."""
    heads = x.size(1)
    parts = [x[:, [(h + g - groups // 2) % heads for h in range(heads)]] for g in range(groups)]
    return torch.cat(parts, dim=2)


def band_inputs(side: str, t: int = 45, groups: int = 1, seed: int = 0):
    """``(q, k, v, pad, key pad)``: 3 sentences × 4 heads × ``t`` positions × 8 dims, leaves
    with gradients; sentence 1 loses 7 tokens, sentence 3 30, to ``side`` padding; ``k``/``v``
    hold ``groups`` stacked key groups (the key padding repeats per group)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(3, 4, t, 8, generator=g).requires_grad_()
    k = torch.randn(3, 4, groups * t, 8, generator=g).requires_grad_()
    v = torch.randn(3, 4, groups * t, 8, generator=g).requires_grad_()
    pad = torch.zeros(3, t, dtype=torch.bool)
    if side == "left":
        pad[0, :7], pad[2, :30] = True, True
    else:
        pad[0, -7:], pad[2, -30:] = True, True
    return q, k, v, pad, pad.repeat(1, groups)


def assert_same_at_real_queries(
    got: Tensor,
    want: Tensor,
    pad: Tensor,
    inputs: Sequence[Tensor],
    grad_atol: float = 1e-5,
    grad_rtol: float = 1e-5,
) -> None:
    """Outputs at real queries agree to 1e-5, and so do the gradients of ``inputs`` through
    them under seeded random weights (padded queries' outputs are never read: kernels may
    differ there)."""
    real = ~pad[:, None, :, None]
    torch.testing.assert_close(got * real, want * real, atol=1e-5, rtol=1e-5)
    weight = torch.randn(got.shape, generator=torch.Generator().manual_seed(0))
    g1 = torch.autograd.grad((got * real * weight).sum(), inputs)
    g2 = torch.autograd.grad((want * real * weight).sum(), inputs)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, atol=grad_atol, rtol=grad_rtol)


def assert_layer_kernels_agree(
    spec: str, kind: str, names: Sequence[str], length: int, batch: int = 3
) -> None:
    """One ``LocalAttention`` layer (16 dims, 4 heads) of ``spec`` over ``length`` tokens, each
    kernel of ``names`` forced in turn: outputs at real queries and input gradients agree to
    1e-5 (encoder: padding, one sentence padded by 40 tokens and one by half; decoder self:
    fairseq's causal float mask)."""

    att = make_attention(kind, spec, embed_dim=16, heads=4, self_attention=True, train=True)
    x = torch.randn(length, batch, 16, requires_grad=True)
    pad, mask = torch.zeros(batch, length, dtype=torch.bool), None
    if kind == "decoder_self":
        pad, mask = None, torch.triu(torch.full((length, length), float("-inf")), 1)
    else:
        pad[1, :40], pad[2, : length // 2] = True, True
    real = torch.ones(length, batch, 1) if pad is None else (~pad).T[..., None].float()
    weight = torch.randn(length, batch, 16) * real
    results = []
    for name in names:
        with dispatch.forced_kernel(name):
            y, _ = att(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=False)
        results.append((y * real, *torch.autograd.grad((y * weight).sum(), x)))
    for got in results[1:]:
        for a, b in zip(got, results[0], strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


class PlanRuns:
    """Counts the decoding steps a kept step plan ran (``monkeypatch`` around
    :func:`localnmt.attention.step_plan.run_kept`)."""

    def __init__(self, monkeypatch: Any):
        self.count = 0
        real = step_plan.run_kept

        def counted(*args, **kwargs):
            out = real(*args, **kwargs)
            self.count += out is not None
            return out

        monkeypatch.setattr(step_plan, "run_kept", counted)
