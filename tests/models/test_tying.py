"""Pande et al. 2021 §4.2: Wq/Wk tied inside a layer (tied_qk) and across layers (tying.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from fairseq import checkpoint_utils, options
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY

from localnmt import testing
from localnmt.attention import LocalAttention, SpecError
from localnmt.attention.context import AttentionSite
from localnmt.attention.spec import build_modifiers, parse_spec

E, H, B, T = 16, 8, 3, 6
SMALL = [
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
]  # fmt: skip


def make(spec: str, kind: str = "encoder_self") -> LocalAttention:
    torch.manual_seed(0)
    site = AttentionSite(kind, 0, 1, E, H)
    return LocalAttention(
        E, H, site=site, modifiers=build_modifiers(parse_spec(spec), site), self_attention=True
    )


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("side", ["left", "right"])
def test_tied_heads_match_plain_restatement(groups, side):
    attn = make(f"tied_qk[groups={groups}]")
    d = E // H
    assert attn.q_proj.weight.shape == (groups * d, E) == attn.k_proj.weight.shape
    x = torch.randn(T, B, E)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, :2] = True if side == "left" else False
    pad[1, -2:] = side == "right"
    out, _ = attn(x, x, x, key_padding_mask=pad)
    # eq. 4 with Wq_h = Wq_g(h), Wk_h = Wk_g(h): group g = h // (H / G)
    q = (x @ attn.q_proj.weight.T + attn.q_proj.bias).view(T, B, groups, d)
    k = (x @ attn.k_proj.weight.T + attn.k_proj.bias).view(T, B, groups, d)
    v = (x @ attn.v_proj.weight.T + attn.v_proj.bias).view(T, B, H, d)
    heads = []
    for h in range(H):
        g = h // (H // groups)
        logits = torch.einsum("ibd,jbd->bij", q[:, :, g], k[:, :, g]) / d**0.5
        alpha = torch.softmax(logits.masked_fill(pad[:, None, :], float("-inf")), -1)
        heads.append(torch.einsum("bij,jbd->ibd", alpha, v[:, :, h]))
    ref = torch.cat(heads, -1) @ attn.out_proj.weight.T + attn.out_proj.bias
    real = ~pad.T[:, :, None]
    torch.testing.assert_close(out * real, ref * real, atol=1e-5, rtol=1e-5)


def test_tied_heads_share_storage_and_gradients():
    attn = make("tied_qk[groups=2] + local_heads[masks=identity;band2;prev1;next1*5]")
    x = torch.randn(T, B, E)
    attn.recording = True
    _, w = attn(x, x, x, need_head_weights=True)
    logits = attn.last_record.logits
    torch.testing.assert_close(logits[:, 0], logits[:, 3])  # one map α_g for heads 1-4
    torch.testing.assert_close(logits[:, 4], logits[:, 7])
    # two heads of one group each send gradient into the same rows of the one stored Wq
    d = E // H
    grads = []
    for head in (0, 1):
        attn.zero_grad()
        out = attn(x, x, x, need_head_weights=True)[1][head].sum()
        out.backward()
        grads.append(attn.q_proj.weight.grad.clone())
    for g in grads:
        assert g[:d].abs().sum() > 0 and g[d:].abs().sum() == 0
    assert len({p.data_ptr() for p in attn.parameters()}) == len(list(attn.parameters()))


def test_tied_validation():
    with pytest.raises(SpecError, match="must divide"):
        make("tied_qk[groups=3]")
    with pytest.raises(SpecError, match="no heads= option"):
        make("tied_qk[heads=1-2,groups=1]")


def build(arch: str, *extra: str):
    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(
        parser, ["/nonexistent", "--arch", arch, "--share-all-embeddings", *SMALL, *extra]
    )
    d = Dictionary()
    for i in range(20):
        d.add_symbol(f"w{i}")
    task = SimpleNamespace(source_dictionary=d, target_dictionary=d)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(ns, task), d


def test_cross_layer_tying_shares_parameter_objects():
    model, d = build("pande2021_half_tied")
    layers = model.encoder.layers
    for i in (1, 2):
        for name in ("q_proj", "k_proj"):
            a, b = getattr(layers[0].self_attn, name), getattr(layers[i].self_attn, name)
            assert a.weight is b.weight and a.weight.data_ptr() == b.weight.data_ptr()
        assert layers[0].self_attn.v_proj.weight is not layers[i].self_attn.v_proj.weight
    assert layers[0].self_attn.q_proj.weight is not layers[3].self_attn.q_proj.weight
    tokens = torch.randint(4, len(d), (2, 7))
    out = model(tokens, torch.tensor([7, 7]), tokens)[0]
    out.sum().backward()
    assert layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0


def test_tie_params_flag_and_errors():
    model, _ = build("pande2021_fully_tied", "--encoder-tie-attn-params", "q;k;v;out")
    layers = model.encoder.layers
    assert all(layer.self_attn.out_proj is layers[0].self_attn.out_proj for layer in layers)
    with pytest.raises(SpecError, match="valid: q, k, v, out"):
        build("pande2021_fully_tied", "--encoder-tie-attn-params", "q;w")
    with pytest.raises(SpecError, match="shapes"):  # tied_qk in layers 1-3 only
        build("pande2021_1lochead_7tiedloc_first3", "--encoder-tie-attn-layers", "3-4")


def test_model_level_incremental_decoding_equals_full():
    spec = "local_heads[masks=prev1;identity;band1;global*5] + tied_qk[groups=4]"
    model, d = build("pande2021_fully_tied", "--decoder-attn-modifiers", spec)
    model.eval()
    src = torch.randint(4, len(d), (2, 6))
    src[1, :2] = d.pad()  # left-padded source
    lengths = torch.tensor([6, 4])
    prev = torch.randint(4, len(d), (2, 5))
    enc = model.encoder(src, lengths)
    full = model.decoder(prev, encoder_out=enc)[0]
    state: dict = {}
    steps = [
        model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0]
        for t in range(prev.size(1))
    ]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_checkpoint_round_trip_keeps_tying(tiny_data, tmp_path):
    result = testing.train(
        tiny_data, tmp_path / "ckpt", "pande2021_fully_tied", max_update=2,
        extra=["--encoder-layers", "3", "--decoder-layers", "1", "--encoder-attention-heads", "8"],
    )  # fmt: skip
    models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task(
        [str(result.checkpoint)], arg_overrides={"data": str(tiny_data)}
    )
    layers = models[0].encoder.layers
    assert all(
        layer.self_attn.k_proj.weight is layers[0].self_attn.k_proj.weight for layer in layers
    )
    state = torch.load(result.checkpoint, weights_only=False)["model"]
    torch.testing.assert_close(
        state["encoder.layers.0.self_attn.q_proj.weight"],
        state["encoder.layers.2.self_attn.q_proj.weight"],
    )
    torch.testing.assert_close(
        layers[2].self_attn.q_proj.weight, state["encoder.layers.0.self_attn.q_proj.weight"]
    )
