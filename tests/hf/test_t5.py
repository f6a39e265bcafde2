"""T5, mT5 and UMT5 with localnmt methods: the relative position bias and T5's unscaled logits
come through the pipeline, padding, generation with and without the cache, gradients, saving
and loading; one line where the installed transformers computes T5's attention itself."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_models import (  # noqa: E402
    PAD,
    T5_FAMILIES,
    TARGETS,
    assert_cache_changes_nothing,
    assert_padding_does_not_change_real_tokens,
    assert_saved_and_loaded_alike,
    randomise,
    source_batch,
    tiny_t5,
)

import localnmt.hf  # noqa: E402
from localnmt.attention.modifier import SpecError  # noqa: E402
from localnmt.hf.sites import attention_sites  # noqa: E402
from localnmt.hf.versions import T5_DISPATCH, check_t5_version, release  # noqa: E402

DISPATCHED = release(transformers.__version__) >= release(T5_DISPATCH)
needs_dispatch = pytest.mark.skipif(
    not DISPATCHED,
    reason=f"transformers {transformers.__version__} computes T5's attention in the layer "
    f"(T5 dispatches through AttentionInterface from {T5_DISPATCH} on)",
)

SPECS = {
    "encoder_self": "localness[window=query] + rel_pos[clip=3] + block",
    "decoder_self": "csan_1d[window=3] + rel_pos[clip=3]",
    "cross": "gmm[k=2,variant=synthesis] + rel_pos[clip=3]",
}
HEADS = "prev1;next1;band2;global"
#: at least one of every family each site takes (csan_2d: refused, see below)
METHODS = [
    *[("encoder_self", f"localness[window={w}]") for w in ("fixed", "layer", "query", "head")],
    ("encoder_self", "rel_pos[clip=3]"),
    ("encoder_self", "csan_1d[window=3]"),
    ("encoder_self", "block"),
    ("encoder_self", "bi_direct"),
    ("encoder_self", "neighbor"),
    ("encoder_self", "local_hard"),
    ("encoder_self", f"local_heads[masks={HEADS}]"),
    ("encoder_self", f"local_heads_renorm[masks={HEADS}]"),
    ("encoder_self", "tied_qk[groups=2]"),
    ("decoder_self", "localness[window=query]"),
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
    ("cross", "hardcoded_gaussian"),
    ("cross", "tied_qk[groups=2]"),
]


def local_t5(specs: dict[str, str] = SPECS, family: str = "t5", seed: int = 0, **sizes):
    model = tiny_t5(family, seed=seed, **sizes)
    localnmt.hf.apply(model, **specs)
    randomise(model, seed)
    return model


def labels_of(targets: torch.Tensor) -> torch.Tensor:
    return targets[:, 1:].masked_fill(targets[:, 1:].eq(PAD), -100)


# ---- where T5 does not dispatch: one line --------------------------------------------------


@pytest.mark.skipif(DISPATCHED, reason=f"transformers {transformers.__version__} dispatches T5")
@pytest.mark.parametrize("family", T5_FAMILIES)
def test_t5_on_a_transformers_that_does_not_dispatch_it_is_one_error(family: str) -> None:
    model = tiny_t5(family)
    with pytest.raises(SpecError, match=f"found transformers {transformers.__version__}") as err:
        localnmt.hf.apply(model, encoder_self="localness")
    assert "\n" not in str(err.value) and T5_DISPATCH in str(err.value)
    assert model.config._attn_implementation != "localnmt"


@pytest.mark.parametrize("version", ["4.53.0", "4.57.6", "5.0.0", "5.14.1"])
def test_t5_version_check_refuses_releases_before_dispatch(version: str) -> None:
    with pytest.raises(SpecError, match=f"from transformers {T5_DISPATCH} on, found "
                                        f"transformers {version}") as err:  # fmt: skip
        check_t5_version(version, "mt5")
    assert "\n" not in str(err.value) and "mt5" in str(err.value)


@pytest.mark.parametrize("version", ["5.15.0", "5.24.0", "5.99.1.dev0"])
def test_t5_version_check_passes_releases_that_dispatch(version: str) -> None:
    check_t5_version(version)


def test_longt5_is_refused_in_one_line() -> None:
    from transformers import LongT5Config, LongT5ForConditionalGeneration

    config = LongT5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4)
    with pytest.raises(SpecError, match="longt5: its encoder runs local") as err:
        localnmt.hf.apply(LongT5ForConditionalGeneration(config), encoder_self="localness")
    assert "\n" not in str(err.value)


# ---- where it does ---------------------------------------------------------------------------


@needs_dispatch
def test_sites_tell_self_cross_and_causal_apart() -> None:
    sites = attention_sites(tiny_t5())
    paths = {(s.kind, s.layer): s.path for s in sites}
    assert paths == {
        ("encoder_self", 0): "encoder.block.0.layer.0.SelfAttention",
        ("encoder_self", 1): "encoder.block.1.layer.0.SelfAttention",
        ("decoder_self", 0): "decoder.block.0.layer.0.SelfAttention",
        ("decoder_self", 1): "decoder.block.1.layer.0.SelfAttention",
        ("cross", 0): "decoder.block.0.layer.1.EncDecAttention",
        ("cross", 1): "decoder.block.1.layer.1.EncDecAttention",
    }
    model = localnmt.hf.apply(tiny_t5(), **SPECS)
    assert {s.kind: s.module.localnmt.site.causal for s in attention_sites(model)} == {
        "encoder_self": False, "decoder_self": True, "cross": False,
    }  # fmt: skip


@needs_dispatch
def test_pipeline_without_an_effect_equals_t5_eager_with_its_bias_and_scale() -> None:
    """rel_pos with zero tables at every layer of every site runs each attention through the
    pipeline and changes nothing: logits and every gradient (T5's relative bias included) are
    transformers' eager T5's, with padding and the decoder's causal mask."""
    model = local_t5({kind: "rel_pos[clip=3]" for kind in SPECS})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".localnmt." in name:
                p.zero_()
    eager = tiny_t5()
    eager.load_state_dict({k: v for k, v in model.state_dict().items() if ".localnmt." not in k})
    eager.set_attn_implementation("eager")
    ids, mask = source_batch()
    dec_mask = TARGETS.ne(PAD).long()
    dec_mask[:, 0] = 1
    logits, grads = [], []
    for m in (model, eager):
        out = m(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS,
                decoder_attention_mask=dec_mask)  # fmt: skip
        m.zero_grad()
        weights = torch.linspace(-1, 1, out.logits.numel()).view_as(out.logits)
        (out.logits * weights).sum().backward()
        logits.append(out.logits.detach())
        grads.append({n: p.grad for n, p in m.named_parameters() if ".localnmt." not in n})
    ran = [s.path for s in attention_sites(model)
           if s.module.__dict__.get("_localnmt_call", (None,))[0] is not None]  # fmt: skip
    assert not ran, f"the pre-hook ran but the localnmt attention did not: {ran}"
    real = dec_mask.bool()
    assert (logits[0] - logits[1])[real].abs().max() <= 1e-5
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[1].items():
        assert (grads[0][name] - grad).abs().max() <= 1e-5, name
    bias = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    assert grads[0][bias].abs().sum() > 0
    # the comparison can fail: without T5's relative bias the model differs
    with torch.no_grad():
        for m in (model, eager):
            for name, p in m.named_parameters():
                if "relative_attention_bias" in name:
                    p.zero_()
        changed = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
    assert (changed - logits[0])[real].abs().max() > 1e-3


@needs_dispatch
def test_every_stack_switches_to_the_localnmt_attention() -> None:
    """T5's encoder and decoder stacks hold copies of the config, which transformers 5.15.0's
    set_attn_implementation passes over: each attention layer must read ``localnmt``."""
    model = localnmt.hf.apply(tiny_t5(), encoder_self="localness")
    configs = {s.path: s.module.config._attn_implementation for s in attention_sites(model)}
    assert set(configs.values()) == {"localnmt"}, configs


@needs_dispatch
def test_padding_does_not_change_real_tokens() -> None:
    assert_padding_does_not_change_real_tokens(local_t5())


@needs_dispatch
@pytest.mark.parametrize("beams", [1, 3])
def test_generate_with_cache_equals_without(beams: int) -> None:
    assert_cache_changes_nothing(local_t5(), beams)


@needs_dispatch
def test_generate_cache_equals_teacher_forcing() -> None:
    model = local_t5()
    ids, mask = source_batch()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                         output_scores=True, return_dict_in_generate=True)  # fmt: skip
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=out.sequences).logits
    steps = torch.stack(out.scores, dim=1)
    live = out.sequences[:, 1:].ne(PAD) | (torch.arange(steps.size(1)) == 0)
    diff = (steps.log_softmax(-1) - full[:, :-1].log_softmax(-1))[live].abs().max().item()
    assert diff <= 1e-4


