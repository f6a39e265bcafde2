"""BLOCK (Shen et al. 2018b, Bi-BloSAN, as re-implemented by Yang et al. 2019, Table 1):
attention within blocks plus attention over block summaries, fused by a gate.

Per sentence of real length I, with block length r (Bi-BloSAN §3.2: r = ⌈√(2I)⌉, or fixed):

1. intra-block: each query attends only to the keys of its own block (a restriction);
2. block summaries (source2token, eq. 7 of Bi-BloSAN, multi-dimensional):
   ``u_b = Σ_{t∈b} softmax_t(W_2 elu(W_1 x_t)) ⊙ x_t`` (feature-wise softmax within the block);
3. inter-block: ``o_inter = softmax_b(q_i · W_k u_b) · W_v u_b`` over the sentence's blocks,
   per head (queries are the layer's own);
4. fusion gate: ``g = sigmoid(W_g [o_intra; o_inter])``, output ``(1−g)·o_intra + g·o_inter``
   (handed back as an output term ``g·(o_inter − o_intra)``: ``o_intra`` is the layer's own
   attention output, so any kernel can compute step 1).

Parameters per layer: W_1, W_2, W_k, W_v (d×d) and W_g (2d×d): 6d² ≈ 1.57M at d = 512,
4.7M over 3 layers. The paper lists +6.0M; Bi-BloSAN proper also has a forward and a backward
copy (DiSAN masks inside blocks) and a second fusion layer, which we do not duplicate.
Encoder self-attention only (the summaries need the whole block).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from localnmt.attention.context import MASK_VALUE, AttentionContext, AttentionSite
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    check_positions,
    option,
    register_modifier,
)
from localnmt.attention.record import tensor_field


@dataclass
class BlockRecord:
    """The fusion gate of a recorded BLOCK layer."""

    gate: Tensor = tensor_field("bhqd", "g of step 4, per feature of each head")


@register_modifier
class Block(AttentionModifier):
    """Intra-block attention + gated attention over source2token block summaries."""

    name = "block"
    reads_layer_input = True
    sites = ("encoder_self",)

    @dataclass
    class Options:
        block: int = option(0, "block length r (0 = ceil(sqrt(2·I)) per sentence, Bi-BloSAN)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        if options.block < 0:
            raise SpecError(f"method '{cls.name}': block={options.block} must be >= 0")
        check_positions(cls.name, "block", options.block, site, cls.Options.block)

    def __init__(self, options: Options, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        d = site.embed_dim
        self.s2t_hidden = nn.Linear(d, d)
        self.s2t_score = nn.Linear(d, d)
        self.block_key = nn.Linear(d, d)
        self.block_value = nn.Linear(d, d)
        self.gate = nn.Linear(2 * d, d)

    def block_index(self, ctx: AttentionContext, positions: Tensor) -> Tensor:
        """Block of each position, (B, T) int64 (per-sentence block length)."""
        if self.options.block:
            size = torch.full_like(ctx.key_lengths[:, :1], float(self.options.block))
        else:
            size = torch.ceil(torch.sqrt(2.0 * ctx.key_lengths[:, :1]))
        return torch.div(positions, size, rounding_mode="floor").long()

    def restrict(self, ctx: AttentionContext) -> Tensor:
        kb = self.block_index(ctx, ctx.key_positions)
        qb = self.block_index(ctx, ctx.query_positions)
        return (qb[:, :, None] == kb[:, None, :])[:, None]  # (B, 1, Tq, Tk)

    def output_term(self, ctx: AttentionContext, out: Tensor) -> Tensor:
        """``g·(o_inter − o_intra)`` with ``o_intra = out``, the layer's own restricted
        attention (from any kernel: no probabilities needed)."""
        x = ctx.query_input.transpose(0, 1)  # (B, T, d)
        bsz, t, d = x.shape
        heads = ctx.num_heads
        real = torch.ones(bsz, t, dtype=torch.bool, device=x.device)
        if ctx.key_padding_mask is not None:
            real = ~ctx.key_padding_mask
        blocks = self.block_index(ctx, ctx.key_positions)  # (B, T)
        # nb: the most blocks of any sentence (about sqrt(I/2) each with r = ceil(sqrt(2I))),
        # so summaries, their projections and the inter-block logits are O(T·NB), not O(T²)
        nb = max(1, int(blocks.masked_fill(~real, -1).max()) + 1)
        blocks = blocks.masked_fill(~real, nb)  # padding goes to a spare block, dropped below
        # multi-dimensional source2token within each block: softmax over the block's tokens,
        # stabilised by each block's own maximum (scatter amax), O(T·d) memory; the maximum
        # cancels between numerator and denominator, so no gradient flows through it
        scores = self.s2t_score(F.elu(self.s2t_hidden(x))).float()  # (B, T, d)
        index = blocks[:, :, None].expand(bsz, t, d)
        top = scores.new_full((bsz, nb + 1, d), MASK_VALUE)
        top = top.scatter_reduce(1, index, scores.detach(), reduce="amax", include_self=True)
        e = torch.exp(scores - top.gather(1, index))
        num = x.new_zeros(bsz, nb + 1, d, dtype=torch.float32).scatter_add(1, index, e * x.float())
        den = e.new_zeros(bsz, nb + 1, d).scatter_add(1, index, e)
        summary = (num / den.clamp(min=1e-30))[:, :nb].type_as(x)  # (B, NB, d)
        has_block = den[:, :nb, 0] > 0  # (B, NB): a shorter sentence has fewer blocks
        dh = d // heads
        keys = self.block_key(summary).view(bsz, nb, heads, dh).transpose(1, 2)
        values = self.block_value(summary).view(bsz, nb, heads, dh).transpose(1, 2)
        logits = torch.matmul(ctx.q, keys.transpose(-1, -2)).float()  # q is pre-scaled
        logits = logits.masked_fill(~has_block[:, None, None, :], MASK_VALUE)
        inter = torch.matmul(torch.softmax(logits, dim=-1).type_as(values), values)
        intra = out  # (B, H, Tq, dh): step 1, intra-block attention
        merged = lambda y: y.transpose(1, 2).reshape(bsz, -1, d)  # noqa: E731
        gate = torch.sigmoid(self.gate(torch.cat([merged(intra), merged(inter)], dim=-1)))
        gate = gate.view(bsz, -1, heads, dh).transpose(1, 2)
        if ctx.recording:
            ctx.keep(BlockRecord(gate=gate))
        return gate * (inter - intra)
