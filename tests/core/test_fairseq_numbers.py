"""The framework-free LocalAttention draws its parameters as fairseq's MultiheadAttention
does: the same seed gives the same tensors, so a fairseq model built with a seed has the
numbers it had when the class subclassed fairseq's (and no method changes that order)."""

from __future__ import annotations

import pytest
import torch
from fairseq.modules import MultiheadAttention

from localnmt.attention.layers import build_attention


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
@pytest.mark.parametrize("kdim", [None, 24])
def test_same_seed_same_parameters_as_fairseq(kind: str, kdim: int | None) -> None:
    if kdim is not None and kind != "cross":
        pytest.skip("self-attention needs equal sizes")
    torch.manual_seed(3)
    ref = MultiheadAttention(16, 4, kdim=kdim, vdim=kdim, self_attention=kind != "cross",
                             encoder_decoder_attention=kind == "cross")  # fmt: skip
    torch.manual_seed(3)
    ours = build_attention(kind, 16, 4, kdim=kdim, vdim=kdim)
    theirs = ref.state_dict()
    assert set(ours.state_dict()) == set(theirs)
    for name, tensor in ours.state_dict().items():
        assert torch.equal(tensor, theirs[name]), name
