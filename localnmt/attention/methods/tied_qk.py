"""Heads that share Wq and Wk inside a layer (Pande et al. 2021, §4.2, configs g–j).

Sharing ``Wq_h, Wk_h`` among heads means they share one attention map ``α_h`` (eq. 4) and
differ only by their mask (eq. 9) and their values ``Wv_h``. ``tied_qk[groups=G]`` splits the
H heads into G consecutive groups of H/G heads: ``setup`` replaces ``q_proj`` and ``k_proj`` by
projections to ``G·d`` (d = head dim), stored once, and ``transform`` broadcasts group g to its
heads. ``Wv`` and ``Wo`` stay per head.

    groups=4   heads (1,2) (3,4) (5,6) (7,8) share: config g
    groups=2   heads 1-4 and 5-8 share: config h
    groups=1   all heads share one map: configs i, j
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from localnmt.attention.context import AttentionContext, AttentionSite
from localnmt.attention.modifier import AttentionModifier, SpecError, option, register_modifier


@dataclass
class TiedOptions:
    groups: int = option(1, "number of distinct (Wq, Wk) per layer; consecutive heads share")


@register_modifier
class TiedQK(AttentionModifier):
    """Heads of a group use one query/key projection of width ``head_dim`` (§4.2)."""

    name = "tied_qk"
    Options = TiedOptions
    sites = ("encoder_self", "decoder_self", "cross")

    @classmethod
    def validate(cls, options: TiedOptions, site: AttentionSite) -> None:
        super().validate(options, site)
        if options.groups < 1 or site.num_heads % options.groups:
            valid = [str(g) for g in range(1, site.num_heads + 1) if site.num_heads % g == 0]
            raise SpecError(
                f"tied_qk: groups={options.groups} must divide the {site.num_heads} heads "
                f"(valid: {', '.join(valid)})"
            )

    @classmethod
    def validate_heads(
        cls, options: TiedOptions, site: AttentionSite, heads: list[int] | None
    ) -> None:
        if heads is not None:
            raise SpecError("tied_qk takes no heads= option (it ties consecutive groups of heads)")

    def __init__(self, options: TiedOptions, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        self.groups = options.groups
        index = torch.arange(site.num_heads) // (site.num_heads // options.groups)
        self.register_buffer("group_of_head", index, persistent=False)

    def setup(self, attention: nn.Module) -> None:
        """Replace q_proj / k_proj by ``G·d``-wide projections (fairseq's initialisation)."""
        width = self.groups * attention.head_dim
        for name in ("q_proj", "k_proj"):
            old = getattr(attention, name)
            new = nn.Linear(old.in_features, width, bias=old.bias is not None)
            gain = 1 / math.sqrt(2) if attention.qkv_same_dim else 1.0
            nn.init.xavier_uniform_(new.weight, gain=gain)
            if new.bias is not None:
                nn.init.zeros_(new.bias)
            new.to(device=old.weight.device, dtype=old.weight.dtype)
            setattr(attention, name, new)

    def transform(self, ctx: AttentionContext) -> None:
        """``(B, G, T, d)`` → ``(B, H, T, d)``: each head reads its group's q and k."""
        index = self.group_of_head.to(ctx.q.device)
        if ctx.q.size(1) == self.groups:
            ctx.q = ctx.q.index_select(1, index)
        if ctx.k.size(1) == self.groups:
            ctx.k = ctx.k.index_select(1, index)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