@needs_dispatch
def test_gradients_reach_every_attached_parameter_and_the_relative_bias() -> None:
    model = local_t5()
    model.train()
    ids, mask = source_batch()
    loss = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS[:, :-1],
                 labels=labels_of(TARGETS)).loss  # fmt: skip
    loss.backward()
    attached = [(n, p) for n, p in model.named_parameters() if ".localnmt." in n]
    biases = [(n, p) for n, p in model.named_parameters() if "relative_attention_bias" in n]
    assert len(attached) > 20 and len(biases) == 2
    dead = [n for n, p in attached + biases if p.grad is None or not p.grad.abs().sum() > 0]
    assert not dead, dead


@needs_dispatch
def test_save_and_from_pretrained_restore_the_same_model(tmp_path) -> None:
    specs = {**SPECS, "encoder_self": "tied_qk[groups=2] + localness"}
    loaded = assert_saved_and_loaded_alike(local_t5(specs), tmp_path)
    assert loaded.config.localnmt == specs


@needs_dispatch
@pytest.mark.parametrize("kind,spec", METHODS, ids=[f"{k}:{s}" for k, s in METHODS])
def test_each_method_keeps_padding_and_cache_exact(kind: str, spec: str) -> None:
    model = local_t5({kind: spec})
    assert any(hasattr(s.module, "localnmt") for s in attention_sites(model) if s.kind == kind)
    assert_padding_does_not_change_real_tokens(model)
    assert_cache_changes_nothing(model, beams=2)


