"""Convolutional self-attention (Yang et al. 2019, NAACL; "CSAN"): 1D and 2D windows.

1D-CSAN (eq. 4–6): the query at position i of head h attends only to the ``M+1`` keys
``i-M/2 … i+M/2`` of its own head. Positions count from each sentence's first real token, so
left and right padding give the same windows. At sentence edges the window is truncated:
keys outside the sentence are masked like padding. (The short version says "0 is padded when
the index out of range"; a padded slot that took part in the softmax with a zero key would
get logit 0, i.e. a learnable-free attention sink, which eq. 4–6 do not describe, and which
SAN padding never does. We read it as ordinary masked padding.)

2D-CSAN (eq. 7–9): the query of head h attends to the ``M+1``-key windows of heads
``h-N/2 … h+N/2`` with one softmax over all ``(N+1)(M+1)`` candidates. ``transform`` stacks the
neighbouring heads' keys and values as ``(B, H, (N+1)·Tk, d)`` (group ``g`` = head offset
``g - N/2``) and ``restrict`` returns the same band over every group. The stack is deferred
(localnmt/attention/deferred.py): the band kernel reads the neighbouring heads of the unstacked
keys in place (``ctx.head_area``, handed to the kernels with the problem; fast/band.py) and
never builds it; other kernels
build it on first read as a strided view of one head-padded copy (heads wrapped,
``(B, H + N, T, d)``), not ``N+1`` copies.

Edge heads: wrap-around (circular over heads) for keys AND values. The authors' code wraps
keys but replicates values at the edges, so the value paired with a key is not that key's
value; we keep key/value pairs consistent. We prefer wrap-around to truncation because every
head then sees the same number of candidates (a circular convolution over heads), and with
``N+1 = H`` each head sees every head exactly once.

Parameter-free: neither variant adds parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from localnmt.attention.context import AttentionContext, AttentionSite, BandMask
from localnmt.attention.head_area import HeadArea, area_view, deferred_area_view
from localnmt.attention.modifier import AttentionModifier, SpecError, option, register_modifier


def _check_window(name: str, window: int, site: AttentionSite) -> None:
    if window < 1 or window % 2 == 0:
        raise SpecError(
            f"method '{name}': window={window} must be an odd number >= 1 "
            "(M+1 keys centred on the query, e.g. window=11)"
        )
    if window > site.max_positions:
        raise SpecError(
            f"method '{name}': window={window} exceeds the {site.max_positions} "
            f"max positions of {site.kind} attention"
        )


@register_modifier
class Csan1D(AttentionModifier):
    """1D-CSAN (eq. 4–6): a window of ``window`` keys centred on the query's own position."""

    name = "csan_1d"
    sites = ("encoder_self", "decoder_self")

    @dataclass
    class Options:
        window: int = option(11, "M+1: keys in the window, centred on the query (odd)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        _check_window(cls.name, options.window, site)

    def restrict(self, ctx: AttentionContext) -> BandMask:
        half = self.options.window // 2
        return BandMask(left=half, right=half)


@register_modifier
class Csan2D(AttentionModifier):
    """2D-CSAN (eq. 7–9): windows of ``area_heads`` neighbouring heads, one softmax.

    Head selection (``heads=``): unselected heads keep their own keys in every group (the same
    key set repeated ``N+1`` times, which leaves softmax·V unchanged) and get no window.
    """

    name = "csan_2d"
    sites = ("encoder_self",)

    @dataclass
    class Options:
        window: int = option(11, "M+1: keys per head in the area, centred on the query (odd)")
        area_heads: int = option(3, "N+1: heads in the area, centred on the query's head (odd)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        _check_window(cls.name, options.window, site)
        n = options.area_heads
        if n < 1 or n % 2 == 0:
            raise SpecError(
                f"method '{cls.name}': area_heads={n} must be an odd number >= 1 "
                "(N+1 heads centred on the query's head, e.g. area_heads=3)"
            )
        if n > site.num_heads:
            raise SpecError(
                f"method '{cls.name}': area_heads={n} exceeds the {site.num_heads} heads "
                f"of {site.kind} attention (valid: odd, 1-{site.num_heads})"
            )

    def head_index(self, num_heads: int, device: torch.device) -> torch.Tensor:
        """``(H, N+1)``: the source head of each key group of each head (wrap-around)."""
        half = self.options.area_heads // 2
        heads = torch.arange(num_heads, device=device)
        offsets = torch.arange(-half, half + 1, device=device)
        index = (heads[:, None] + offsets[None, :]) % num_heads
        if self.head_selection is not None:
            own = heads[:, None].expand_as(index)
            index = torch.where(self.head_selection.to(device)[:, None], index, own)
        return index

    def transform(self, ctx: AttentionContext) -> None:
        groups = self.options.area_heads
        if self.head_selection is None and ctx.stacked_groups == 1:
            k, v = ctx.k, ctx.v
            k_stack, v_stack = deferred_area_view(k, groups), deferred_area_view(v, groups)
            ctx.k, ctx.v = k_stack, v_stack
            ctx.head_area = HeadArea(groups // 2, k, v, k_stack, v_stack)
        else:
            ctx.k = expand_heads(ctx.k, groups, self.head_selection)
            ctx.v = expand_heads(ctx.v, groups, self.head_selection)
        if ctx.key_padding_mask is not None:
            ctx.key_padding_mask = ctx.key_padding_mask.repeat(1, groups)
        ctx.key_positions = ctx.key_positions.repeat(1, groups)
        ctx.stacked_groups *= groups

    def restrict(self, ctx: AttentionContext) -> BandMask:
        half = self.options.window // 2
        return BandMask(left=half, right=half)


def expand_heads(
    x: torch.Tensor, groups: int, selection: torch.Tensor | None = None
) -> torch.Tensor:
    """Eq. 7–8 layout: ``(B, H, T, d)`` → ``(B, H, G·T, d)``, group ``g`` of head ``h`` = head
    ``(h + g - G//2) mod H`` (wrap-around). Rolls, not an index gather: the backward of a roll is
    a roll, the backward of a gather a slow scatter-add. Unselected heads keep their own keys.
    Without a selection this is :func:`area_view` (one layout, built in one place)."""
    if selection is None:
        return area_view(x, groups)
    half = groups // 2
    parts = [torch.roll(x, shifts=-offset, dims=1) for offset in range(-half, half + 1)]
    keep = selection.to(x.device).view(1, -1, 1, 1)
    parts = [torch.where(keep, part, x) for part in parts]
    bsz, heads, t, dim = x.shape
    return torch.stack(parts, dim=2).reshape(bsz, heads, groups * t, dim)
