"""BLOCK (Bi-BloSAN; Yang et al. 2019, Table 1) against a plain re-statement of its
restriction, block summaries and gate, sentence by sentence."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing
from helpers.attention import RecordingDropout

from localnmt.attention import dispatch

E, H, D = 32, 4, 8


make = testing.one_layer_self_attention
batch = testing.two_sentences
check = testing.assert_probs_per_sentence


SPEC = "block"


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dropout", [0.0, 0.4])
def test_block_restriction_and_output(side, dropout):
    """Without weights the restricted attention comes from a fused kernel (no probabilities);
    with attention dropout (dense path, recorded mask) intra is the layer's own dropped p @ V."""
    att = make("block[block=3]")
    x, pad = batch(side)

    def expected(q, k, xs):
        n = q.size(1)
        blk = torch.arange(n) // 3
        same = blk[:, None] == blk[None, :]
        return torch.softmax((q @ k.transpose(-1, -2)).masked_fill(~same, -math.inf), -1)

    check(att, x, pad, expected)
    # output = (1-g)·intra + g·inter with s2t block summaries (Bi-BloSAN), sentence by sentence
    m = att.modifiers[0]
    if dropout:
        att.dropout_module = recording = RecordingDropout(dropout)
    summaries = []
    m.block_key.register_forward_hook(lambda mod, args, out: summaries.append(args[0].shape))
    with dispatch.trace() as seen:
        out, _ = att(x, x, x, key_padding_mask=pad, need_weights=bool(dropout))
    # without dropout the fused path: the dense probabilities are never computed
    assert ("dense" in seen.kernels()) == bool(dropout)
    assert summaries == [(2, 4, E)]  # one row per block of the longest sentence (11 / 3), not T
    for b in range(x.size(1)):
        real, xs, q, k = testing.sentence_projections(att, x, pad, b)
        n = xs.size(0)
        v = att.v_proj(xs).view(n, H, D).transpose(0, 1)
        probs = expected(q, k, xs)
        if dropout:
            (keep,) = recording.masks  # one dropout call: (B, H, T, T)
            probs = probs * keep[b][:, real][:, :, real] / (1 - dropout)
        intra = probs @ v
        blk = torch.arange(n) // 3
        scores = m.s2t_score(torch.nn.functional.elu(m.s2t_hidden(xs)))
        summ = torch.stack(
            [(torch.softmax(scores[blk == c], 0) * xs[blk == c]).sum(0) for c in blk.unique()]
        )
        kb = m.block_key(summ).view(-1, H, D).transpose(0, 1)
        vb = m.block_value(summ).view(-1, H, D).transpose(0, 1)
        inter = torch.softmax(q @ kb.transpose(-1, -2), -1) @ vb
        intra, inter = (y.transpose(0, 1).reshape(n, E) for y in (intra, inter))
        g = torch.sigmoid(m.gate(torch.cat([intra, inter], -1)))
        want = att.out_proj((1 - g) * intra + g * inter)
        torch.testing.assert_close(out[real, b], want, atol=1e-5, rtol=1e-4)


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
