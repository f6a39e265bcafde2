"""BI_DIRECT (DiSAN's directional masks; Yang et al. 2019, Table 1) against a plain
re-statement, sentence by sentence."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

E, H, D = 32, 4, 8


make = testing.one_layer_self_attention
batch = testing.two_sentences
check = testing.assert_probs_per_sentence


SPEC = "bi_direct"


@pytest.mark.parametrize("side", ["left", "right"])
def test_bi_direct(side):
    att = make("bi_direct")
    x, pad = batch(side)

    def expected(q, k, xs):
        n = q.size(1)
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        masks = [j <= i] * (H // 2) + [j >= i] * (H // 2)  # forward heads, then backward
        logits = q @ k.transpose(-1, -2)
        return torch.stack(
            [torch.softmax(logits[h].masked_fill(~masks[h], -math.inf), -1) for h in range(H)]
        )

    check(att, x, pad, expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_and_gradients(dtype):
    att = make(SPEC)
    x, pad = batch("left", lengths=(1, 11))  # one sentence of a single token: padding windows
    out, _ = att(x, x, x, key_padding_mask=pad, need_weights=False)
    assert torch.isfinite(out).all()
    out[~pad.T].sum().backward()
    for p in att.modifiers.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    low = att.to(dtype)
    out, _ = low(x.to(dtype), x.to(dtype), x.to(dtype), key_padding_mask=pad, need_weights=False)
    assert torch.isfinite(out.float()).all()
