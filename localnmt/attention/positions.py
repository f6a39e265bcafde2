"""Where each key and query of one attention call sits, counted from the first real token.

Computed on first use (the baseline never reads them): key positions and real lengths from
the padding mask; in cross-attention during decoding, once per source batch (cached in the
decoding buffer) and each query at its hypothesis's decoder step (docs/design.md, "Padding
side and positions").
"""

from __future__ import annotations

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
            return key_positions_from_padding(key_padding_mask, bsz, tk, device)
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
