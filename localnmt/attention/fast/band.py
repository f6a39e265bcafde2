"""Blocked banded attention: O(T·w) time and memory for windowed self-attention.

Queries are cut into blocks of ``C``; query block ``b`` meets only the keys
``b·C - L … b·C + C - 1 + R`` (``L``/``R`` = the band's left/right reach), a strided view of
the key sequence padded by ``L`` and ``R``. Logits are ``(B, H, T/C, C, C+L+R)`` instead of
``(B, H, T, T)``; a static ``(C, C+L+R)`` mask keeps the exact band. Forward and backward run
through autograd (unfold's backward is a scatter-add), so no T×T tensor is ever built.

Handles: bands (ints or per-head tensors; several intersect), key padding (left or right:
within a sentence, real-token positions differ by the same amount as indices), the causal
triangle, dropout, and stacked key groups from a ``transform`` (``G`` groups of ``Tk`` keys
sharing positions; every group gets the same band). 2D-CSAN's groups are neighbouring heads:
the kernel takes the unstacked keys (``problem.head_area``), cuts each head's window once
and reads head ``h``'s ``G`` windows (heads ``h - a … h + a``, wrapped) as consecutive rows of
an overlapping strided view, so the stacked ``G·T`` keys, deferred by the transform, are never
built. SDPA runs over ``(B·nb)`` blocks × ``H`` heads, so the mask broadcasts over heads when
the band does. Declines dense masks, biases, and problems shorter than :data:`MIN_LENGTH`
(where dense SDPA is as fast: docs/design.md, bench/).

On CPU without dropout, ``ChunkedFlashBand`` (``fast/autograd/band_windows.py``) runs
torch's fused CPU attention op directly, a few sentences at a time, saving only its output and
log-sum-exp: the windows are cut again in backward instead of being kept, and each chunk's
temporaries stay under its ``CHUNK_BYTES``. Whole-batch windows and window gradients would be
fresh pages on every call (glibc maps allocations over 32 MiB anew; ``python -m
bench.band_chunks`` times a fresh against a reused tensor).

Before any of this, :func:`band_attention` hands float32 CPU problems without dropout (1D
bands and 2D-CSAN head areas) to the C kernel of ``fast/native/c_band.py``, where it is built: no
blocks or windows there, each query visits only its own keys. The blocked paths below run
where it declines (dropout, other dtypes, GPU, stacked key groups) or is not built.

Outputs at padded queries are finite but not the reference's (both are never read: every later
attention masks padded keys); tests compare real queries and gradients.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.deferred import stored, stored_shape
from localnmt.attention.dispatch import is_forced, note
from localnmt.attention.fast.autograd.band_windows import (
    BlockWindows,
    ChunkedFlashBand,
    WindowLayout,
    chunked_flash_applies,
)
from localnmt.attention.fast.native import c_band as native_band
from localnmt.attention.problem import AttentionProblem, register_kernel

#: Query block size. 32 measured best of {16, 32, 64} on the 2-core CPU (bench/band_attention.py).
BLOCK = 32
#: Shortest key sequence the blocked kernels take when not forced (the C path of
#: native/c_band.py has none for windows up to C_WINDOW keys: with 11 it beat masked SDPA from
#: T = 8 up, ``python -m bench.band_attention``). The 1D band's
#: alternative is fused SDPA with a boolean mask: fwd+bwd band / masked SDPA = 1.23 at T = 128,
#: 0.75 at 256 (2-core CPU, B = 32, H = 8, d = 64, window 11, ``python -m bench.band_attention``).
MIN_LENGTH = 256
#: The same for stacked key groups (2D-CSAN, 3 heads × 11), whose alternative is masked SDPA
#: over all G·T keys: band / that = 1.23 at T = 64, 0.72 at 128, 0.38 at 256 (same run).
MIN_LENGTH_GROUPED = 128
#: Widest band (keys per head and group) the C kernel takes without the length rules above:
#: its cost grows with the window. ``python -m bench.band_attention`` (1D, ÷ dense SDPA, masked
#: SDPA about 1.0): window 11: 0.51 at T = 64, 0.35 at 128; window 63: 1.75 and 1.43 (2-core
#: CPU). Interpolated linearly (not measured between), they cross near 30 keys at T = 64.
C_WINDOW = 24


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
    area: int | None = None,
) -> Tensor:
    """``softmax(q·kᵀ restricted to -left ≤ j-i ≤ right, real keys) · v`` in index space.

    ``q``: ``(B, H, T, d)`` pre-scaled; ``left``/``right``: ``(H,)`` int64, finite. Keys and
    values come in one of two layouts:

    - stacked: ``k``/``v`` ``(B, H, G·T, d)``, ``G = groups`` key groups over the same ``T``
      positions;
    - head area (``area = a``, 2D-CSAN eq. 7–9): ``k``/``v`` ``(B, H, T, d)``, and group ``g``
      of head ``h`` is head ``(h + g - a) mod H``, read in place (``groups`` is ``2a + 1``).

    ``key_padding_mask``: ``(B, G·T)`` or ``(B, T)`` bool, True = padding. Returns
    ``(B, H, T, d)``.
    """
    bsz, heads, tq, dim = q.shape
    if area is not None:
        groups = 2 * area + 1
        tk = k.size(2)
    else:
        tk = k.size(2) // groups
    assert tk == tq, "band attention needs self-attention (Tq == Tk)"
    if area is not None or groups == 1:  # each query visits only its window, in C
        out = native_band.c_band_attention(q, k, v, left, right, key_padding_mask, area, dropout_p)
        if out is not None:
            note("C" + (", head area" if area else ""))
            return out
    reach_l = max(int(left.max()), 0)
    reach_r = max(int(right.max()), 0)
    nblocks = -(-tq // block)
    tpad = nblocks * block
    span = block + reach_l + reach_r
    extra = tpad - tq

    nl, nr = -(-reach_l // block), -(-reach_r // block)
    # rows of the concatenated neighbouring blocks b-nl … b+nr that form the window
    first, stop = nl * block - reach_l, nl * block + block + reach_r

    pieces = []  # (group, neighbouring block offset, first row, end row) of each window piece
    for g in range(groups):
        for o in range(nl + nr + 1):
            lo, hi = max(first, o * block), min(stop, (o + 1) * block)
            if lo < hi:
                pieces.append((g, o, lo - o * block, hi - o * block))
    layout = WindowLayout(
        groups, tk, block, nblocks, nl, nr, extra, tuple(pieces), area or 0, area is not None
    )
    # SDPA batch = (B·nb), heads = H: the mask broadcasts over heads when the band does
    qb = F.pad(q, (0, 0, 0, extra)) if extra else q
    qb = qb.unflatten(2, (nblocks, block)).transpose(1, 2)  # (B, nb, H, C, d)
    # static band: query r of a block meets window slot s at relative offset s - L - r
    rel = torch.arange(span, device=q.device)[None, :] - reach_l
    rel = rel - torch.arange(block, device=q.device)[:, None]  # (C, span)
    uniform = bool((left == left[0]).all() and (right == right[0]).all())
    lh, rh = (left[:1], right[:1]) if uniform else (left, right)
    allowed = (rel[None] >= -lh.view(-1, 1, 1)) & (rel[None] <= rh.view(-1, 1, 1))
    mheads = allowed.size(0)
    allowed = allowed.repeat(1, 1, groups).view(1, 1, mheads, block, groups * span)
    # real keys: inside the sequence and not padding
    real = torch.ones(bsz, groups, tk, dtype=torch.bool, device=q.device)
    if key_padding_mask is not None:
        real = ~key_padding_mask.view(bsz, -1, tk).expand(bsz, groups, tk)
    real = F.pad(real, (reach_l, extra + reach_r), value=False).unfold(2, span, block)
    real = real.permute(0, 2, 1, 3).reshape(bsz, nblocks, 1, 1, groups * span)
    allowed = allowed & real  # (B, nb, H or 1, C, G·span)
    nonempty = allowed.any(dim=-1, keepdim=True)  # rows with no allowed key give 0 (kernels.py)
    all_nonempty = bool(nonempty.all())
    if not all_nonempty:
        allowed = allowed | ~nonempty
    keys = groups * span
    if chunked_flash_applies(q, dropout_p):
        note("blocked, chunked fused CPU op")
        out = ChunkedFlashBand.apply(qb, k, v, allowed, layout)
    else:
        note("blocked, SDPA over blocks")
        # fused SDPA over (B·nb) independent blocks: its CPU kernels beat small batched GEMMs
        kw, vw = BlockWindows.apply(k, layout), BlockWindows.apply(v, layout)
        batch = bsz * nblocks
        out = F.scaled_dot_product_attention(
            qb.reshape(batch, heads, block, dim),
            kw.view(batch, heads, keys, dim),
            vw.view(batch, heads, keys, dim),
            attn_mask=allowed.view(batch, mheads, block, keys),
            dropout_p=dropout_p,
            scale=1.0,
        ).view(bsz, nblocks, heads, block, dim)
    if not all_nonempty:
        out = out * nonempty.to(out.dtype)
    out = out.transpose(1, 2).reshape(bsz, heads, tpad, dim)
    return out[:, :, :tq] if extra else out


def _keys(problem: AttentionProblem) -> tuple[Tensor, Tensor, int | None]:
    """``(k, v, area)``: 2D-CSAN's unstacked keys read in place (``area`` = heads wrapped on
    each side) where its head area is what the problem holds, else the problem's keys."""
    area = problem.head_area
    if (
        area is not None
        and stored(problem, "k") is area.k_stack
        and stored(problem, "v") is area.v_stack
        and problem.stacked_groups == area.groups
    ):  # neighbouring heads read in place: the stacked keys are never built
        return area.k, area.v, area.half
    return problem.k, problem.v, None


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason the band kernel cannot take ``problem``; the speed rules only for a
    problem it could compute."""
    if problem.allowed is not None:
        yield "a dense mask (only bands, padding and the causal triangle)"
    if problem.has_bias:
        yield "a bias"
    groups = problem.stacked_groups
    tq = problem.q.size(2)
    full = stored_shape(problem, "k")[2] == groups * tq
    if not full:
        yield "not full self-attention (a decoding step or cross-attention)"
    if problem.causal and groups != 1:
        yield "causal with stacked key groups"
    computable = problem.bands and problem.allowed is None and not problem.has_bias and full
    if is_forced("band") or not computable or (problem.causal and groups != 1):
        return
    k, v, _ = _keys(problem)
    reach_left, reach_right = problem.band_extent
    widest = reach_left + reach_right + 1
    # with windows of 11 keys (1D, and each of 2D's 3 heads) the C kernel beat masked SDPA at
    # every length measured (T = 8 to 1024): no length threshold for windows up to C_WINDOW
    if native_band.takes(problem.q, k, v, problem.dropout_p) and widest <= C_WINDOW:
        return
    shortest = MIN_LENGTH if groups == 1 else MIN_LENGTH_GROUPED
    if tq < shortest:
        c_kernel = _c_reason(widest)
        yield f"T = {tq} < {shortest}, where masked SDPA is as fast (C kernel: {c_kernel})"
    elif widest - 1 + BLOCK >= 2 * tq:
        yield "a band as wide as the sequence: dense is cheaper than the blocked kernels"


def _c_reason(widest: int) -> str:
    """Why the C kernel does not take the problem without the length rules."""
    if not native_band.ENABLED:
        return "localnmt._band not built"
    if widest > C_WINDOW:
        return f"window of {widest} keys > {C_WINDOW}"
    return "needs float32 on the CPU without dropout"


def requires(problem: AttentionProblem) -> str | None:
    return None if problem.bands else "no window (band) restricts the keys"


@register_kernel("band", check=check, requires=requires)
def band_kernel(problem: AttentionProblem) -> Tensor:
    """Band attention for window restrictions: in C where it runs, else in blocks."""
    k, v, area = _keys(problem)
    tq = problem.q.size(2)
    left, right = problem.band_reach
    if max(problem.band_extent) >= tq:
        left, right = left.clamp(max=tq), right.clamp(max=tq)
    return band_attention(
        problem.q,
        k,
        v,
        left,
        right,
        key_padding_mask=problem.key_padding_mask,
        groups=problem.stacked_groups,
        dropout_p=problem.dropout_p,
        area=area,
    )
