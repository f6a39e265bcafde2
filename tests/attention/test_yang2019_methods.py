"""Yang et al. 2019 Table 1 comparison methods vs plain re-statements of their equations."""

from __future__ import annotations

import math

import pytest
import torch
from attention_cases import RecordingDropout

from localnmt.attention.context import AttentionSite
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import build_modifiers, parse_spec

E, H, D = 32, 4, 8


def make(spec: str, kind: str = "encoder_self") -> LocalAttention:
    torch.manual_seed(0)
    site = AttentionSite(kind, 0, 6, E, H, max_positions=64)
    mods = build_modifiers(parse_spec(spec), site)
    return LocalAttention(E, H, site=site, modifiers=mods, self_attention=True)


def batch(side: str, lengths=(6, 11)):
    torch.manual_seed(3)
    t = max(lengths)
    x = torch.randn(t, len(lengths), E)
    pad = torch.ones(len(lengths), t, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if side == "left":
            pad[b, t - n :] = False
        else:
            pad[b, :n] = False
    return x, pad


def sentence_qkv(att, x, pad, b):
    real = (~pad[b]).nonzero().squeeze(1)
    xs = x[real, b]
    q = (att.q_proj(xs) * att.scaling).view(-1, H, D).transpose(0, 1)  # (H, I, d)
    k = att.k_proj(xs).view(-1, H, D).transpose(0, 1)
    return real, xs, q, k


def probs_of(att, x, pad):
    return att(x, x, x, key_padding_mask=pad, need_head_weights=True)[1]  # (H, B, T, T)


def check(att, x, pad, expected_fn):
    w = probs_of(att, x, pad)
    for b in range(x.size(1)):
        real, xs, q, k = sentence_qkv(att, x, pad, b)
        want = expected_fn(q, k, xs)  # (H, I, I)
        got = w[:, b][:, real][:, :, real]
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


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


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dropout", [0.0, 0.4])
def test_block_restriction_and_output(side, dropout, monkeypatch):
    """Without weights the restricted attention comes from a fused kernel (no probabilities);
    with attention dropout (dense path, recorded mask) intra is the layer's own dropped p @ V."""
    from localnmt.attention import pipeline

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
    else:  # the fused path: the dense probabilities are never computed
        monkeypatch.setattr(pipeline, "dense_probabilities", None)
    summaries = []
    m.block_key.register_forward_hook(lambda mod, args, out: summaries.append(args[0].shape))
    out, _ = att(x, x, x, key_padding_mask=pad, need_weights=bool(dropout))
    assert summaries == [(2, 4, E)]  # one row per block of the longest sentence (11 / 3), not T
    for b in range(x.size(1)):
        real, xs, q, k = sentence_qkv(att, x, pad, b)
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


@pytest.mark.parametrize("spec", ["neighbor", "local_hard[half_window=2]"])
def test_decoder_incremental_equals_full(spec):
    att = make(spec, kind="decoder_self").eval()
    t = 7
    x = torch.randn(t, 2, E)
    causal = torch.triu(torch.full((t, t), float("-inf")), 1)
    full, _ = att(x, x, x, attn_mask=causal, need_weights=False)
    state: dict = {}
    steps = [att(x[i : i + 1], x[i : i + 1], x[i : i + 1], incremental_state=state)[0]
             for i in range(t)]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("spec", ["bi_direct", "neighbor", "local_hard", "block"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_and_gradients(spec, dtype):
    att = make(spec)
    x, pad = batch("left", lengths=(1, 11))  # one sentence of a single token: padding windows
    out, _ = att(x, x, x, key_padding_mask=pad, need_weights=False)
    assert torch.isfinite(out).all()
    out[~pad.T].sum().backward()
    for p in att.modifiers.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    low = att.to(dtype)
    out, _ = low(x.to(dtype), x.to(dtype), x.to(dtype), key_padding_mask=pad, need_weights=False)
    assert torch.isfinite(out.float()).all()
