"""Blocked banded attention: O(T·w) time and memory for windowed self-attention.

Queries are cut into blocks of ``C``; query block ``b`` meets only the keys
``b·C - L … b·C + C - 1 + R`` (``L``/``R`` = the band's left/right reach), a strided view of
the key sequence padded by ``L`` and ``R``. Logits are ``(B, H, T/C, C, C+L+R)`` instead of
``(B, H, T, T)``; a static ``(C, C+L+R)`` mask keeps the exact band. Forward and backward run
through autograd (unfold's backward is a scatter-add), so no T×T tensor is ever built.

Handles: bands (ints or per-head tensors; several intersect), key padding (left or right:
within a sentence, real-token positions differ by the same amount as indices), the causal
triangle, dropout, and stacked key groups from a ``transform`` (2D-CSAN: ``G`` groups of ``Tk``
keys sharing positions; every group gets the same band). Declines dense masks, biases, and
problems shorter than :data:`MIN_LENGTH` (where dense SDPA is as fast: docs/design.md, bench/).

Outputs at padded queries are finite but not the reference's (both are never read: every later
attention masks padded keys); tests compare real queries and gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention import kernels
from localnmt.attention.kernels import AttentionProblem, register_kernel

#: Query block size. 32 measured best of {16, 32, 64} on the 2-core CPU (bench/band_attention.py).
BLOCK = 32
#: Shortest key sequence the kernel takes when not forced (bench/band_attention.py: below it,
#: fused dense SDPA with a boolean mask is as fast or faster on CPU).
MIN_LENGTH = 256
#: The same for stacked key groups (2D-CSAN), whose alternative is masked SDPA over all G·T
#: keys: fwd+bwd 0.74× its time at T = 256, 0.50× at 512, 1.18× at 128 (2-core CPU, B=32, H=8,
#: d=64, 3 heads × 11).
MIN_LENGTH_GROUPED = 256
#: ``ctx.extras`` key set by transforms that stack key groups (see methods/csan.py).
KEY_GROUPS = "key_groups"


def _band_reach(problem: AttentionProblem, heads: int) -> tuple[Tensor, Tensor] | None:
    """Per-head (left, right) reach, int64 ``(H,)``: the intersection of all bands."""
    device = problem.q.device
    left = torch.full((heads,), 1 << 30, dtype=torch.long, device=device)
    right = left.clone()
    for band in problem.bands:
        band_left = torch.as_tensor(band.left, device=device).long().expand(heads)
        band_right = torch.as_tensor(band.right, device=device).long().expand(heads)
        left = torch.minimum(left, band_left)
        right = torch.minimum(right, band_right)
    if problem.causal:
        right = right.clamp(max=0)
    return left, right


def band_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    left: Tensor,
    right: Tensor,
    key_padding_mask: Tensor | None = None,
    groups: int = 1,
    dropout_p: float = 0.0,
    block: int = BLOCK,
) -> Tensor:
    """``softmax(q·kᵀ restricted to -left ≤ j-i ≤ right, real keys) · v`` in index space.

    ``q``: ``(B, H, T, d)`` pre-scaled; ``k``/``v``: ``(B, H, G·T, d)`` (``G = groups`` stacked
    key groups over the same ``T`` positions); ``left``/``right``: ``(H,)`` int64, finite;
    ``key_padding_mask``: ``(B, G·T)`` bool, True = padding. Returns ``(B, H, T, d)``.
    """
    bsz, heads, tq, dim = q.shape
    tk = k.size(2) // groups
    assert tk == tq, "band attention needs self-attention (Tq == Tk)"
    reach_l = max(int(left.max()), 0)
    reach_r = max(int(right.max()), 0)
    nblocks = -(-tq // block)
    tpad = nblocks * block
    span = block + reach_l + reach_r
    extra = tpad - tq

    qb = F.pad(q, (0, 0, 0, extra)).view(bsz, heads, nblocks, block, dim)

    nl, nr = -(-reach_l // block), -(-reach_r // block)
    # rows of the concatenated neighbouring blocks b-nl … b+nr that form the window
    first, stop = nl * block - reach_l, nl * block + block + reach_r

    pieces = []  # (group, neighbouring block offset, first row, end row) of each window piece
    for g in range(groups):
        for o in range(nl + nr + 1):
            lo, hi = max(first, o * block), min(stop, (o + 1) * block)
            if lo < hi:
                pieces.append((g, o, lo - o * block, hi - o * block))
    layout = _WindowLayout(groups, tk, block, nblocks, nl, nr, extra, tuple(pieces))
    kw, vw = _BlockWindows.apply(k, layout), _BlockWindows.apply(v, layout)
    # static band: query r of a block meets window slot s at relative offset s - L - r
    rel = torch.arange(span, device=q.device)[None, :] - reach_l
    rel = rel - torch.arange(block, device=q.device)[:, None]  # (C, span)
    allowed = (rel[None] >= -left.view(-1, 1, 1)) & (rel[None] <= right.view(-1, 1, 1))
    allowed = allowed.repeat(1, 1, groups).view(1, heads, 1, block, groups * span)
    # real keys: inside the sequence and not padding
    real = torch.ones(bsz, groups, tk, dtype=torch.bool, device=q.device)
    if key_padding_mask is not None:
        real = ~key_padding_mask.view(bsz, groups, tk)
    real = F.pad(real, (reach_l, extra + reach_r), value=False).unfold(2, span, block)
    real = real.permute(0, 2, 1, 3).reshape(bsz, 1, nblocks, 1, groups * span)
    allowed = allowed & real
    nonempty = allowed.any(dim=-1, keepdim=True)  # rows with no allowed key give 0 (kernels.py)
    allowed = allowed | ~nonempty
    # fused SDPA over (B·H·nb) independent blocks: its CPU kernels beat small batched GEMMs
    batch = bsz * heads * nblocks
    out = F.scaled_dot_product_attention(
        qb.reshape(batch, 1, block, dim),
        kw.reshape(batch, 1, groups * span, dim),
        vw.reshape(batch, 1, groups * span, dim),
        attn_mask=allowed.expand(bsz, heads, nblocks, block, groups * span).reshape(
            batch, 1, block, groups * span
        ),
        dropout_p=dropout_p,
        scale=1.0,
    )
    out = out.view(bsz, heads, nblocks, block, dim) * nonempty.to(out.dtype)
    return out.view(bsz, heads, tpad, dim)[:, :, :tq]


@dataclass(frozen=True)
class _WindowLayout:
    """How :class:`_BlockWindows` cuts ``G`` groups of ``T`` keys into per-block windows."""

    groups: int
    length: int  # T
    block: int
    nblocks: int
    before: int  # nl: padding blocks before the sequence
    after: int  # nr: padding blocks after it (plus ``extra`` rows)
    extra: int
    pieces: tuple[tuple[int, int, int, int], ...]

    def padded(self, x: Tensor) -> Tensor:
        """(B, H, G·T, d) → (B, H, G, nb + nl + nr, C, d), zero-padded."""
        bsz, heads, _, dim = x.shape
        x = F.pad(
            x.view(bsz, heads, self.groups, self.length, dim),
            (0, 0, self.before * self.block, self.extra + self.after * self.block),
        )
        return x.view(bsz, heads, self.groups, -1, self.block, dim)


class _BlockWindows(torch.autograd.Function):
    """(B, H, G·T, d) → (B, H, nb, G·span, d): each query block's key window per group, cut
    from neighbouring blocks. Its backward adds the window gradients into one zero tensor
    (autograd's pad / select / slice backwards would allocate a zero tensor per piece: half
    of the layer's time at T = 512 on CPU)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, layout: _WindowLayout) -> Tensor:
        ctx.layout, ctx.shape = layout, x.shape
        xp, nb = layout.padded(x), layout.nblocks
        return torch.cat([xp[:, :, g, o : o + nb, a:b] for g, o, a, b in layout.pieces], dim=-2)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        layout, nb = ctx.layout, ctx.layout.nblocks
        bsz, heads, _, dim = ctx.shape
        gxp = grad.new_zeros(bsz, heads, layout.groups, nb + layout.before + layout.after,
                             layout.block, dim)  # fmt: skip
        start = 0
        for g, o, a, b in layout.pieces:
            gxp[:, :, g, o : o + nb, a:b] += grad[..., start : start + b - a, :]
            start += b - a
        gxp = gxp.view(bsz, heads, layout.groups, -1, dim)
        gx = gxp[:, :, :, layout.before * layout.block :][:, :, :, : layout.length]
        return gx.reshape(ctx.shape), None


@register_kernel("band", priority=20)
def band_kernel(problem: AttentionProblem) -> Tensor | None:
    """Blocked band attention for window restrictions; None when it cannot or should not."""
    if not problem.bands or problem.allowed is not None or problem.has_bias:
        return None
    groups = int(problem.ctx.extras.get(KEY_GROUPS, 1))
    bsz, heads, tq, _ = problem.q.shape
    if problem.k.size(2) != groups * tq:
        return None  # not full self-attention (incremental decoding, cross-attention)
    if problem.causal and groups != 1:
        return None
    forced = kernels.FORCE_KERNEL == "band"
    if tq < (MIN_LENGTH if groups == 1 else MIN_LENGTH_GROUPED) and not forced:
        return None
    left, right = _band_reach(problem, heads)
    if int(left.max()) + int(right.max()) + BLOCK >= 2 * tq and not forced:
        return None  # band as wide as the sequence: dense is cheaper
    if int(left.max()) >= tq or int(right.max()) >= tq:
        left, right = left.clamp(max=tq), right.clamp(max=tq)
    return band_attention(
        problem.q,
        problem.k,
        problem.v,
        left,
        right,
        key_padding_mask=problem.key_padding_mask,
        groups=groups,
        dropout_p=problem.dropout_p,
    )
