"""FlexAttention (``torch.nn.attention.flex_attention``) for windows, padding, the causal
triangle and Gaussian biases, with block masks: on a GPU, compiled into one fused kernel that
skips the key blocks a window never reaches (docs/design.md, "Kernels").

The restrictions become a ``mask_mod`` over indices (a band in real-token positions is the
same band in indices: padding sits at one end of a sentence, as in ``band.py``), turned into a
``BlockMask`` once per shape and padding mask and reused by every layer that sees the same
padding; the quadratic biases (Yang et al. 2018 eq. 5, :class:`QuadraticBias`) become a
``score_mod`` in vertex form ``a·(j−c)² + (b+2ac)·(j−c)``, the reference's float32 formula.
Stacked key groups (2D-CSAN) are ``G`` copies of the same positions: key ``kv`` sits at
``kv mod Tk``.

Taken automatically on CUDA when torch has FlexAttention and the problem has a window
(``bands``); elsewhere only when forced (``dispatch.forced_kernel("flex")``): on CPU, torch's
FlexAttention has no backward and its unfused fallback materialises every score, so the CPU
uses ``band`` / SDPA instead. Declines dense masks and dense biases (SDPA takes those),
dropout (FlexAttention has none), cross-attention, and CPU problems that need gradients.
A failure of the compiled kernel on first use is reported once and turns the kernel off
(the next kernel runs). ``LOCALNMT_FLEX=0`` turns it off from the start. A torch without
FlexAttention (before 2.5) says so once, on the first CUDA problem it would have taken (or
the first call that forces it, which it declines).
"""

from __future__ import annotations

import functools
import os
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from localnmt.attention.deferred import stored, stored_shape
from localnmt.attention.dispatch import Declined, is_forced
from localnmt.attention.problem import AttentionProblem, register_kernel

#: Shortest sequence taken automatically on CUDA (below it a window saves few key blocks
#: of 128, FlexAttention's block size, and SDPA with a mask is as fast).
MIN_LENGTH = 256
#: Block masks kept (one per padding mask, shape and window; every layer of a batch shares one).
CACHE_SIZE = 8

_disabled = os.environ.get("LOCALNMT_FLEX", "1") == "0"
_told = False  # whether a missing FlexAttention has been reported
_compiled: Callable[..., Tensor] | None = None
#: key → (the padding mask it was built from, held weakly; the BlockMask)
_block_masks: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()


@functools.cache
def available() -> bool:
    """Whether this torch has FlexAttention (asked once)."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def unavailable_reason() -> str | None:
    """Why the kernel is off, or None when it is on."""
    if _disabled:
        return "FlexAttention is off (LOCALNMT_FLEX=0, or it failed once in this process)"
    if not available():
        return f"FlexAttention needs torch >= 2.5 (this is torch {torch.__version__})"
    return None


def _tell_unavailable(problem: AttentionProblem, forced: bool) -> None:
    """Once per process, where this torch has no FlexAttention and the kernel was forced or
    a CUDA problem with a window would have taken it: say so (the other kernels compute the
    same numbers; a forced one declines)."""
    global _told
    if _told or _disabled:
        return
    if not forced and (problem.q.device.type != "cuda" or not problem.bands):
        return
    _told = True
    warnings.warn(
        f"localnmt: {unavailable_reason()}; windows run through the other kernels", stacklevel=3
    )


def _flex(device: torch.device) -> Callable[..., Tensor]:
    """Compiled FlexAttention on GPUs; the eager (unfused, reference) one on CPU."""
    global _compiled
    from torch.nn.attention.flex_attention import flex_attention

    if device.type == "cpu":
        return flex_attention
    if _compiled is None:
        _compiled = torch.compile(flex_attention)
    return _compiled


def make_mask_mod(
    left: Tensor,
    right: Tensor,
    real: Tensor | None,
    tk: int,
    offset: int,
    causal: bool,
    keys: int | None = None,
) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
    """``mask_mod(b, h, q, kv)``: key ``kv`` (position ``kv mod tk``) inside query ``q``'s
    window ``[q+offset−left[h], q+offset+right[h]]``, real, and not after ``q`` if causal.
    ``offset = tk − tq`` (incremental decoding: the queries are the last ``tq`` positions).

    ``keys``: all keys, ``G·tk`` for ``G`` stacked groups (default ``real``'s length, or
    ``tk``). Indices past the problem (torch 2.5's ``create_block_mask`` asks about whole
    blocks of 128, beyond the last query and key) are masked, never used to index ``real``."""
    tq = tk - offset
    last = (keys or (tk if real is None else real.size(1))) - 1

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        rel = kv_idx % tk - (q_idx + offset)
        keep = (rel >= -left[h]) & (rel <= right[h]) & (q_idx < tq) & (kv_idx <= last)
        if real is not None:
            keep = keep & real[b, kv_idx.clamp(max=last)]
        if causal:
            keep = keep & (rel <= 0)
        return keep

    return mask_mod


def make_score_mod(
    terms: list[tuple[Tensor, Tensor, Tensor]], key_positions: Tensor, tk: int
) -> Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]:
    """``score_mod``: add each ``a·(j−c)² + s·(j−c)`` (``(B, H, Tq)`` tensors, vertex form) with
    ``j`` the key's real-token position (query indices past the last are clamped, as in
    :func:`make_mask_mod`; their scores are masked)."""
    last_query = terms[0][0].size(-1) - 1 if terms else 0

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        j = key_positions[b, kv_idx % tk]
        q = q_idx.clamp(max=last_query)
        for a, c, s in terms:
            jc = j - c[b, h, q]
            score = score + a[b, h, q] * jc * jc + s[b, h, q] * jc
        return score

    return score_mod


def _block_mask(problem: AttentionProblem, left: Tensor, right: Tensor, groups: int) -> Any:
    """The problem's ``BlockMask``, cached by shape, window and padding mask.

    The padding mask is recognised by identity (the same tensor object as the layer received
    it, ``padding_source``, not modified in place since), never by its address: a new batch's
    mask often lands where the last one was freed, and keying on ``data_ptr`` would hand it
    the old batch's block mask. Every layer of a forward pass gets the same mask object, so
    the layers still share one block mask, 2D-CSAN's repeated masks included."""
    from torch.nn.attention.flex_attention import create_block_mask

    bsz, heads, tq, _ = problem.q.shape
    tk_all = problem.k.size(2)
    tk = tk_all // groups
    kpm = problem.key_padding_mask
    source = kpm if problem.padding_source is None else problem.padding_source
    per_head = bool((left != left[0]).any() or (right != right[0]).any())
    key = (
        str(problem.q.device), bsz, heads, tq, tk_all, groups, problem.causal,
        tuple(left.tolist()), tuple(right.tolist()),
        None if kpm is None else (id(source), source._version),
    )  # fmt: skip
    cached = _block_masks.get(key)
    if cached is not None and (kpm is None or cached[0]() is source):
        _block_masks.move_to_end(key)
        return cached[1]
    real = None if kpm is None else ~kpm.bool()
    mask_mod = make_mask_mod(left, right, real, tk, tk - tq, problem.causal, keys=tk_all)
    block_mask = create_block_mask(
        mask_mod,
        bsz if real is not None else None,
        heads if per_head else None,
        tq,
        tk_all,
        device=problem.q.device,
    )
    _block_masks[key] = (None if kpm is None else weakref.ref(source), block_mask)
    _block_masks.move_to_end(key)
    while len(_block_masks) > CACHE_SIZE:
        _block_masks.popitem(last=False)
    return block_mask


