"""LOCAL_HARD (Luong et al. 2015; Yang et al. 2019, Table 1) against a plain re-statement,
sentence by sentence."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

E, H, D = 32, 4, 8


make = testing.one_layer_self_attention
batch = testing.two_sentences
check = testing.assert_probs_per_sentence


SPEC = "local_hard"


@pytest.mark.parametrize("side", ["left", "right"])
def test_local_hard(side):
    att = make("local_hard[half_window=2]")
    pred = att.modifiers[0].centre
    x, pad = batch(side)

    def expected(q, k, xs):
        n = q.size(1)
        z = pred.out(torch.tanh(pred.proj(q.transpose(0, 1).reshape(n, E))))
        p = ((n - 1) * torch.sigmoid(z)).T[..., None]  # (H, I, 1)
        j = torch.arange(n)[None, None, :].float()
        g = -((j - p) ** 2) / (2 * (2 / 2) ** 2)
        logits = (q @ k.transpose(-1, -2) + g).masked_fill((j - p).abs() > 2, -math.inf)
        return torch.softmax(logits, -1)

    check(att, x, pad, expected)


def test_decoder_incremental_equals_full():
    att = make("local_hard[half_window=2]", kind="decoder_self").eval()
    t = 7
    x = torch.randn(t, 2, E)
    causal = torch.triu(torch.full((t, t), float("-inf")), 1)
    full, _ = att(x, x, x, attn_mask=causal, need_weights=False)
    state: dict = {}
    steps = [att(x[i : i + 1], x[i : i + 1], x[i : i + 1], incremental_state=state)[0]
             for i in range(t)]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps), full, atol=1e-5, rtol=1e-4)


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
