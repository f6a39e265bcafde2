"""Hard-coded Gaussian cross-attention (You et al. 2020; Zhang & Feng 2021, Table 2) against its
definition, written per target token with plain loops."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import LocalAttention, dispatch

E, H, B, TQ, TK = 16, 4, 3, 6, 9


def make(spec: str) -> LocalAttention:
    return testing.make_attention("cross", spec, embed_dim=E, heads=H)


def inputs(side: str, lengths=(TK, TK - 3, 2)):
    torch.manual_seed(1)
    x = torch.randn(TQ, B, E)
    src = torch.randn(TK, B, E) * 2
    return x, src, testing.padding_mask(lengths, TK, side)


@pytest.mark.parametrize("side", ["left", "right"])
def test_hardcoded_gaussian_matches_definition(side):
    attn = make("hardcoded_gaussian[ratio=1.5,std=1.0]")
    x, src, pad = inputs(side)
    _, w = attn(x, src, src, key_padding_mask=pad, need_head_weights=True)
    for b in range(B):
        real = (~pad[b]).nonzero().flatten()
        J = len(real)
        for i in range(TQ):
            mu = min(1.5 * i, J - 1)
            g = torch.tensor([math.exp(-((j - mu) ** 2) / 2) for j in range(J)])
            expected = torch.zeros(TK)
            expected[real] = g / g.sum()
            for h in range(H):
                torch.testing.assert_close(w[h, b, i], expected, atol=1e-6, rtol=0)


def test_hardcoded_gaussian_incremental_equals_full():
    attn = make("hardcoded_gaussian")
    x, src, pad = inputs("left")
    with torch.no_grad():
        full, _ = attn(x, src, src, key_padding_mask=pad)
        state: dict = {}
        for t in range(TQ):
            o, _ = attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                        static_kv=True)  # fmt: skip
            torch.testing.assert_close(o[0], full[t], atol=1e-6, rtol=0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_hardcoded_gaussian_output_is_the_fixed_distribution_times_values(side):
    """Without weights no dot-product attention runs (the trace names no kernel, only the
    reference's matmul, and says why); the output is still Σ_j p_ij v_j of the definition,
    and equals the output computed with the weights."""
    attn = make("hardcoded_gaussian[ratio=1.5,std=1.0]").eval()
    x, src, pad = inputs(side)
    with dispatch.trace() as seen:
        fast, _ = attn(x, src, src, key_padding_mask=pad, need_weights=False)
    assert seen.kernels() == ["dense"] and "replaces p" in seen.calls[0].detail[0]
    dense, w = attn(x, src, src, key_padding_mask=pad, need_head_weights=True)
    torch.testing.assert_close(fast, dense, atol=1e-6, rtol=0)
    v = attn.v_proj(src).view(TK, B, H, E // H).permute(1, 2, 0, 3)  # (B, H, TK, d)
    per_head = torch.einsum("hbqk,bhkd->qbhd", w, v).reshape(TQ, B, E)
    torch.testing.assert_close(fast, attn.out_proj(per_head), atol=1e-6, rtol=0)
