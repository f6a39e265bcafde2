"""NEIGHBOR (Sperber et al. 2018, as re-implemented by Yang et al. 2019, Table 1): a Gaussian
bias centred on the query's own position, with a window predicted from the query.

Following the notation of Yang et al. 2018 (eq. 5–9), per query i and head h::

    D_ih = I · sigmoid(U_dᵀ tanh(W_d q_i))_h      (predicted window; I = real length)
    G_ij = −(j − i)² / (2σ²),  σ = D/2             (added to the scaled logits)

with a floor of 0.1 on D (the authors' localness code does the same). The paper gives only the
parameter count (+0.4M over 3 layers): a predictor with a hidden size of d/2 matches it
(3 × (d·d/2 + d/2 + H·d/2 + …) ≈ 0.40M at d = 512); ``hidden`` sets it. The bias is quadratic
in j, so it is handed back as a :class:`QuadraticBias` (kernels may fold it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from localnmt.attention.context import AttentionContext, AttentionSite, QuadraticBias
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    option,
    register_modifier,
)
from localnmt.attention.record import tensor_field

#: Floor on the predicted window D (authors' localness code).
MIN_WINDOW = 0.1


@dataclass
class NeighborRecord:
    """The predicted window of a recorded NEIGHBOR layer."""

    window: Tensor = tensor_field("bhq", "D (σ = D/2), centred on the query")


class ScalarPredictor(nn.Module):
    """``sigmoid(Uᵀ tanh(W q))``: one value in (0, 1) per query and head (Yang et al. 2018
    eq. 6/9), reading the query projection of all heads."""

    def __init__(self, embed_dim: int, hidden: int, heads: int):
        super().__init__()
        self.proj = nn.Linear(embed_dim, hidden)
        self.out = nn.Linear(hidden, heads)

    def forward(self, q: Tensor) -> Tensor:
        """``q`` (B, H, Tq, d) → (B, H, Tq) float32."""
        bsz, heads, tq, dim = q.shape
        flat = q.permute(0, 2, 1, 3).reshape(bsz, tq, heads * dim)
        z = self.out(torch.tanh(self.proj(flat)))  # (B, Tq, H)
        return torch.sigmoid(z.float()).transpose(1, 2)


def predictor_hidden(hidden: int, site: AttentionSite, method: str) -> int:
    if hidden < 0:
        raise SpecError(f"method '{method}': hidden={hidden} must be >= 1 (0 = embed_dim/2)")
    return hidden or max(1, site.embed_dim // 2)


def predictor_bytes(hidden: int, site: AttentionSite) -> int:
    """What a :class:`ScalarPredictor` of ``hidden`` units costs in training: its weights,
    their gradients and Adam's two moments, float32."""
    hidden = predictor_hidden(hidden, site, "predictor")
    return 16 * hidden * (site.embed_dim + site.num_heads + 2)


@register_modifier
class Neighbor(AttentionModifier):
    """Gaussian bias centred at the query, window predicted per query and head."""

    name = "neighbor"
    sites = ("encoder_self", "decoder_self")

    @dataclass
    class Options:
        hidden: int = option(0, "hidden size of the window predictor (0 = embed_dim/2)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        predictor_hidden(options.hidden, site, cls.name)

    @classmethod
    def memory_bytes(cls, options: Options, site: AttentionSite, pairs: int) -> int:
        return predictor_bytes(options.hidden, site)

    def __init__(self, options: Options, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        hidden = predictor_hidden(options.hidden, site, self.name)
        self.window = ScalarPredictor(site.embed_dim, hidden, site.num_heads)

    def bias(self, ctx: AttentionContext) -> QuadraticBias:
        length = ctx.key_lengths[:, None, :]  # (B, 1, Tq)
        window = (length * self.window(ctx.q)).clamp(min=MIN_WINDOW)  # D, (B, H, Tq)
        if ctx.recording:
            ctx.keep(NeighborRecord(window=window))
        inv_var = 4.0 / (window * window)  # 1/σ², σ = D/2
        centre = ctx.query_positions[:, None, :]
        # −(j−i)²/(2σ²) = −j²/(2σ²) + i·j/σ² + const
        return QuadraticBias(a=-0.5 * inv_var, b=centre * inv_var)