@needs_dispatch
def test_a_method_changes_the_t5_model() -> None:
    """The per-method checks can fail: the method changes the model's outputs."""
    ids, mask = source_batch()
    plain = tiny_t5()
    randomise(plain, 0)
    model = tiny_t5()
    localnmt.hf.apply(model, encoder_self="localness[window=query]")
    model.load_state_dict(plain.state_dict(), strict=False)
    with torch.no_grad():
        a = plain(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
        b = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
    assert (a - b).abs().max() > 1e-3


@needs_dispatch
@pytest.mark.parametrize("family", ["mt5", "umt5"])
def test_other_t5_families(family: str) -> None:
    model = local_t5(family=family)
    assert sum(".localnmt." in n for n, _ in model.named_parameters()) > 20
    assert_padding_does_not_change_real_tokens(model)
    assert_cache_changes_nothing(model, beams=2)


@needs_dispatch
def test_heads_narrower_than_the_model() -> None:
    """mT5-small's shape (d_model 512, 6 heads of 64): methods on the heads work; methods
    that read the layer input or replace a projection are one line each."""
    specs = {"encoder_self": "localness[window=query] + rel_pos[clip=3]",
             "decoder_self": "neighbor", "cross": "gmm[k=2]"}  # fmt: skip
    model = local_t5(specs, d_kv=6)
    assert model.encoder.block[0].layer[0].SelfAttention.inner_dim == 24
    assert_padding_does_not_change_real_tokens(model)
    assert_cache_changes_nothing(model, beams=2)
    refused = [("encoder_self", "block", "reads the layer input"),
               ("cross", "tied_qk[groups=2]", "replaces q by a narrower")]  # fmt: skip
    for kind, spec, what in refused:
        with pytest.raises(SpecError, match=what) as err:
            localnmt.hf.apply(tiny_t5(d_kv=6), **{kind: spec})
        assert "\n" not in str(err.value)


@needs_dispatch
@pytest.mark.parametrize(
    "family,spec,what",
    [("t5", "csan_2d[window=3,area_heads=3]", "stacks neighbouring heads' keys"),
     ("umt5", "tied_qk[groups=2]", "replaces q by a narrower projection")],
)  # fmt: skip
def test_methods_a_t5_layer_cannot_carry_are_one_error(family: str, spec: str, what: str) -> None:
    model = tiny_t5(family)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(SpecError, match=what) as err:
        localnmt.hf.apply(model, encoder_self=spec)
    assert "\n" not in str(err.value)
    assert model.state_dict().keys() == before.keys()
    assert model.config._attn_implementation != "localnmt"
