"""Relative positions (Shaw et al. 2018) against a plain re-statement of its eqs. 3–5, alone and
combined with localness; incremental decoding at module and model level."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing
from helpers.attention import RecordingDropout

from localnmt import torch_compat
from localnmt.attention import AttentionSite, LocalAttention, dispatch
from localnmt.attention.methods.localness import LocalnessRecord
from localnmt.attention.spec import build_modifiers, parse_spec

C, H, T, B = 16, 4, 9, 3


def make_attention(kind: str, spec: str, seed: int = 0) -> LocalAttention:
    """Self-attention at ``kind``, random biases so that every term matters, eval mode."""
    return testing.make_attention(kind, spec, embed_dim=C, heads=H, seed=seed,
                                  self_attention=True, random_biases=True)  # fmt: skip


linear = testing.linear


def plain_rel_pos(att, x, clip, *, causal=False, localness=None, dropped=None):
    """Shaw et al. eqs. 3–5 for one unpadded sentence x (T, C); optional Gaussian bias G (H,T,T);
    ``dropped(h, α)``: attention dropout, one mask for both terms of eq. 3."""
    rel = next(m for m in att.modifiers if m.name == "rel_pos")
    d = C // H
    q, k, v = (linear(p, x) for p in (att.q_proj, att.k_proj, att.v_proj))
    n = x.size(0)
    out = []
    for h in range(H):
        sl = slice(h * d, (h + 1) * d)
        e = torch.empty(n, n)
        for i in range(n):
            for j in range(n):
                a_k = rel.rel_key.weight[max(-clip, min(clip, j - i)) + clip]
                e[i, j] = q[i, sl] @ (k[j, sl] + a_k) / math.sqrt(d)  # eq. 4
        if localness is not None:
            e = e + localness[h]
        if causal:
            e = e.masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
        alpha = torch.softmax(e, -1)
        if dropped is not None:
            alpha = dropped(h, alpha)
        z = torch.zeros(n, d)
        for i in range(n):
            for j in range(n):
                a_v = rel.rel_value.weight[max(-clip, min(clip, j - i)) + clip]
                z[i] += alpha[i, j] * (v[j, sl] + a_v)  # eq. 3
        out.append(z)
    return linear(att.out_proj, torch.cat(out, -1))


def padding(lengths: list[int], total: int, left: bool) -> torch.Tensor:
    return testing.padding_mask(lengths, total, "left" if left else "right")


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("clip", [0, 2, 16])
def test_encoder_matches_plain_equations(left, clip):
    att = make_attention("encoder_self", f"rel_pos[clip={clip}]")
    lengths = [T, 5, 1]
    mask = padding(lengths, T, left)
    x = torch.randn(T, B, C)
    with torch.no_grad():
        out, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
        for b in range(B):
            real = (~mask[b]).nonzero().squeeze(1)
            ref = plain_rel_pos(att, x[real, b], clip)
            torch.testing.assert_close(out[real, b], ref, atol=2e-5, rtol=1e-4)


def test_attention_dropout_is_one_mask_for_both_terms_of_eq_3():
    """With attention dropout, α·v and α·a^V use the same dropped α (eq. 3 has one α):
    the dropout runs once per call, and the output is eq. 3 with that mask."""
    att = make_attention("encoder_self", "rel_pos[clip=2]").train()  # dropout in training
    att.dropout_module = dropout = RecordingDropout(0.4)
    mask = padding([T, 5, 1], T, left=True)
    x = torch.randn(T, B, C)
    with torch.no_grad():
        out, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
        (keep,) = dropout.masks  # (B, H, T, T)
        for b in range(B):
            real = (~mask[b]).nonzero().squeeze(1)
            kept = keep[b][:, real][:, :, real] / 0.6
            ref = plain_rel_pos(att, x[real, b], 2, dropped=lambda h, a, kept=kept: a * kept[h])
            torch.testing.assert_close(out[real, b], ref, atol=2e-5, rtol=1e-4)


def test_combined_with_localness():
    att = make_attention("encoder_self", "localness[window=query] + rel_pos[clip=3]")
    x = torch.randn(6, 1, C)
    with torch.no_grad():
        att.recording = True
        out, _ = att(x, x, x)
        rec = att.last_record
        j = torch.arange(6.0)
        scope = rec.get(LocalnessRecord)
        p, d = scope.center[0], scope.window[0]  # (H, T)
        g = -((j[None, None, :] - p[:, :, None]) ** 2) / (2 * (d[:, :, None] / 2) ** 2)
        ref = plain_rel_pos(att, x[:, 0], 3, localness=g)
    torch.testing.assert_close(out[:, 0], ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("spec", ["rel_pos[clip=2]", "localness[window=layer] + rel_pos[clip=3]"])
def test_decoder_incremental_equals_full(spec):
    att = make_attention("decoder_self", spec)
    x = torch.randn(T, 2, C)
    future = torch.full((T, T), float("-inf")).triu(1)
    with torch.no_grad():
        full, _ = att(x, x, x, attn_mask=future, need_weights=False)
        if "localness" not in spec:
            for b in range(2):
                ref = plain_rel_pos(att, x[:, b], 2, causal=True)
                torch.testing.assert_close(full[:, b], ref, atol=2e-5, rtol=1e-4)
        state: dict = {}
        steps = [att(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state)[0]
                 for t in range(T)]  # fmt: skip
    torch.testing.assert_close(torch.cat(steps), full, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["decoder_self", "cross"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_decoding_step_folds_the_tables_into_keys_and_values(kind, side):
    """One query per row without gradients: eqs. 3–4 as attention over k_j + a^K_ij and
    v_j + a^V_ij on a fused kernel; the same output as the dense path (weights asked), which
    keeps the bias and the value term, at every step, with padded keys (cross) or not."""
    att = testing.make_attention(kind, "rel_pos[clip=2]", embed_dim=C, heads=H,
                                 self_attention=kind != "cross", random_biases=True)  # fmt: skip
    x, mem = torch.randn(T, B, C), torch.randn(T + 2, B, C)
    pad = testing.padding_mask((T + 2, T, 4), T + 2, side) if kind == "cross" else None
    with torch.no_grad():
        for name, need_weights in (("kernel", False), ("dense", True)):
            state: dict = {}
            outs = []
            with dispatch.trace() as seen:
                for t in range(T):
                    step = x[t : t + 1]
                    keys = mem if kind == "cross" else step
                    out, _ = att(step, keys, keys, key_padding_mask=pad, incremental_state=state,
                                 static_kv=kind == "cross", need_weights=need_weights)  # fmt: skip
                    outs.append(out)
            ran = set(seen.kernels())
            assert ("dense" in ran) == (name == "dense"), ran
            if name == "kernel":
                fast = torch.cat(outs)
    torch.testing.assert_close(fast, torch.cat(outs), atol=2e-6, rtol=1e-5)
    with torch.enable_grad():  # training keeps the dense path (one dropout mask for eq. 3)
        with dispatch.trace() as seen:
            att(x[:1], x[:1], x[:1]) if kind != "cross" else att(x[:1], mem, mem, pad)
    assert seen.kernels() == ["dense"]


def test_gradients_and_low_precision():
    att = make_attention("encoder_self", "rel_pos[clip=4]").train()
    x = torch.randn(T, B, C)
    mask = padding([T, 3, 0], T, left=True)  # the last sentence is only padding
    out, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
    out.pow(2).sum().backward()
    rel = att.modifiers[0]
    assert rel.rel_key.weight.grad.abs().sum() > 0
    assert rel.rel_value.weight.grad.abs().sum() > 0
    assert torch.isfinite(out).all()
    for dtype in (torch.bfloat16, torch.float16):
        if not torch_compat.cpu_supports(dtype):
            continue  # older torch: no CPU float16 matmul
        low = make_attention("encoder_self", "rel_pos[clip=4]").to(dtype)
        with torch.no_grad():
            out_low, _ = low(x.to(dtype), x.to(dtype), x.to(dtype), key_padding_mask=mask)
        assert torch.isfinite(out_low).all()


@pytest.mark.parametrize("left", [True, False])
def test_cross_attention_plain_and_incremental(left):
    """Authors' variant: distance between source position j and target step i."""
    torch.manual_seed(0)
    site = AttentionSite("cross", 0, num_layers=1, embed_dim=C, num_heads=H)
    mods = build_modifiers(parse_spec("rel_pos[clip=2]"), site)
    att = LocalAttention(C, H, site=site, modifiers=mods, encoder_decoder_attention=True).eval()
    mask = padding([T, 4], T, left)
    mem, x = torch.randn(T, 2, C), torch.randn(5, 2, C)
    rel = att.modifiers[0]
    d = C // H
    with torch.no_grad():
        full, _ = att(x, mem, mem, key_padding_mask=mask, static_kv=True, need_weights=False)
        state: dict = {}
        steps = [
            att(x[t : t + 1], mem, mem, key_padding_mask=mask, incremental_state=state,
                static_kv=True)[0]
            for t in range(5)
        ]  # fmt: skip
        for b in range(2):
            real = (~mask[b]).nonzero().squeeze(1)
            q = linear(att.q_proj, x[:, b])
            k, v = linear(att.k_proj, mem[real, b]), linear(att.v_proj, mem[real, b])
            heads = []
            for h in range(H):
                sl = slice(h * d, (h + 1) * d)
                e = torch.empty(5, len(real))
                for i in range(5):
                    for j in range(len(real)):
                        a_k = rel.rel_key.weight[max(-2, min(2, j - i)) + 2]
                        e[i, j] = q[i, sl] @ (k[j, sl] + a_k) / math.sqrt(d)
                alpha = torch.softmax(e, -1)
                z = alpha @ v[:, sl]
                for i in range(5):
                    for j in range(len(real)):
                        z[i] += alpha[i, j] * rel.rel_value.weight[max(-2, min(2, j - i)) + 2]
                heads.append(z)
            ref = linear(att.out_proj, torch.cat(heads, -1))
            torch.testing.assert_close(full[:, b], ref, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(torch.cat(steps), full, atol=2e-5, rtol=1e-4)


def _tiny_model(decoder_spec: str):
    """A real localnmt_transformer (tiny sizes) with ``decoder_spec`` in decoder self-attention."""
    from types import SimpleNamespace

    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_REGISTRY

    d = Dictionary()
    for i in range(20):
        d.add_symbol(f"w{i}")
    argv = ["/x", "--arch", "localnmt_tiny", "--share-all-embeddings", "--dropout", "0",
            "--decoder-attn-modifiers", decoder_spec,
            "--encoder-attn-modifiers", "localness[layers=1] + rel_pos",
            "--cross-attn-modifiers", "localness[window=head] + rel_pos[clip=2]"]  # fmt: skip
    ns = options.parse_args_and_arch(options.get_training_parser(), argv)
    task = SimpleNamespace(source_dictionary=d, target_dictionary=d)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY["localnmt_tiny"].build_model(ns, task).eval(), d


def test_model_level_incremental_decoding_equals_full():
    model, d = _tiny_model("localness[window=query] + rel_pos[clip=3]")
    torch.manual_seed(1)
    src = torch.randint(4, len(d), (2, 7))
    src[1, :3] = d.pad()  # left-padded source, as fairseq batches it
    src_lengths = (src != d.pad()).sum(1)
    prev = torch.randint(4, len(d), (2, 6))
    prev[:, 0] = d.eos()
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=src_lengths)
        full, _ = model.decoder(prev, encoder_out=enc)
        state: dict = {}
        steps = [
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0]
            for t in range(prev.size(1))
        ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-4, rtol=1e-4)
