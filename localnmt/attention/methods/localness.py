"""Localness: a learnable Gaussian bias on the attention logits (Yang et al. 2018).

Equations of the paper (numbers as printed)::

    ATT(Q, K) = softmax(energy + G)                                   (4)
    G_ij      = −(j − P_i)² / (2σ_i²),   σ_i = D_i / 2                (5)
    P_i^m     = I · sigmoid(p_i^m)      (option ``center``)           (6), (10)
    p_i^m     = U_p^mᵀ tanh(W_p Q_i)                                  (7)
    z^m       = U_d^mᵀ tanh(W_d K̄)       layer-specific window         (8)
    z_i^m     = U_d^mᵀ tanh(W_p Q_i)     query-specific window         (9)
    D^m       = N · sigmoid(z^m), N = 50 head-specific window          (11)
    D         = 10                       fixed window

Per head (eq. 10): ``W_p`` (and ``W_d``) read the whole d_model query (key mean) and are shared
by the heads; ``U_p`` / ``U_d`` have one column per head. This is the reading that matches the
paper's parameter counts (Table 4: +0.8M for 3 base layers = 3·(512² + 2·512·8 + …), +3.3M for
3 big layers) and the authors' THUMT code (a dense d→d tanh layer, then d→heads).

Choices the paper leaves open (defaults follow the authors' code; docs/design.md, "Localness"):

- ``center=length_minus_one``: P = (I−1)·sigmoid(p), so P spans exactly the real positions
  0..I−1 (positions are 0-based); ``center=length`` is eq. 6 as printed.
- ``d_floor=0.1``: D = max(D, 0.1), so σ never reaches 0 (also keeps an all-padding row finite).
- Q is the unscaled query projection (eq. 7 reads Q, not Q/√d).
- ``bias=true``: W_p, U_p, W_d, U_d are affine layers with bias terms (zero at initialisation);
  ``bias=false`` gives eqs. 7–9 as printed (no bias terms).
- K̄ (eq. 8) is the padding-aware mean of the keys each query may see: all real keys in
  encoder self- and cross-attention, the visible prefix in decoder self-attention (so that
  incremental decoding equals the full forward).
- I is ``ctx.key_lengths``: the real length, the visible prefix in decoder self-attention.

The bias is returned as a :class:`QuadraticBias` (a = −1/(2σ²), b = P/σ²), so kernels can fold
it into two extra q/k dimensions; P and D are recorded for the analyses
(:class:`LocalnessRecord`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from localnmt.attention.context import AttentionContext, AttentionSite, QuadraticBias
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    check_positions,
    option,
    register_modifier,
)
from localnmt.attention.record import tensor_field

WINDOWS = ("fixed", "layer", "query", "head")


@dataclass
class LocalnessRecord:
    """What a recorded localness layer predicted, per head and query."""

    center: Tensor = tensor_field("bhq", "P, eq. 6 (0-based real-token position)")
    window: Tensor = tensor_field("bhq", "D, eqs. 8/9/11 or fixed (σ = D/2)")


def _merge_heads(x: Tensor) -> Tensor:
    """``(B, H, T, d)`` → ``(B, T, H·d)``."""
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d)


def visible_key_mean(ctx: AttentionContext) -> Tensor:
    """K̄ of eq. 8 per query ``(B, Tq, C)``: mean of the real keys the query may see (the
    visible prefix in decoder self-attention), float32."""
    keys = _merge_heads(ctx.k).float()  # (B, Tk, C)
    bsz, tk, _ = keys.shape
    tq = ctx.q.size(2)
    if ctx.key_padding_mask is None:
        real = keys.new_ones(bsz, tk)
    else:
        real = (~ctx.key_padding_mask.bool()).float()
    keys = keys * real.unsqueeze(-1)
    if ctx.site.causal:
        sums = keys.cumsum(dim=1)[:, tk - tq :]
        counts = real.cumsum(dim=1)[:, tk - tq :]
    else:
        sums = keys.sum(dim=1, keepdim=True).expand(bsz, tq, -1)
        counts = real.sum(dim=1, keepdim=True).expand(bsz, tq)
    return sums / counts.clamp_min(1.0).unsqueeze(-1)


@register_modifier
class Localness(AttentionModifier):
    """Gaussian localness bias, eqs. 4–11 of Yang et al. (2018); one P and D per head."""

    name = "localness"
    sites = ("encoder_self", "decoder_self", "cross")

    @dataclass
    class Options:
        window: str = option("query", "window strategy (§3.3, eq. 11)", choices=WINDOWS)
        center: str = option(
            "length_minus_one",
            "P = (I−1)·sigmoid(p) (authors' code) or I·sigmoid(p) (eq. 6)",
            choices=("length_minus_one", "length"),
        )
        fixed_size: float = option(10.0, "D of the fixed window (§3.3: 10)")
        head_max: float = option(50.0, "N of the head-specific window (eq. 11: 50)")
        d_floor: float = option(0.1, "lower bound of D (authors' code: 0.1)")
        bias: bool = option(True, "bias terms in W_p, U_p, W_d, U_d (false: eqs. 7-9 as printed)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        if options.d_floor <= 0:
            raise SpecError("option 'd_floor' of method 'localness' must be > 0 (σ = D/2 > 0)")
        if options.fixed_size <= 0 or options.head_max <= 0:
            raise SpecError("options 'fixed_size' and 'head_max' of 'localness' must be > 0")
        check_positions(cls.name, "fixed_size", options.fixed_size, site, cls.Options.fixed_size)
        check_positions(cls.name, "head_max", options.head_max, site, cls.Options.head_max)

    def __init__(self, options: Options, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        d, h, bias = site.embed_dim, site.num_heads, options.bias
        self.w_p = nn.Linear(d, d, bias=bias)  # W_p, eqs. 7 and 9
        self.u_p = nn.Linear(d, h, bias=bias)  # U_p, one column per head (eq. 10)
        if options.window == "query":
            self.u_d = nn.Linear(d, h, bias=bias)  # U_d, eq. 9
        elif options.window == "layer":
            self.w_d = nn.Linear(d, d, bias=bias)  # W_d, eq. 8
            self.u_d = nn.Linear(d, h, bias=bias)
        elif options.window == "head":
            self.z = nn.Parameter(torch.zeros(h))  # z^m, eq. 11
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def _query(self, ctx: AttentionContext) -> Tensor:
        """Q of eq. 7, ``(B, Tq, C)``: the query projection without the 1/√d scaling."""
        return _merge_heads(ctx.q) * math.sqrt(ctx.q.size(-1))

    def predict(self, ctx: AttentionContext) -> tuple[Tensor, Tensor]:
        """Centre P and window D, each ``(B, H, Tq)`` float32 (eqs. 6–11)."""
        opts = self.options
        weight = self.w_p.weight
        hidden = torch.tanh(self.w_p(self._query(ctx).to(weight.dtype)))  # tanh(W_p Q_i)
        length = ctx.key_lengths.float().unsqueeze(1)  # (B, 1, Tq)
        scale = (length - 1.0).clamp_min(0.0) if opts.center == "length_minus_one" else length
        p = self.u_p(hidden).float().transpose(1, 2)  # (B, H, Tq)
        center = scale * torch.sigmoid(p)
        if opts.window == "fixed":
            window = torch.full_like(center, opts.fixed_size)
        elif opts.window == "query":
            z = self.u_d(hidden).float().transpose(1, 2)
            window = length * torch.sigmoid(z)
        elif opts.window == "layer":
            mean = visible_key_mean(ctx).to(self.w_d.weight.dtype)
            z = self.u_d(torch.tanh(self.w_d(mean))).float().transpose(1, 2)
            window = length * torch.sigmoid(z)
        else:  # head
            window = opts.head_max * torch.sigmoid(self.z.float())[None, :, None]
            window = window.expand_as(center)
        return center, window.clamp_min(opts.d_floor)

    def bias(self, ctx: AttentionContext) -> QuadraticBias:
        """G of eq. 5 as a·j² + b·j: a = −1/(2σ²), b = P/σ², σ = D/2."""
        center, window = self.predict(ctx)
        if ctx.recording:
            ctx.keep(LocalnessRecord(center=center, window=window))
        inv_var = 4.0 / (window * window)  # 1/σ²
        return QuadraticBias(a=-0.5 * inv_var, b=center * inv_var)
