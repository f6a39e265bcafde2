"""LOCAL_HARD (Luong et al. 2015, local-p, as re-implemented by Yang et al. 2019, Table 1):
a predicted centre and a fixed hard window around it.

Per query i and head h (Luong eq. 9–10, in the notation of Yang et al. 2018)::

    P_ih = (I − 1) · sigmoid(U_pᵀ tanh(W_p q_i))_h    (predicted centre, I = real length)
    keys allowed:  |j − P_ih| ≤ D                      (hard window, D = ``half_window``)
    G_ij = −(j − P_ih)² / (2σ²),  σ = D/2              (Gaussian, added to the scaled logits)

Luong multiplies the window softmax by the Gaussian; in log space that is the bias above plus
the hard window, renormalised (as Yang et al. 2018 re-state it). D = 10 is Luong's choice.
Predictor hidden size d/2 matches the +0.4M the paper lists for 3 layers. The window is
centred on a real-valued P, so it is a dense mask (not a band around the query).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from localnmt.attention.context import (
    AttentionContext,
    AttentionSite,
    CacheKey,
    QuadraticBias,
)
from localnmt.attention.methods.neighbor import ScalarPredictor, predictor_bytes, predictor_hidden
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    check_positions,
    option,
    register_modifier,
)
from localnmt.attention.record import tensor_field


@dataclass
class LocalHardRecord:
    """The predicted centre of a recorded LOCAL_HARD layer."""

    centre: Tensor = tensor_field("bhq", "P = (I−1)·sigmoid(·), the window's middle")


@register_modifier
class LocalHard(AttentionModifier):
    """Predicted centre P, hard window |j − P| ≤ D and Gaussian bias with σ = D/2."""

    name = "local_hard"
    sites = ("encoder_self", "decoder_self")

    @dataclass
    class Options:
        half_window: float = option(10.0, "D: keys within D of the predicted centre (Luong: 10)")
        hidden: int = option(0, "hidden size of the centre predictor (0 = embed_dim/2)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        if options.half_window < 0.5:
            raise SpecError(
                f"method '{cls.name}': half_window={options.half_window} must be >= 0.5 "
                "(so that some key lies within it)"
            )
        check_positions(cls.name, "half_window", options.half_window, site, cls.Options.half_window)
        predictor_hidden(options.hidden, site, cls.name)

    @classmethod
    def memory_bytes(cls, options: Options, site: AttentionSite, pairs: int) -> int:
        return predictor_bytes(options.hidden, site)

    def __init__(self, options: Options, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        hidden = predictor_hidden(options.hidden, site, self.name)
        self.centre = ScalarPredictor(site.embed_dim, hidden, site.num_heads)

    def _centre(self, ctx: AttentionContext) -> Tensor:
        """P of this call, computed once (the bias and the window share it)."""

        def build() -> Tensor:
            length = ctx.key_lengths[:, None, :]
            centre = (length - 1.0) * self.centre(ctx.q)  # (B, H, Tq)
            if ctx.recording:
                ctx.keep(LocalHardRecord(centre=centre))
            return centre

        key: CacheKey[Tensor] = CacheKey("local_hard centre", self)
        return ctx.cache.get(key, build)

    def bias(self, ctx: AttentionContext) -> QuadraticBias:
        centre = self._centre(ctx)
        inv_var = torch.full_like(centre, 4.0 / self.options.half_window**2)
        return QuadraticBias(a=-0.5 * inv_var, b=centre * inv_var)

    def restrict(self, ctx: AttentionContext) -> Tensor:
        centre = self._centre(ctx).detach()
        j = ctx.key_positions[:, None, None, :]
        return (j - centre.unsqueeze(-1)).abs() <= self.options.half_window
