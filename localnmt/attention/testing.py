"""Builders and plain re-statements shared by the attention tests and ``localnmt-check``.

One place for what several test files need: a one-layer :class:`LocalAttention` from a spec,
padding masks (left or right), counters around C extensions, a dropout that keeps its masks,
and the band oracles (a plain softmax over the window, 2D-CSAN's stacked keys). Everything
here is written without the pipeline's helpers, so that it can judge them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from localnmt.attention.context import AttentionSite
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import build_modifiers, parse_spec

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


def make_attention(
    kind: str,
    spec: str = "",
    *,
    embed_dim: int,
    heads: int,
    layer: int = 0,
    num_layers: int = 1,
    max_positions: int = 1024,
    seed: int = 0,
    dropout: float = 0.0,
    self_attention: bool | None = None,
    random_biases: bool = False,
    train: bool = False,
) -> LocalAttention:
    """A ``LocalAttention`` at site ``kind`` with the modifiers of ``spec``, parameters drawn
    after ``torch.manual_seed(seed)`` (modifiers first); eval mode unless ``train``.
    ``random_biases``: every 1-d parameter drawn from N(0, 0.5²) instead of its zero
    initialisation, so that every term of an equation matters."""
    torch.manual_seed(seed)
    site = AttentionSite(kind, layer, num_layers, embed_dim, heads, max_positions=max_positions)
    cross = kind == "cross"
    attention = LocalAttention(
        embed_dim,
        heads,
        site=site,
        modifiers=build_modifiers(parse_spec(spec), site),
        dropout=dropout,
        self_attention=not cross if self_attention is None else self_attention,
        encoder_decoder_attention=cross,
    )
    if random_biases:
        with torch.no_grad():
            for p in attention.parameters():
                if p.dim() == 1:
                    p.normal_(0, 0.5)
    return attention.train(train)


def padding_mask(lengths: Sequence[int], total: int, side: str) -> Tensor:
    """``(B, total)`` bool, True at padding: sentence ``b`` has ``lengths[b]`` real tokens,
    padded on the ``side`` (``"left"`` or ``"right"``)."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', not {side!r}")
    mask = torch.ones(len(lengths), total, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if side == "left":
            mask[b, total - n :] = False
        else:
            mask[b, :n] = False
    return mask


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
    from localnmt.attention import dispatch

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


# ---- one layer run at a dtype, compared with float32 -----------------------------------------
#: One spec per method family and site, every registered method at least once (windows,
#: Gaussian biases, post stages, value terms, output terms, tied projections, both GMM
#: variants that renormalise or not).
METHOD_CASES: list[tuple[str, str]] = [
    ("encoder_self", ""),
    ("encoder_self", "localness"),
    ("encoder_self", "localness[window=layer]"),
    ("encoder_self", "localness[window=head]"),
    ("encoder_self", "rel_pos"),
    ("encoder_self", "localness + rel_pos"),
    ("encoder_self", "csan_1d[window=3]"),
    ("encoder_self", "csan_2d[window=3]"),
    ("encoder_self", "block[block=3]"),
    ("encoder_self", "bi_direct"),
    ("encoder_self", "neighbor"),
    ("encoder_self", "local_hard[half_window=2]"),
    ("encoder_self", "local_heads[masks=prev1;next1;band2;global]"),
    ("encoder_self", "local_heads_renorm[masks=prev1;next1;band2;global]"),
    ("encoder_self", "tied_qk[groups=2]"),
    ("decoder_self", ""),
    ("decoder_self", "localness"),
    ("decoder_self", "rel_pos"),
    ("decoder_self", "csan_1d[window=3]"),
    ("decoder_self", "neighbor"),
    ("cross", ""),
    ("cross", "localness"),
    ("cross", "gmm"),
    ("cross", "gmm[variant=norm]"),
    ("cross", "gmm[variant=synthesis]"),
    ("cross", "hardcoded_gaussian"),
]

#: Largest error of a low-precision run against float32 (:func:`compare_with_float32`): each
#: output at a real query and each gradient, relative to the larger of that tensor's largest
#: float32 value and 5 % of the layer's largest float32 gradient. About 20 unit roundoffs
#: (4.9e-4 in float16, 3.9e-3 in bfloat16): inputs, weights, products and sums each round,
#: and gradients go through several of them. Measured on METHOD_CASES (16 dims, 4 heads, 10
#: tokens, 3 seeds): at most 4.5e-3 (float16) and 4.7e-2 (bfloat16).
LOW_PRECISION_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 1e-1}


