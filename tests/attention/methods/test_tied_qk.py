"""Heads that share Wq and Wk (Pande et al. 2021, §4.2) against a plain re-statement: the heads
of a group have one attention map, softmax(q_g·k_gᵀ/√d) from the group's own projections."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import SpecError

E, H, D = 32, 4, 8


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("side", ["left", "right"])
def test_groups_share_one_attention_map(groups, side):
    att = testing.make_attention("encoder_self", f"tied_qk[groups={groups}]", embed_dim=E, heads=H)
    assert att.q_proj.out_features == att.k_proj.out_features == groups * D
    assert att.v_proj.out_features == E  # values stay per head
    torch.manual_seed(2)
    lengths = [7, 4, 2]
    x = torch.randn(7, 3, E)
    pad = testing.padding_mask(lengths, 7, side)
    weights = att(x, x, x, key_padding_mask=pad, need_head_weights=True)[1]  # (H, B, T, T)
    for b, n in enumerate(lengths):
        real = (~pad[b]).nonzero().squeeze(1)
        xs = x[real, b]
        q = testing.linear(att.q_proj, xs).view(n, groups, D).transpose(0, 1) / math.sqrt(D)
        k = testing.linear(att.k_proj, xs).view(n, groups, D).transpose(0, 1)
        maps = torch.softmax(q @ k.transpose(-1, -2), dim=-1)  # (G, I, I)
        for h in range(H):
            got = weights[h, b][real][:, real]
            torch.testing.assert_close(got, maps[h // (H // groups)], atol=1e-6, rtol=1e-5)


def test_groups_must_divide_the_heads_and_take_no_heads_option():
    with pytest.raises(SpecError, match="must divide the 4 heads"):
        testing.make_attention("encoder_self", "tied_qk[groups=3]", embed_dim=E, heads=H)
    with pytest.raises(SpecError, match="takes no heads= option"):
        testing.make_attention("encoder_self", "tied_qk[heads=1-2]", embed_dim=E, heads=H)
