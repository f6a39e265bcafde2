"""BI_DIRECT: DiSAN's directional masks (Shen et al. 2018a, eq. 15–16) on multi-head attention.

The forward mask lets a token attend to earlier tokens, the backward mask to later ones. As in
Yang et al. 2019 (Table 1, "+0.0M"), the two directions share one attention layer: the first
half of the heads (1 … H/2) are forward, the others backward (DiSAN computes the two directions
separately and concatenates them; splitting heads is the multi-head equivalent).

Choice: each token also attends to itself (DiSAN's masks exclude the diagonal, but DiSAN fuses
the result with the token through a gate; without it the first/last token would have an empty
window). Positions count from the first real token (BandMask), so padding side does not matter.
"""

from __future__ import annotations

import torch

from localnmt.attention.context import AttentionContext, BandMask
from localnmt.attention.modifier import AttentionModifier, register_modifier

UNLIMITED = 1 << 30


@register_modifier
class BiDirect(AttentionModifier):
    """Forward mask (keys j ≤ i) on heads 1…H/2, backward mask (j ≥ i) on the others."""

    name = "bi_direct"
    sites = ("encoder_self",)

    def restrict(self, ctx: AttentionContext) -> BandMask:
        heads = ctx.num_heads
        forward = torch.arange(heads, device=ctx.q.device) < heads // 2
        zero = torch.zeros(heads, dtype=torch.long, device=ctx.q.device)
        unlimited = torch.full_like(zero, UNLIMITED)
        return BandMask(
            left=torch.where(forward, unlimited, zero), right=torch.where(forward, zero, unlimited)
        )
