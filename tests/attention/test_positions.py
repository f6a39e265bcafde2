"""Key positions from a padding mask (attention/positions.py): counted from the first real key
on either padding side."""

from __future__ import annotations

import torch

from localnmt.attention.positions import positions_of_call


def call_positions(mask: torch.Tensor):
    bsz, tk = mask.shape
    return positions_of_call(self_attention=False, cross_attention=True, causal=False,
                             key_padding_mask=mask, bsz=bsz, tq=2, tk=tk,
                             device=mask.device, buffer=None, query_offset=None)()  # fmt: skip


def test_positions_count_from_the_first_real_key_on_either_side():
    mask = torch.tensor([[True, True, False, False, False], [False, False, False, True, True]])
    key, query, lengths = call_positions(mask)
    assert key.tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 2, 2]]
    assert query.tolist() == [[0, 1], [0, 1]]
    assert lengths.tolist() == [[3, 3], [3, 3]]
