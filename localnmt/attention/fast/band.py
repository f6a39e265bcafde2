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

On CPU without dropout, :class:`_ChunkedFlashBand` runs torch's fused CPU attention op
directly, a few sentences at a time, saving only its output and log-sum-exp: the windows are
cut again in backward instead of being kept, and each chunk's temporaries stay under
:data:`CHUNK_BYTES`. Whole-batch windows and window gradients would be fresh pages on every
call (glibc maps allocations over 32 MiB anew; ``python -m bench.band_chunks`` times a fresh
against a reused tensor).

Before any of this, :func:`band_attention` hands float32 CPU problems without dropout (1D
bands and 2D-CSAN head areas) to the C kernel of ``fast/native/band.py``, where it is built: no
blocks or windows there, each query visits only its own keys. The blocked paths below run
where it declines (dropout, other dtypes, GPU, stacked key groups) or is not built.

Outputs at padded queries are finite but not the reference's (both are never read: every later
attention masks padded keys); tests compare real queries and gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.deferred import stored, stored_shape
from localnmt.attention.dispatch import is_forced, note
from localnmt.attention.fast.native import band as native_band
from localnmt.attention.kernels import AttentionProblem, register_kernel

#: Query block size. 32 measured best of {16, 32, 64} on the 2-core CPU (bench/band_attention.py).
BLOCK = 32
#: Shortest key sequence the blocked kernels take when not forced (the C path of native/band.py has
#: none for windows up to C_WINDOW keys: with 11 it beat masked SDPA from T = 8 up,
#: ``python -m bench.band_attention``). The 1D band's
#: alternative is fused SDPA with a boolean mask: fwd+bwd band / masked SDPA = 1.23 at T = 128,
#: 0.75 at 256 (2-core CPU, B = 32, H = 8, d = 64, window 11, ``python -m bench.band_attention``).
MIN_LENGTH = 256
#: The same for stacked key groups (2D-CSAN, 3 heads × 11), whose alternative is masked SDPA
#: over all G·T keys: band / that = 1.23 at T = 64, 0.72 at 128, 0.38 at 256 (same run).
MIN_LENGTH_GROUPED = 128
#: Bytes of one chunk's key windows and query blocks on the CPU path (:class:`_ChunkedFlashBand`),
#: below glibc's 32 MiB ceiling for reusing freed memory. ``python -m bench.band_chunks`` at
#: T = 512, B = 32 (2-core CPU): band 1D ÷ dense 0.37 / 0.39 / 0.44 / 0.49 at 8 / 16 / 32 / 48
#: MiB, band 2D 0.80 / 0.77 / 0.78 / 0.88, 2D-CSAN layer peak 316 / 367 / 443 / 519 MiB
#: (plain layer 322).
CHUNK_BYTES = 16 << 20
#: Widest band (keys per head and group) the C kernel takes without the length rules above:
#: its cost grows with the window. ``python -m bench.band_attention`` (1D, ÷ dense SDPA, masked
#: SDPA about 1.0): window 11: 0.51 at T = 64, 0.35 at 128; window 63: 1.75 and 1.43 (2-core
#: CPU). Interpolated linearly (not measured between), they cross near 30 keys at T = 64.
C_WINDOW = 24


def _flash_cpu_ops() -> tuple[Any, Any]:
    """torch's fused CPU attention op with its log-sum-exp (what F.scaled_dot_product_attention
    runs on CPU) and its backward, or ``(None, None)`` where this torch lacks them or their
    ``attn_mask`` argument (older releases): the kernel then keeps the SDPA path."""
    try:
        ops = (
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
        )
    except (AttributeError, RuntimeError):
        return None, None
    if all(any(a.name == "attn_mask" for a in op._schema.arguments) for op in ops):
        return ops
    return None, None


