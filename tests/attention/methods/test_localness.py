"""Localness (Yang et al. 2018) against a plain re-statement of eqs. 4–11, one sentence at a time
without padding, so left and right padding must not change any real token's output."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import LocalAttention
from localnmt.attention.methods.localness import LocalnessRecord
from localnmt.catalog import all_rows
from localnmt.catalog.params import count_parameters

C, H, T, B = 16, 4, 7, 3


def make_attention(kind: str, spec: str, *, layer: int = 0, seed: int = 0) -> LocalAttention:
    """One layer of 2, random biases so that every term matters, eval mode."""
    return testing.make_attention(kind, spec, embed_dim=C, heads=H, layer=layer, num_layers=2,
                                  seed=seed, random_biases=True)  # fmt: skip


def padding(lengths: list[int], total: int, left: bool) -> torch.Tensor:
    return testing.padding_mask(lengths, total, "left" if left else "right")


linear = testing.linear


def plain_localness(att, x, mem=None, *, window, causal=False, center="length_minus_one"):
    """Eqs. 4–11 for one unpadded sentence: x (T, C), mem (S, C) for cross-attention."""
    loc = att.modifiers[0]
    src = x if mem is None else mem
    d = C // H
    q = linear(att.q_proj, x)  # Q, unscaled
    k = linear(att.k_proj, src)
    v = linear(att.v_proj, src)
    tq, tk = q.size(0), k.size(0)
    hidden = torch.tanh(linear(loc.w_p, q))  # tanh(W_p Q_i)
    p = linear(loc.u_p, hidden)  # (Tq, H), eq. 7
    i_len = torch.full((tq,), float(tk))
    if causal:
        i_len = torch.arange(1, tq + 1, dtype=torch.float32)
    scale = i_len - 1 if center == "length_minus_one" else i_len
    center_p = scale[:, None] * torch.sigmoid(p)  # eq. 6 / 10
    if window == "fixed":
        window_d = torch.full_like(center_p, 10.0)
    elif window == "query":
        window_d = i_len[:, None] * torch.sigmoid(linear(loc.u_d, hidden))  # eq. 9
    elif window == "layer":
        rows = []
        for i in range(tq):
            visible = k[: i + 1] if causal else k
            kbar = visible.mean(dim=0)
            rows.append(linear(loc.u_d, torch.tanh(linear(loc.w_d, kbar))))  # eq. 8
        window_d = i_len[:, None] * torch.sigmoid(torch.stack(rows))
    else:
        window_d = (50 * torch.sigmoid(loc.z))[None, :].expand(tq, H)  # eq. 11
    window_d = window_d.clamp_min(0.1)
    sigma = window_d / 2
    j = torch.arange(tk, dtype=torch.float32)
    out = []
    for h in range(H):
        sl = slice(h * d, (h + 1) * d)
        energy = q[:, sl] @ k[:, sl].t() / math.sqrt(d)  # eq. 3
        g = -((j[None, :] - center_p[:, h : h + 1]) ** 2) / (2 * sigma[:, h : h + 1] ** 2)
        logits = energy + g  # eq. 4
        if causal:
            logits = logits.masked_fill(torch.ones(tq, tk).triu(1).bool(), float("-inf"))
        out.append(torch.softmax(logits, -1) @ v[:, sl])
    return linear(att.out_proj, torch.cat(out, -1)), center_p, window_d


@pytest.mark.parametrize("window", ["fixed", "layer", "query", "head"])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_encoder_matches_plain_equations(window, left, need_weights):
    att = make_attention("encoder_self", f"localness[window={window}]")
    att.recording = need_weights
    lengths = [T, 4, 2]
    mask = padding(lengths, T, left)
    x = torch.randn(T, B, C)
    with torch.no_grad():
        out, _ = att(x, x, x, key_padding_mask=mask, need_weights=need_weights)
        for b in range(len(lengths)):
            real = (~mask[b]).nonzero().squeeze(1)
            ref, p_ref, d_ref = plain_localness(att, x[real, b], window=window)
            torch.testing.assert_close(out[real, b], ref, atol=2e-5, rtol=1e-4)
            if need_weights:
                rec = att.last_record.get(LocalnessRecord)
                p, d = rec.center[b][:, real].t(), rec.window[b][:, real].t()
                torch.testing.assert_close(p, p_ref, atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(d, d_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("window", ["layer", "query"])
def test_bias_false_is_the_printed_equations(window):
    """``bias=false``: W_p, U_p, W_d, U_d without bias terms (eqs. 7-9 as printed)."""
    att = make_attention("encoder_self", f"localness[window={window},bias=false]")
    with_bias = make_attention("encoder_self", f"localness[window={window}]")
    names = {n for n, _ in att.modifiers[0].named_parameters()}
    biased = {n for n, _ in with_bias.modifiers[0].named_parameters()}
    assert names == {n for n in biased if not n.endswith(".bias")} and names != biased
    x = torch.randn(5, 1, C)
    with torch.no_grad():
        out, _ = att(x, x, x, need_weights=False)
        ref, _, _ = plain_localness(att, x[:, 0], window=window)
    torch.testing.assert_close(out[:, 0], ref, atol=2e-5, rtol=1e-4)


def test_center_length_option():
    att = make_attention("encoder_self", "localness[center=length]")
    x = torch.randn(5, 1, C)
    with torch.no_grad():
        out, _ = att(x, x, x, need_weights=False)
        ref, _, _ = plain_localness(att, x[:, 0], window="query", center="length")
    torch.testing.assert_close(out[:, 0], ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("window", ["query", "layer", "head"])
def test_decoder_self_full_and_incremental(window):
    att = make_attention("decoder_self", f"localness[window={window}]")
    x = torch.randn(T, 2, C)
    future = torch.full((T, T), float("-inf")).triu(1)
    with torch.no_grad():
        full, _ = att(x, x, x, attn_mask=future, need_weights=False)
        for b in range(2):
            ref, _, _ = plain_localness(att, x[:, b], window=window, causal=True)
            torch.testing.assert_close(full[:, b], ref, atol=2e-5, rtol=1e-4)
        state: dict = {}
        steps = [att(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state)[0]
                 for t in range(T)]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps), full, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("left", [True, False])
def test_cross_attention_full_and_incremental(left):
    att = make_attention("cross", "localness[window=query]")
    src_len, lengths = 6, [6, 3]
    mask = padding(lengths, src_len, left)
    mem = torch.randn(src_len, 2, C)
    x = torch.randn(4, 2, C)
    with torch.no_grad():
        full, _ = att(x, mem, mem, key_padding_mask=mask, static_kv=True, need_weights=False)
        for b in range(2):
            real = (~mask[b]).nonzero().squeeze(1)
            ref, _, _ = plain_localness(att, x[:, b], mem[real, b], window="query")
            torch.testing.assert_close(full[:, b], ref, atol=2e-5, rtol=1e-4)
        state: dict = {}
        steps = [
            att(x[t : t + 1], mem, mem, key_padding_mask=mask, incremental_state=state,
                static_kv=True)[0]
            for t in range(4)
        ]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps), full, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "window,names",
    [("query", ["w_p", "u_p", "u_d"]), ("layer", ["w_p", "u_p", "w_d", "u_d"]),
     ("head", ["w_p", "u_p", "z"]), ("fixed", ["w_p", "u_p"])],
)  # fmt: skip
def test_gradients_reach_predictors(window, names):
    att = make_attention("encoder_self", f"localness[window={window}]").train()
    x = torch.randn(T, B, C)
    mask = padding([T, 4, 2], T, left=True)
    out, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
    out.pow(2).sum().backward()
    loc = att.modifiers[0]
    for name in names:
        for p in getattr(loc, name).parameters() if name != "z" else [loc.z]:
            assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self"])
def test_low_precision_no_nan(dtype, kind):
    att = make_attention(kind, "localness[window=layer]").to(dtype)
    x = (torch.randn(T, B, C) * 4).to(dtype)
    mask = padding([T, 3, 0], T, left=True)  # the last sentence is only padding
    mask_arg = None if kind == "decoder_self" else mask
    with torch.no_grad():
        out, _ = att(x, x, x, key_padding_mask=mask_arg, need_weights=False)
        out_w, _ = att(x, x, x, key_padding_mask=mask_arg, need_weights=True)
        ref, _ = att.float()(x.float(), x.float(), x.float(), key_padding_mask=mask_arg)
    assert torch.isfinite(out).all() and torch.isfinite(out_w).all()
    real = ~mask.t() if kind == "encoder_self" else torch.ones(T, B, dtype=torch.bool)
    assert (out.float() - ref).abs()[real].max() < 0.25 * ref.abs().max()


def test_only_padding_and_narrow_window_no_nan():
    att = make_attention("encoder_self", "localness[window=head,d_floor=0.1]").train()
    with torch.no_grad():
        att.modifiers[0].z.fill_(-30.0)  # D at the floor: σ = 0.05
    x = torch.randn(T, 2, C)
    mask = padding([0, 5], T, left=False)
    out, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(p.grad).all() for p in att.parameters() if p.grad is not None)


def test_heads_option_limits_bias():
    att = make_attention("encoder_self", "localness[heads=2]")
    x = torch.randn(T, 1, C)
    with torch.no_grad():
        _, w = att(x, x, x, need_head_weights=True)
        plain = make_attention("encoder_self", "none")
        plain.load_state_dict(att.state_dict(), strict=False)
        _, w0 = plain(x, x, x, need_head_weights=True)
    torch.testing.assert_close(w[[0, 2, 3]], w0[[0, 2, 3]])
    assert not torch.allclose(w[1], w0[1])


# ---- parameter counts (Yang et al. 2018, Table 4) ----------------------------------------
# The paper prints totals rounded to 0.1M, so the true delta lies within ±0.1M of the
# difference of the printed totals; the exact formula is checked too. Rel_Pos follows the
# authors' code (tables in the 18 self- and cross-attention layers): with self-attention only
# (Shaw et al.), big "+ Localness + Rel_Pos" would be +3.298M, just outside the printed
# (3.3, 3.5)M.


def _row(table: str, row: str, size: str):
    return next(
        r
        for r in all_rows()
        if r.paper == "yang2018" and r.table == table and r.row == row and r.size == size
    )


@pytest.mark.parametrize(
    "row,size",
    [("+ Rel_Pos", "base"), ("+ Localness", "base"), ("+ Localness + Rel_Pos", "base"),
     ("+ Localness", "big"), ("+ Localness + Rel_Pos", "big")],
)  # fmt: skip
def test_table4_deltas_match_paper(row, size):
    base = _row("Table 4", "Transformer-Base" if size == "base" else "Transformer-Big", size)
    this = _row("Table 4", row, size)
    ours = (count_parameters(this.arch, this.args) - count_parameters(base.arch, base.args)) / 1e6
    paper = this.paper_params - base.paper_params
    assert abs(ours - paper) < 0.1, (row, size, ours, paper)


def test_exact_counts():
    base = count_parameters("localnmt_base")
    big = count_parameters("localnmt_big")
    # per layer: W_p (d×d + d), U_p and U_d (d×H + H each); three encoder layers
    assert count_parameters("yang2018_localness_base") - base == 3 * (512 * 513 + 2 * 8 * 513)
    assert count_parameters("yang2018_localness_big") - big == 3 * (1024 * 1025 + 2 * 16 * 1025)
    # rel_pos: w^K and w^V, (2·16+1) × 64 each, per layer and site
    rel = ("--encoder-attn-modifiers", "rel_pos", "--decoder-attn-modifiers", "rel_pos")
    assert count_parameters("localnmt_base", rel) - base == 12 * 2 * 33 * 64
    row = _row("Table 4", "+ Rel_Pos", "base")
    assert count_parameters(row.arch, row.args) - base == 18 * 2 * 33 * 64
