"""NEIGHBOR (Sperber et al. 2018; Yang et al. 2019, Table 1) against a plain re-statement,
sentence by sentence."""

from __future__ import annotations

import pytest
import torch
from helpers import attention as testing

E, H, D = 32, 4, 8


make = testing.one_layer_self_attention
batch = testing.two_sentences
check = testing.assert_probs_per_sentence


SPEC = "neighbor"


@pytest.mark.parametrize("side", ["left", "right"])
def test_neighbor(side):
    att = make("neighbor")
    pred = att.modifiers[0].window
    x, pad = batch(side)

    def expected(q, k, xs):
        n = q.size(1)
        z = pred.out(torch.tanh(pred.proj(q.transpose(0, 1).reshape(n, E))))  # (I, H)
        dwin = (n * torch.sigmoid(z)).clamp(min=0.1).T  # (H, I)
        i, j = torch.arange(n)[:, None].float(), torch.arange(n)[None, :].float()
        g = -((j - i) ** 2) / (2 * (dwin[..., None] / 2) ** 2)
        return torch.softmax(q @ k.transpose(-1, -2) + g, -1)

    check(att, x, pad, expected)


def test_decoder_incremental_equals_full():
    att = make("neighbor", kind="decoder_self").eval()
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