def _inputs(problem: AttentionProblem) -> list[Tensor]:
    """q, k and v as stored, a deferred key layout (2D-CSAN) by the keys it is built from: a
    check builds nothing."""
    found = [problem.q]
    for name in ("k", "v"):
        value = stored(problem, name)
        if isinstance(value, Tensor):
            found.append(value)
        elif problem.head_area is not None:
            found.append(getattr(problem.head_area, name))
    return found


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason FlexAttention cannot take ``problem`` (off or missing: that one alone)."""
    forced = is_forced("flex")
    if _disabled:
        yield "turned off (LOCALNMT_FLEX=0, or it failed before)"
        return
    if not available():
        _tell_unavailable(problem, forced)
        yield unavailable_reason() or f"this torch ({torch.__version__}) has no FlexAttention"
        return
    if not forced and problem.q.device.type != "cuda":
        yield "CUDA only unless forced (no backward on CPU; the CPU has band and SDPA)"
    if not forced and not problem.bands:
        yield "no window (band) restricts the keys"
    if problem.allowed is not None:
        yield "a dense mask (SDPA takes it)"
    if problem.dense_bias is not None or problem.relative is not None:
        yield "a dense bias (SDPA takes it)"
    if problem.dropout_p > 0:
        yield "attention dropout (FlexAttention has none)"
    if problem.site.kind == "cross":
        yield "cross-attention"
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in _inputs(problem))
    if problem.q.device.type == "cpu" and needs_grad:
        yield "needs gradients on the CPU (no FlexAttention backward there)"
    groups = problem.stacked_groups
    tq = problem.q.size(2)
    tk_all = stored_shape(problem, "k")[2]
    tk = tk_all // groups
    if tk * groups != tk_all or tq > tk:
        yield "more queries than keys"
    if problem.quadratic and groups != 1:
        yield "a Gaussian bias with stacked key groups"
    if not forced and tk < MIN_LENGTH:
        yield f"Tk = {tk} < {MIN_LENGTH}, where SDPA with a mask is as fast"


@register_kernel("flex", check=check)
def flex_kernel(problem: AttentionProblem) -> Tensor | Declined:
    """FlexAttention with a block mask for the window (and a ``score_mod`` for Gaussians)."""
    global _disabled
    groups = problem.stacked_groups
    bsz, heads, tq, _ = problem.q.shape
    tk = problem.k.size(2) // groups
    left, right = problem.band_reach
    left, right = left.clamp(max=tk), right.clamp(max=tk)
    score_mod = None
    if problem.quadratic:
        terms = []
        for quad in problem.quadratic:
            a, c, s = (t.expand(bsz, heads, tq).contiguous() for t in quad.vertex_form())
            terms.append((a, c, s))
        score_mod = make_score_mod(terms, problem.key_positions.float(), tk)
    try:
        block_mask = _block_mask(problem, left, right, groups)
        with warnings.catch_warnings():  # CPU: the unfused fallback says so on every call
            warnings.filterwarnings("ignore", message="flex_attention called without")
            return _flex(problem.q.device)(
                problem.q, problem.k, problem.v, score_mod=score_mod, block_mask=block_mask,
                scale=1.0,
            )  # fmt: skip
    except Exception as err:  # a compiler or driver problem: report once, fall back
        if is_forced("flex"):
            raise
        _disabled = True
        warnings.warn(
            f"localnmt: FlexAttention failed ({err!r}); using the other kernels", stacklevel=2
        )
        return Declined(f"failed: {err!r} (turned off)")
