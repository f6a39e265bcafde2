"""2D-CSAN's head area (Yang et al. 2019, eq. 7-9): each head's keys are those of its
neighbouring heads, wrapped around.

Shared by the method (``methods/csan.py``), which stacks the keys, and the kernels
(``fast/band.py``, ``fast/native/c_band.py``), which read the unstacked keys in place: a
kernel never imports a method.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from localnmt.attention.deferred import Deferred


@dataclass
class HeadArea:
    """2D-CSAN's key set before stacking: group ``g`` of head ``h`` is head ``(h + g - half)
    mod H`` of ``k``/``v`` ``(B, H, T, d)``; ``k_stack``/``v_stack`` are the deferred stacks put
    in the context (a kernel checks them to know no later transform replaced the keys)."""

    half: int
    k: Tensor
    v: Tensor
    k_stack: Deferred
    v_stack: Deferred

    @property
    def groups(self) -> int:
        """``N + 1``: the heads in the area."""
        return 2 * self.half + 1


def area_view(x: Tensor, groups: int) -> Tensor:
    """Eq. 7-8 layout ``(B, H, T, d)`` → ``(B, H, G·T, d)``, group ``g`` of head ``h`` = head
    ``(h + g - G//2) mod H``, as a view: heads wrapped once (``(B, H + G - 1, T, d)``, one copy),
    then group ``g`` of head ``h`` is padded head ``h + g``: a window of ``G`` heads
    (``unfold``) whose ``(G, T)`` axes merge without a copy."""
    bsz, heads, t, dim = x.shape
    half = groups // 2
    if half == 0:
        return x
    wrapped = torch.cat([x[:, heads - half :], x, x[:, :half]], dim=1)
    windows = wrapped.unfold(1, groups, 1)  # (B, H, T, d, G)
    return windows.permute(0, 1, 4, 2, 3).reshape(bsz, heads, groups * t, dim)


def deferred_area_view(x: Tensor, groups: int) -> Deferred:
    """:func:`area_view` of ``x``, built only when a kernel reads it."""
    bsz, heads, t, dim = x.shape
    return Deferred(functools.partial(area_view, x, groups), (bsz, heads, groups * t, dim))