@dataclass
class LayerBatch:
    """Inputs of one layer call: ``query (Tq, B, C)``, ``key`` (the query itself in self-
    attention), fairseq's ``key_padding_mask`` / ``attn_mask``, and which queries are real
    (``(Tq, B)`` bool: outputs at padded queries are never read, kernels may differ there)."""

    query: Tensor
    key: Tensor
    key_padding_mask: Tensor | None
    attn_mask: Tensor | None
    real_queries: Tensor


def padded_batch(
    site: str, length: int, embed_dim: int, seed: int = 0, device: str | torch.device = "cpu"
) -> LayerBatch:
    """Five sentences, float32: a full one, one of a single token (left-padded), one of
    padding only (no allowed key anywhere), one of half the length (right-padded) and one of
    three tokens (left-padded); cross-attention reads a source two tokens longer, padded the
    same way; decoder self-attention gets fairseq's causal float mask and no padding."""
    g = torch.Generator().manual_seed(seed)
    tk = length + 2 if site == "cross" else length
    x = torch.randn(length, 5, embed_dim, generator=g)
    key = torch.randn(tk, 5, embed_dim, generator=g) if site == "cross" else x
    if site == "decoder_self":
        mask = torch.triu(torch.full((length, length), float("-inf")), 1)
        real = torch.ones(length, 5, dtype=torch.bool)
        return LayerBatch(x.to(device), key.to(device), None, mask.to(device), real.to(device))
    sides = ("left", "left", "left", "right", "left")
    lengths = (tk, 1, 0, tk // 2, 3)
    pad = torch.stack([padding_mask([n], tk, side)[0] for n, side in zip(lengths, sides)])
    real = (~pad).T if site != "cross" else torch.ones(length, 5, dtype=torch.bool)
    return LayerBatch(x.to(device), key.to(device), pad.to(device), None, real.to(device))


@dataclass
class LayerRun:
    """A layer's output (float32 copy) and the gradients of its inputs and parameters."""

    output: Tensor
    gradients: dict[str, Tensor]


def run_layer(
    attention: LocalAttention,
    batch: LayerBatch,
    dtype: torch.dtype,
    need_weights: bool,
    reference: bool = False,
) -> LayerRun:
    """Forward and backward of a copy of ``attention`` in ``dtype`` on ``batch``'s device, the
    loss a fixed random weighting of the outputs at real queries. ``need_weights`` takes the
    dense path; ``reference`` the reference path all through (dense attention and the
    methods' torch ops: a recorded call)."""
    import copy

    layer = copy.deepcopy(attention).to(device=batch.query.device, dtype=dtype)
    layer.recording = reference
    need_weights = need_weights or reference
    query = batch.query.to(dtype).detach().requires_grad_()
    cross = batch.key is not batch.query
    key = batch.key.to(dtype).detach().requires_grad_() if cross else query
    out, _ = layer(query, key, key, key_padding_mask=batch.key_padding_mask,
                   attn_mask=batch.attn_mask, need_weights=need_weights)  # fmt: skip
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
    layer.last_record = None
    real = batch.real_queries[..., None].to(out.dtype)
    (out.float() * weight * real).sum().backward()
    grads = {"query": query.grad} | ({"key": key.grad} if cross else {})
    grads |= {name: p.grad for name, p in layer.named_parameters() if p.grad is not None}
    return LayerRun(out.detach().float(), {n: g.float() for n, g in grads.items() if g is not None})


@dataclass
class Comparison:
    """How far a run is from float32: the worst relative error (see
    :data:`LOW_PRECISION_TOLERANCE`), where, and whether every value is finite."""

    error: float
    worst: str
    finite: bool


def compare_with_float32(reference: LayerRun, run: LayerRun, real_queries: Tensor) -> Comparison:
    """The worst error of ``run`` against the float32 ``reference``: outputs at real queries
    and every gradient, relative to ``max(max |reference tensor|, 0.05 · G)`` with ``G`` the
    largest float32 gradient (a gradient zero in exact arithmetic, such as the key bias's
    under softmax's shift invariance, is held to the layer's scale)."""
    finite = bool(torch.isfinite(run.output).all()) and all(
        bool(torch.isfinite(g).all()) for g in run.gradients.values()
    )
    real = real_queries[..., None]
    pairs = {"output": (run.output * real, reference.output * real)}
    pairs |= {name: (run.gradients.get(name), g) for name, g in reference.gradients.items()}
    largest = max((float(g.abs().max()) for g in reference.gradients.values()), default=0.0)
    worst, error = "output", 0.0
    for name, (got, want) in pairs.items():
        if got is None:
            return Comparison(float("inf"), f"{name}: no gradient", finite)
        scale = max(float(want.abs().max()), 0.05 * largest, 1e-30)
        this = float((got - want).abs().max()) / scale
        if math.isnan(this) or (not math.isnan(error) and this > error):  # NaN is the worst
            worst, error = name, this
    return Comparison(error, worst, finite)
