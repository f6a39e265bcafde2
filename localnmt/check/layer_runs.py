"""One attention layer built from a spec and run on a padded batch, for ``localnmt-check``
(and the tests): the method families to try, a layer from a spec, a batch padded on either
side, a forward and backward, and a low-precision run compared with the float32 one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from localnmt.attention.context import AttentionSite
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import build_modifiers, parse_spec


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
