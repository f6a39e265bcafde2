"""CSAN (Yang et al. 2019) against a plain re-statement of eq. 4–9, sentence by sentence."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import SpecError, dispatch
from localnmt.attention.context import AttentionSite
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import build_modifiers, parse_spec

E, H = 32, 4


def make_attention(
    spec: str, kind: str = "encoder_self", seed: int = 0, heads: int = H
) -> LocalAttention:
    """One layer of 6 (window limit 64 positions), ``E // H`` dims per head, training mode."""
    return testing.make_attention(
        kind, spec, embed_dim=heads * (E // H), heads=heads, num_layers=6, max_positions=64,
        seed=seed, self_attention=True, train=True,
    )  # fmt: skip


def padded_batch(side: str, lengths=(9, 14, 5), seed: int = 1, embed: int = E):
    """Random (T, B, E) input and (B, T) padding mask with ``side`` padding."""
    g = torch.Generator().manual_seed(seed)
    t = max(lengths)
    x = torch.randn(t, len(lengths), embed, generator=g)
    return x, testing.padding_mask(lengths, t, side)


def reference(att: LocalAttention, x, pad, window: int, area: int = 1) -> torch.Tensor:
    """Eq. 4–6 (area=1) and eq. 7–9: per sentence, real tokens only, plain loops over heads."""
    heads, embed = att.num_heads, att.embed_dim
    d = embed // heads
    out = torch.zeros_like(x)
    for b in range(x.size(1)):
        real = (~pad[b]).nonzero().squeeze(1)
        xs = x[real, b]  # (I, E): positions 0..I-1 from the first real token
        q = (xs @ att.q_proj.weight.T + att.q_proj.bias).view(-1, heads, d)
        k = (xs @ att.k_proj.weight.T + att.k_proj.bias).view(-1, heads, d)
        v = (xs @ att.v_proj.weight.T + att.v_proj.bias).view(-1, heads, d)
        n = xs.size(0)
        heads_out = torch.zeros(n, heads, d)
        for h in range(heads):
            for i in range(n):
                lo, hi = max(0, i - window // 2), min(n, i + window // 2 + 1)  # truncated edges
                keys, values = [], []
                for off in range(-(area // 2), area // 2 + 1):
                    hh = (h + off) % heads  # wrap-around over heads, keys and values alike
                    keys.append(k[lo:hi, hh])
                    values.append(v[lo:hi, hh])
                kk, vv = torch.cat(keys), torch.cat(values)
                p = torch.softmax(kk @ q[i, h] / math.sqrt(d), dim=0)
                heads_out[i, h] = p @ vv
        out[real, b] = att.out_proj(heads_out.reshape(n, embed))
    return out


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("kernel", [None, "band"])
@pytest.mark.parametrize(
    "spec,window,area",
    [
        ("csan_1d[window=5]", 5, 1),
        ("csan_1d", 11, 1),
        ("csan_2d[window=3]", 3, 3),
        ("csan_2d[window=5,area_heads=5]", 5, 5),  # 5 heads: every head once, edges wrap
    ],
)
def test_matches_equations(spec, window, area, side, kernel):
    att = make_attention(spec, heads=5 if area == 5 else H)
    x, pad = padded_batch(side, embed=att.embed_dim)
    expected = reference(att, x, pad, window, area)
    with dispatch.forced_kernel(kernel):
        got, _ = att(x, x, x, key_padding_mask=pad, need_weights=kernel is None)
    real = ~pad.T
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


def test_2d_all_heads_wraps_once_each():
    """area_heads = H (odd H): every head sees every head once, with wrap-around."""
    torch.manual_seed(0)
    site = AttentionSite("encoder_self", 0, 6, 30, 5)
    mods = build_modifiers(parse_spec("csan_2d[window=3,area_heads=5]"), site)
    att = LocalAttention(30, 5, site=site, modifiers=mods, self_attention=True)
    index = mods[0].head_index(5, torch.device("cpu"))
    assert all(sorted(row.tolist()) == list(range(5)) for row in index)
    x = torch.randn(7, 2, 30)
    out, _ = att(x, x, x)
    assert torch.isfinite(out).all()


def test_2d_head_selection_leaves_other_heads_global():
    att = make_attention("csan_2d[window=3,heads=2]")
    plain = make_attention("")
    x, pad = padded_batch("right")
    _, w = att(x, x, x, key_padding_mask=pad, need_head_weights=True)
    _, w0 = plain(x, x, x, key_padding_mask=pad, need_head_weights=True)
    tk = x.size(0)
    # head 1 (unselected): its three key groups are its own keys: summed, it is plain attention
    summed = w[0].view(*w[0].shape[:-1], 3, tk).sum(-2)
    torch.testing.assert_close(summed, w0[0], atol=1e-6, rtol=1e-5)
    # head 2 (selected) is windowed: nothing outside |i-j| <= 1
    assert (w[1][0, 0, 2:tk] == 0).all() and (w[1][0, 0, :2] > 0).all()


def test_parameter_free():
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(make_attention("csan_1d")) == count(make_attention(""))
    assert count(make_attention("csan_2d")) == count(make_attention(""))


@pytest.mark.parametrize(
    "spec,message",
    [
        ("csan_1d[window=10]", "odd"),
        ("csan_1d[window=0]", "odd"),
        ("csan_1d[window=65]", "max positions"),
        ("csan_2d[area_heads=2]", "odd"),
        ("csan_2d[area_heads=5]", "exceeds the 4 heads"),
    ],
)
def test_validation(spec, message):
    with pytest.raises(SpecError, match=message):
        make_attention(spec)


def test_2d_not_on_decoder():
    with pytest.raises(SpecError, match="does not apply"):
        make_attention("csan_2d", kind="decoder_self")


def test_decoder_incremental_equals_full():
    att = make_attention("csan_1d[window=3]", kind="decoder_self").eval()
    t, b = 8, 2
    x = torch.randn(t, b, E)
    causal = torch.triu(torch.full((t, t), float("-inf")), 1)
    full, _ = att(x, x, x, attn_mask=causal, need_weights=False)
    state: dict = {}
    steps = [
        att(x[i : i + 1], x[i : i + 1], x[i : i + 1], incremental_state=state)[0] for i in range(t)
    ]
    torch.testing.assert_close(torch.cat(steps), full, atol=1e-5, rtol=1e-5)
    # the window really restricts: a causal window of 3 sees exactly 2 keys at step 5
    _, w = att(x, x, x, attn_mask=causal, need_head_weights=True)
    assert ((w[:, :, 5] > 0).sum(-1) == 2).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("spec", ["csan_1d[window=3]", "csan_2d[window=3]"])
def test_low_precision_no_nan(spec, dtype):
    att = make_attention(spec).to(dtype)
    x, pad = padded_batch("left")
    out, _ = att(x.to(dtype), x.to(dtype), x.to(dtype), key_padding_mask=pad, need_weights=False)
    assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("spec", ["csan_1d[window=3]", "csan_2d[window=3]"])
def test_gradients_and_padding_only_windows(spec):
    """A sentence of one token under heavy left padding: padded queries' windows hold only
    padding; no NaN anywhere, and gradients reach the projections."""
    att = make_attention(spec)
    x, pad = padded_batch("left", lengths=(1, 20))
    for kernel in (None, "band"):
        with dispatch.forced_kernel(kernel):
            att.zero_grad()
            out, _ = att(x, x, x, key_padding_mask=pad, need_weights=False)
        assert torch.isfinite(out).all()
        out[~pad.T].sum().backward()
        for p in (att.q_proj.weight, att.k_proj.weight, att.v_proj.weight):
            assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
