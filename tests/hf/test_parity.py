"""Each method family in a transformers layer gives the fairseq plugin's output (1e-5, float32).

For one site and spec, a tiny Marian model gets the method through :func:`localnmt.hf.apply`;
its last layer at that site is compared with the fairseq plugin's attention module
(:class:`~localnmt.attention.pipeline.LocalAttention` called as fairseq calls it: ``(T, B,
C)``, fairseq's masks) holding the same projections and method parameters, on the same
right-padded inputs.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from hf_models import randomise, tiny_model  # noqa: E402

import localnmt.hf  # noqa: E402
from localnmt.attention.layers import build_attention, causal_mask  # noqa: E402
from localnmt.attention.modifier import SpecError  # noqa: E402
from localnmt.hf.sites import attention_sites  # noqa: E402

HEADS = "prev1;next1;band2;global"
FAMILIES = [
    *[("encoder_self", f"localness[window={w}]") for w in ("fixed", "layer", "query", "head")],
    ("encoder_self", "rel_pos[clip=3]"),
    ("encoder_self", "csan_1d[window=3]"),
    ("encoder_self", "csan_2d[window=3,area_heads=3]"),
    ("encoder_self", "block"),
    ("encoder_self", "bi_direct"),
    ("encoder_self", "neighbor"),
    ("encoder_self", "local_hard"),
    ("encoder_self", f"local_heads[masks={HEADS}]"),
    ("encoder_self", f"local_heads_renorm[masks={HEADS}]"),
    ("encoder_self", "tied_qk[groups=2]"),
    ("encoder_self", "localness[layers=2,window=query,heads=1-2] + rel_pos[clip=2]"),
    *[("decoder_self", f"localness[window={w}]") for w in ("fixed", "layer", "query", "head")],
    ("decoder_self", "rel_pos[clip=3]"),
    ("decoder_self", "csan_1d[window=3]"),
    ("decoder_self", "neighbor"),
    ("decoder_self", "local_hard"),
    ("decoder_self", "local_heads[masks=prev1;prev2;band2;global]"),
    ("decoder_self", "tied_qk[groups=2]"),
    ("cross", "localness[window=query]"),
    ("cross", "rel_pos[clip=3]"),
    ("cross", "gmm[k=2]"),
    ("cross", "gmm[k=2,variant=norm]"),
    ("cross", "gmm[k=3,variant=synthesis]"),
    ("cross", "gmm[k=2,fusion=average,share=mean]"),
    ("cross", "gmm[k=1,fusion=gmm]"),
    ("cross", "hardcoded_gaussian"),
    ("cross", "tied_qk[groups=2]"),
]


def layer_pair(kind: str, spec: str):
    """The HF attention module of the last layer at ``kind`` and the fairseq plugin's module
    with the same parameters."""
    model = tiny_model()
    localnmt.hf.apply(model, **{kind: spec})
    site = [s for s in attention_sites(model) if s.kind == kind][-1]
    module = site.module
    randomise(module)
    fairseq_side = build_attention(kind, 16, 4, spec, layer=site.layer, num_layers=2,
                                   max_positions=64).eval()  # fmt: skip
    state = {k: v for k, v in module.state_dict().items() if not k.startswith("localnmt.")}
    state.update({k[len("localnmt."):]: v for k, v in module.state_dict().items()
                  if k.startswith("localnmt.")})  # fmt: skip
    fairseq_side.load_state_dict(state, strict=True)
    return model, module, fairseq_side


def inputs(kind: str):
    gen = torch.Generator().manual_seed(3)
    tq, tk = 7, 9
    x = torch.randn(3, tq, 16, generator=gen)
    memory = torch.randn(3, tk, 16, generator=gen)
    keys = memory if kind == "cross" else x
    lengths = torch.tensor([keys.size(1), keys.size(1) - 3, 2])
    pad = torch.arange(keys.size(1))[None, :] >= lengths[:, None]
    return x, memory, pad


@pytest.mark.parametrize("kind,spec", FAMILIES, ids=[f"{k}:{s}" for k, s in FAMILIES])
def test_layer_equals_fairseq_plugin(kind: str, spec: str) -> None:
    model, module, fairseq_side = layer_pair(kind, spec)
    x, memory, pad = inputs(kind)
    tq = x.size(1)
    tk = memory.size(1) if kind == "cross" else tq
    allowed = ~pad[:, None, None, :]  # transformers' 4-D mask: True = attend
    attn_mask = None
    if kind == "decoder_self":
        allowed = allowed & ~causal_mask(tq, tk)
        attn_mask = torch.zeros(tq, tk).masked_fill(causal_mask(tq, tk), float("-inf"))
    memory_t = memory.transpose(0, 1) if kind == "cross" else None
    with torch.no_grad():
        ours = module(
            x, key_value_states=memory if kind == "cross" else None, attention_mask=allowed
        )[0]  # (out, weights[, cache]): by version
        theirs, _ = fairseq_side(x.transpose(0, 1), memory_t, memory_t, key_padding_mask=pad,
                                 attn_mask=attn_mask, need_weights=False)  # fmt: skip
    theirs = theirs.transpose(0, 1)
    real = ~pad if kind != "cross" else torch.ones(x.shape[:2], dtype=torch.bool)
    diff = (ours - theirs)[real].abs().max().item()
    assert diff <= 1e-5, f"{kind} {spec}: max |Δ| = {diff:.2e}"
    assert ours.abs().max() > 0.1  # the layer computed something


def test_the_methods_change_the_layer() -> None:
    """The comparison can fail: the same layer without its method differs."""
    _, module, _ = layer_pair("encoder_self", "localness[window=query]")
    x, _, pad = inputs("encoder_self")
    allowed = ~pad[:, None, None, :]
    with torch.no_grad():
        with_method = module(x, attention_mask=allowed)[0]
        method = module.localnmt
        del module.localnmt
        without = module(x, attention_mask=allowed)[0]
        module.localnmt = method
    assert (with_method - without)[~pad].abs().max() > 1e-3


def test_layers_option_attaches_only_those_layers() -> None:
    model = tiny_model()
    localnmt.hf.apply(model, encoder_self="localness[layers=2]", cross="gmm[k=2]")
    attached = {(s.kind, s.layer) for s in attention_sites(model) if hasattr(s.module, "localnmt")}
    assert attached == {("encoder_self", 1), ("cross", 0), ("cross", 1)}


def test_bad_spec_is_one_error_before_any_change() -> None:
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(SpecError, match="does not apply to cross attention"):
        localnmt.hf.apply(model, encoder_self="localness", cross="block")
    assert model.state_dict().keys() == before.keys()
    assert model.config._attn_implementation != "localnmt"
    with pytest.raises(SpecError, match="layers=3 is out of range"):
        localnmt.hf.apply(model, encoder_self="localness[layers=3]")