_FLASH_CPU, _FLASH_CPU_BACKWARD = _flash_cpu_ops()
_FLASH_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


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
    layout = _WindowLayout(
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
    if _chunked_flash_applies(q, dropout_p):
        note("blocked, chunked fused CPU op")
        out = _ChunkedFlashBand.apply(qb, k, v, allowed, layout)
    else:
        note("blocked, SDPA over blocks")
        # fused SDPA over (B·nb) independent blocks: its CPU kernels beat small batched GEMMs
        kw, vw = _BlockWindows.apply(k, layout), _BlockWindows.apply(v, layout)
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
    area: int = 0  # a: heads wrapped on each side (head-area layout)
    head_area: bool = False  # keys (B, H, T, d), group g = head h + g - a (mod H)

    def padded(self, x: Tensor) -> Tensor:
        """Stacked (B, H, G·T, d) → (B, H, G, nbt, C, d), or head area (B, H, T, d) →
        (B, H + 2a, nbt, C, d) with heads wrapped around; zero-padded in time."""
        bsz, heads, _, dim = x.shape
        lead, tail = self.before * self.block, self.extra + self.after * self.block
        if not self.head_area:
            x = F.pad(x.view(bsz, heads, self.groups, self.length, dim), (0, 0, lead, tail))
            return x.view(bsz, heads, self.groups, -1, self.block, dim)
        a = self.area
        xp = x.new_empty(bsz, heads + 2 * a, lead + self.length + tail, dim)
        xp[:, :, :lead].zero_()
        xp[:, :, lead + self.length :].zero_()
        inner = xp[:, :, lead : lead + self.length]
        inner[:, a : a + heads] = x
        if a:
            inner[:, :a] = x[:, heads - a :]
            inner[:, a + heads :] = x[:, :a]
        return xp.view(bsz, heads + 2 * a, -1, self.block, dim)

    def padded_shape(self, shape: torch.Size) -> tuple[int, ...]:
        """The shape :meth:`padded` returns for an input of ``shape``."""
        bsz, heads, _, dim = shape
        nbt = self.nblocks + self.before + self.after
        if self.head_area:
            return (bsz, heads + 2 * self.area, nbt, self.block, dim)
        return (bsz, heads, self.groups, nbt, self.block, dim)

    def piece(self, xp: Tensor, heads: int, g: int, o: int, lo: int, hi: int) -> Tensor:
        """``(B, nb, H, hi - lo, d)`` view: rows lo…hi of block b + o - nl of group g."""
        nb = self.nblocks
        if self.head_area:
            part = xp[:, g : g + heads, o : o + nb, lo:hi]
        else:
            part = xp[:, :, g, o : o + nb, lo:hi]
        return part.transpose(1, 2)

    def fold(self, gxp: Tensor, heads: int) -> Tensor:
        """Adjoint of :meth:`padded`: the gradient of the input from that of the padded keys."""
        bsz, dim = gxp.size(0), gxp.size(-1)
        lead = self.before * self.block
        if not self.head_area:
            gxp = gxp.view(bsz, heads, self.groups, -1, dim)[:, :, :, lead : lead + self.length]
            return gxp.reshape(bsz, heads, self.groups * self.length, dim)
        a = self.area
        inner = gxp.view(bsz, heads + 2 * a, -1, dim)[:, :, lead : lead + self.length]
        if a:  # in place: the wrapped copies' rows are disjoint from the heads they came from
            inner[:, heads : heads + a] += inner[:, :a]
            inner[:, a : 2 * a] += inner[:, a + heads :]
        return inner[:, a : a + heads]


def cut_windows(x: Tensor, layout: _WindowLayout) -> Tensor:
    """Keys → (B, nb, H, G·span, d): each query block's key window per group, cut from
    neighbouring blocks. In the head-area layout each head's window is cut once and the
    ``G`` neighbouring heads' windows are read through an overlapping strided view (no copy
    per group)."""
    xp, heads = layout.padded(x), x.size(1)
    if not layout.head_area:
        return torch.cat([layout.piece(xp, heads, *p) for p in layout.pieces], dim=-2)
    # one window per padded head (B, nb, H + 2a, span, d); head h's G groups are the
    # windows of padded heads h … h + G - 1, consecutive rows: an overlapping view
    wide = heads + 2 * layout.area
    windows = torch.cat(
        [layout.piece(xp, wide, 0, o, lo, hi) for g, o, lo, hi in layout.pieces if g == 0],
        dim=-2,
    )
    bsz, nb, _, span, dim = windows.shape
    return windows.as_strided(
        (bsz, nb, heads, layout.groups * span, dim),
        (windows.stride(0), windows.stride(1), span * dim, dim, 1),
    )


def fold_windows(grad: Tensor, layout: _WindowLayout, shape: torch.Size) -> Tensor:
    """Adjoint of :func:`cut_windows`: the window gradients added into one zero tensor of the
    keys' ``shape`` (autograd's pad / select / slice backwards would allocate a zero tensor per
    piece: half of the layer's time at T = 512 on CPU)."""
    heads = shape[1]
    gxp = grad.new_zeros(layout.padded_shape(shape))
    start = 0
    for g, o, a, b in layout.pieces:
        layout.piece(gxp, heads, g, o, a, b).add_(grad[..., start : start + b - a, :])
        start += b - a
    return layout.fold(gxp, heads)


class _BlockWindows(torch.autograd.Function):
    """:func:`cut_windows` with :func:`fold_windows` as its backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, layout: _WindowLayout) -> Tensor:
        ctx.layout, ctx.shape = layout, x.shape
        return cut_windows(x, layout)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return fold_windows(grad, ctx.layout, ctx.shape), None


def _chunked_flash_applies(q: Tensor, dropout_p: float) -> bool:
    """Whether :class:`_ChunkedFlashBand` can run: CPU, no dropout (torch's fused CPU op has
    none), a dtype the op takes."""
    return (
        _FLASH_CPU is not None
        and q.device.type == "cpu"
        and dropout_p == 0.0
        and q.dtype in _FLASH_DTYPES
    )


def _chunk_size(layout: _WindowLayout, heads: int, keys: int, dim: int, itemsize: int) -> int:
    """Sentences per chunk: the key windows ``(nb, H, keys, d)`` and query blocks
    ``(nb, H, C, d)`` of a chunk fit :data:`CHUNK_BYTES` (each of the chunk's temporaries,
    windows, window gradients, query copies, is at most that size)."""
    per_sentence = layout.nblocks * heads * (keys + layout.block) * dim * itemsize
    return max(1, CHUNK_BYTES // per_sentence)


class _ChunkedFlashBand(torch.autograd.Function):
    """Blocked band attention on CPU, a chunk of sentences at a time, with torch's fused CPU
    attention op (the one ``F.scaled_dot_product_attention`` runs) called directly so that
    only its output and log-sum-exp are saved. Backward cuts each chunk's windows again
    and folds their gradients (:func:`fold_windows`). The same op as the SDPA path, so the
    same numbers (tests/attention/test_band.py compares the two paths).

    ``qb``: ``(B, nb, H, C, d)`` query blocks; ``k``/``v`` as :func:`band_attention` takes
    them; ``allowed``: ``(B, nb, H or 1, C, G·span)`` bool with no empty row. Returns
    ``(B, nb, H, C, d)``, stored time-major (``(nb·C, B, H, d)`` memory) so that the
    pipeline's ``(T, B, H·d)`` output is a view, not another copy.
    """

    @staticmethod
    def chunk_inputs(
        qb: Tensor, k: Tensor, v: Tensor, allowed: Tensor, layout: _WindowLayout, rows: slice
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """One chunk's query blocks, key and value windows and additive mask as the op takes
        them: ``(n·nb, H, C, d)``, ``(n·nb, H, G·span, d)`` and ``(n·nb, H or 1, C, G·span)``."""
        q_part = qb[rows].flatten(0, 1).contiguous()
        kw = cut_windows(k[rows], layout).flatten(0, 1)
        vw = cut_windows(v[rows], layout).flatten(0, 1)
        blocked = ~allowed[rows].flatten(0, 1)
        mask = torch.zeros(blocked.shape, dtype=qb.dtype).masked_fill_(blocked, -torch.inf)
        return q_part, kw, vw, mask

    @staticmethod
    def forward(ctx: Any, qb: Tensor, k: Tensor, v: Tensor, allowed: Tensor, layout: _WindowLayout):
        bsz, nb, heads, block, dim = qb.shape
        chunk = _chunk_size(layout, heads, allowed.size(-1), dim, qb.element_size())
        out = qb.new_empty(nb, block, bsz, heads, dim).permute(2, 0, 3, 1, 4)
        lse = qb.new_empty(bsz * nb, heads, block, dtype=torch.float32)
        for start in range(0, bsz, chunk):
            rows = slice(start, start + chunk)
            inputs = _ChunkedFlashBand.chunk_inputs(qb, k, v, allowed, layout, rows)
            o, chunk_lse = _FLASH_CPU(*inputs[:3], attn_mask=inputs[3], scale=1.0)
            out[rows] = o.view(-1, nb, heads, block, dim)
            lse[start * nb : start * nb + o.size(0)] = chunk_lse
        ctx.save_for_backward(qb, k, v, allowed, out, lse)
        ctx.layout, ctx.chunk = layout, chunk
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor):
        qb, k, v, allowed, out, lse = ctx.saved_tensors
        layout, chunk = ctx.layout, ctx.chunk
        nb = qb.size(1)
        dq, dk, dv = torch.empty_like(qb), torch.empty_like(k), torch.empty_like(v)
        for start in range(0, qb.size(0), chunk):
            rows = slice(start, start + chunk)
            q_part, kw, vw, mask = _ChunkedFlashBand.chunk_inputs(qb, k, v, allowed, layout, rows)
            n = q_part.size(0)
            gq, gk, gv = _FLASH_CPU_BACKWARD(
                grad[rows].flatten(0, 1).contiguous(),
                q_part,
                kw,
                vw,
                out[rows].flatten(0, 1),
                lse[start * nb : start * nb + n],
                0.0,
                False,
                attn_mask=mask,
                scale=1.0,
            )
            dq[rows] = gq.view(dq[rows].shape)
            shape = k[rows].shape
            dk[rows] = fold_windows(gk.view(-1, nb, *gk.shape[1:]), layout, shape)
            dv[rows] = fold_windows(gv.view(-1, nb, *gv.shape[1:]), layout, shape)
        return dq, dk, dv, None, None


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


def _check(problem: AttentionProblem) -> str | None:
    if not problem.bands:
        return "no window (band) restricts the keys"
    if problem.allowed is not None:
        return "a dense mask (only bands, padding and the causal triangle)"
    if problem.has_bias:
        return "a bias"
    groups = problem.stacked_groups
    tq = problem.q.size(2)
    if stored_shape(problem, "k")[2] != groups * tq:
        return "not full self-attention (a decoding step or cross-attention)"
    if problem.causal and groups != 1:
        return "causal with stacked key groups"
    if is_forced("band"):
        return None
    k, v, _ = _keys(problem)
    reach_left, reach_right = problem.band_extent
    widest = reach_left + reach_right + 1
    # with windows of 11 keys (1D, and each of 2D's 3 heads) the C kernel beat masked SDPA at
    # every length measured (T = 8 to 1024): no length threshold for windows up to C_WINDOW
    if native_band.takes(problem.q, k, v, problem.dropout_p) and widest <= C_WINDOW:
        return None
    shortest = MIN_LENGTH if groups == 1 else MIN_LENGTH_GROUPED
    if tq < shortest:
        c_kernel = _c_reason(widest)
        return f"T = {tq} < {shortest}, where masked SDPA is as fast (C kernel: {c_kernel})"
    if widest - 1 + BLOCK >= 2 * tq:
        return "a band as wide as the sequence: dense is cheaper than the blocked kernels"
    return None


def _c_reason(widest: int) -> str:
    """Why the C kernel does not take the problem without the length rules."""
    if not native_band.ENABLED:
        return "localnmt._band not built"
    if widest > C_WINDOW:
        return f"window of {widest} keys > {C_WINDOW}"
    return "needs float32 on the CPU without dropout"


@register_kernel("band", priority=20, check=_check)
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
