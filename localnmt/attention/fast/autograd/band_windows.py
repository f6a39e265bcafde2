"""The blocked band kernel's two autograd Functions and the window layout they share
(``fast/band.py`` calls them; nothing here is dispatched).

:class:`BlockWindows` cuts each query block's key window out of the keys (:func:`cut_windows`)
with :func:`fold_windows`, its adjoint, as the backward: autograd's pad / select / slice
backwards would allocate a zero tensor per piece. :class:`ChunkedFlashBand` runs torch's fused
CPU attention op directly on a few sentences at a time, saving only its output and log-sum-exp,
and cuts the windows again in backward (docs/design.md, "Kernels").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

#: Bytes of one chunk's key windows and query blocks on the CPU path (:class:`ChunkedFlashBand`),
#: below glibc's 32 MiB ceiling for reusing freed memory. ``python -m bench.band_chunks`` at
#: T = 512, B = 32 (2-core CPU): band 1D ÷ dense 0.37 / 0.39 / 0.44 / 0.49 at 8 / 16 / 32 / 48
#: MiB, band 2D 0.80 / 0.77 / 0.78 / 0.88, 2D-CSAN layer peak 316 / 367 / 443 / 519 MiB
#: (plain layer 322).
CHUNK_BYTES = 16 << 20


def flash_cpu_ops() -> tuple[Any, Any]:
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


FLASH_CPU, FLASH_CPU_BACKWARD = flash_cpu_ops()
FLASH_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class WindowLayout:
    """How :class:`BlockWindows` cuts ``G`` groups of ``T`` keys into per-block windows."""

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


def cut_windows(x: Tensor, layout: WindowLayout) -> Tensor:
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


def fold_windows(grad: Tensor, layout: WindowLayout, shape: torch.Size) -> Tensor:
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


class BlockWindows(torch.autograd.Function):
    """:func:`cut_windows` with :func:`fold_windows` as its backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, layout: WindowLayout) -> Tensor:
        ctx.layout, ctx.shape = layout, x.shape
        return cut_windows(x, layout)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return fold_windows(grad, ctx.layout, ctx.shape), None


def chunked_flash_applies(q: Tensor, dropout_p: float) -> bool:
    """Whether :class:`ChunkedFlashBand` can run: CPU, no dropout (torch's fused CPU op has
    none), a dtype the op takes."""
    return (
        FLASH_CPU is not None
        and q.device.type == "cpu"
        and dropout_p == 0.0
        and q.dtype in FLASH_DTYPES
    )


def chunk_size(layout: WindowLayout, heads: int, keys: int, dim: int, itemsize: int) -> int:
    """Sentences per chunk: the key windows ``(nb, H, keys, d)`` and query blocks
    ``(nb, H, C, d)`` of a chunk fit :data:`CHUNK_BYTES` (each of the chunk's temporaries,
    windows, window gradients, query copies, is at most that size)."""
    per_sentence = layout.nblocks * heads * (keys + layout.block) * dim * itemsize
    return max(1, CHUNK_BYTES // per_sentence)


class ChunkedFlashBand(torch.autograd.Function):
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
        qb: Tensor, k: Tensor, v: Tensor, allowed: Tensor, layout: WindowLayout, rows: slice
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
    def forward(ctx: Any, qb: Tensor, k: Tensor, v: Tensor, allowed: Tensor, layout: WindowLayout):
        bsz, nb, heads, block, dim = qb.shape
        chunk = chunk_size(layout, heads, allowed.size(-1), dim, qb.element_size())
        out = qb.new_empty(nb, block, bsz, heads, dim).permute(2, 0, 3, 1, 4)
        lse = qb.new_empty(bsz * nb, heads, block, dtype=torch.float32)
        for start in range(0, bsz, chunk):
            rows = slice(start, start + chunk)
            inputs = ChunkedFlashBand.chunk_inputs(qb, k, v, allowed, layout, rows)
            o, chunk_lse = FLASH_CPU(*inputs[:3], attn_mask=inputs[3], scale=1.0)
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
            q_part, kw, vw, mask = ChunkedFlashBand.chunk_inputs(qb, k, v, allowed, layout, rows)
            n = q_part.size(0)
            gq, gk, gv = FLASH_CPU_BACKWARD(
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
