"""Key positions from a padding mask (attention/positions.py): counted from the first real key
on either padding side, and the last mask's positions reused only while it is unchanged."""

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


def test_the_same_mask_reuses_its_positions_until_written():
    """Every layer reads the same source mask: the second read returns the first's tensors;
    an in-place write to the mask, or another mask with equal values, computes afresh."""
    mask = torch.tensor([[False, False, True], [False, False, False]])
    first = call_positions(mask)[0]
    assert call_positions(mask)[0] is first
    mask[0, 1] = True  # written in place: its version counter moves
    again = call_positions(mask)[0]
    assert again is not first and again.tolist() == [[0, 0, 0], [0, 1, 2]]
    other = mask.clone()
    assert call_positions(other)[0] is not again
    assert torch.equal(call_positions(other)[0], again)


def test_an_inference_mode_mask_is_read_without_reuse():
    """Inference-mode tensors have no version counter: their positions are computed each
    time, with the same values."""
    with torch.inference_mode():
        mask = torch.tensor([[False, True], [False, False]])
        first, again = call_positions(mask)[0], call_positions(mask)[0]
    assert first is not again and first.tolist() == again.tolist() == [[0, 0], [0, 1]]
