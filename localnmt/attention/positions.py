"""Where each key and query of one attention call sits, counted from the first real token.

Computed on first use (the baseline never reads them): key positions and real lengths from
the padding mask; in cross-attention during decoding, once per source batch (cached in the
decoding buffer) and each query at its hypothesis's decoder step (docs/design.md, "Padding
side and positions").
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from localnmt.attention.context import key_positions_from_padding


def positions_of_call(
    *,
    self_attention: bool,
    cross_attention: bool,
    causal: bool,
    key_padding_mask: Tensor | None,
    bsz: int,
    tq: int,
    tk: int,
    device: torch.device,
    buffer: dict[str, Any] | None,
    query_offset: Tensor | None,
) -> Callable[[], tuple[Tensor, Tensor, Tensor]]:
    """``() -> (key_positions (B, Tk), query_positions (B, Tq), key_lengths (B, Tq))`` of
    :class:`~localnmt.attention.context.AttentionContext`."""

    def source_positions() -> tuple[Tensor, Tensor]:
        if not cross_attention or buffer is None:
            return _last_mask.positions(key_padding_mask, bsz, tk, device)
        # the source is the same at every decoding step: compute once per sentence batch
        cached = buffer.get("key_positions")
        if cached is None or cached.shape != (bsz, tk):
            key_pos, lengths = key_positions_from_padding(key_padding_mask, bsz, tk, device)
            buffer["key_positions"], buffer["key_lengths"] = key_pos, lengths
        return buffer["key_positions"], buffer["key_lengths"]

    def positions() -> tuple[Tensor, Tensor, Tensor]:
        key_pos, lengths = source_positions()
        if self_attention:
            query_pos = key_pos[:, tk - tq :]
            if causal:
                return key_pos, query_pos, query_pos + 1.0
            return key_pos, query_pos, lengths[:, None].expand(bsz, tq)
        steps = torch.arange(tq, device=device, dtype=torch.float32)
        offset = 0.0 if query_offset is None else query_offset[:, None]
        query_pos = (steps[None, :] + offset).expand(bsz, tq)
        return key_pos, query_pos, lengths[:, None].expand(bsz, tq)

    return positions


class _LastMask:
    """The key positions and lengths of the last padding mask read: every layer of a forward
    reads the same mask (the source's, in each encoder layer and each cross-attention), so
    the layers after the first reuse what the first computed. Kept while that tensor lives
    and is not written in place (its version counter); plain tensors only (not under
    ``torch.func``, not inference-mode tensors, not while compiling)."""

    def __init__(self) -> None:
        self._last: tuple[Any, int, tuple[Tensor, Tensor]] | None = None

    def positions(
        self, mask: Tensor | None, bsz: int, tk: int, device: torch.device
    ) -> tuple[Tensor, Tensor]:
        if mask is None or type(mask) is not Tensor or not _plain(mask):
            return key_positions_from_padding(mask, bsz, tk, device)
        last = self._last
        if last is not None and last[0]() is mask and last[1] == mask._version:
            values = last[2]
            if values[0].shape == (bsz, tk) and values[0].device == device:
                return values
        values = key_positions_from_padding(mask, bsz, tk, device)
        self._last = (weakref.ref(mask), mask._version, values)
        return values


def _plain(t: Tensor) -> bool:
    """A tensor whose version counter can be read (not an inference-mode tensor, which has
    none), outside compilation and ``torch.func``."""
    if t.is_inference() or _is_compiling():
        return False
    return not torch._C._functorch.is_functorch_wrapped_tensor(t)


#: ``torch.compiler.is_compiling`` where torch has it (2.3 and later)
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)

_last_mask = _LastMask()
