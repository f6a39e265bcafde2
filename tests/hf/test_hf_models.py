"""Whole transformers models with localnmt methods: padding, generation with and without the
cache, gradients, saving and loading, training (Seq2SeqTrainer and a plain loop), families."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")

from hf_models import (  # noqa: E402
    PAD,
    TARGETS,
    assert_cache_changes_nothing,
    assert_padding_does_not_change_real_tokens,
    assert_saved_and_loaded_alike,
    randomise,
    source_batch,
    tiny_config,
    tiny_model,
)

import localnmt.hf  # noqa: E402
from localnmt.hf.versions import TransformersVersionError, check_version  # noqa: E402

#: every site busy, methods with learned parameters, layer input (block) and decoding state
#: (GMM synthesis keeps its cumulative means across steps)
SPECS = {
    "encoder_self": "localness[window=query] + rel_pos[clip=3] + block",
    "decoder_self": "csan_1d[window=3] + rel_pos[clip=3]",
    "cross": "gmm[k=2,variant=synthesis] + rel_pos[clip=3]",
}


def local_model(family: str = "marian", specs: dict[str, str] = SPECS, seed: int = 0):
    model = tiny_model(family, seed=seed)
    localnmt.hf.apply(model, **specs)
    randomise(model, seed)
    return model


def test_padding_does_not_change_real_tokens() -> None:
    assert_padding_does_not_change_real_tokens(local_model())


@pytest.mark.parametrize("beams", [1, 3])
def test_generate_with_cache_equals_without(beams: int) -> None:
    assert_cache_changes_nothing(local_model(), beams)


def test_generate_cache_equals_teacher_forcing() -> None:
    """The cached greedy path scores each generated token as one full forward does."""
    model = local_model()
    ids, mask = source_batch()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                         output_scores=True, return_dict_in_generate=True)  # fmt: skip
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=out.sequences).logits
    steps = torch.stack(out.scores, dim=1)  # (B, steps, V)
    live = out.sequences[:, 1:].ne(PAD) | (torch.arange(steps.size(1)) == 0)
    diff = (steps.log_softmax(-1) - full[:, :-1].log_softmax(-1))[live].abs().max().item()
    assert diff <= 1e-4


def test_gradients_reach_every_attached_parameter() -> None:
    model = local_model()
    model.train()
    ids, mask = source_batch()
    labels = TARGETS[:, 1:].masked_fill(TARGETS[:, 1:].eq(PAD), -100)
    loss = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS[:, :-1],
                 labels=labels).loss  # fmt: skip
    loss.backward()
    attached = [(n, p) for n, p in model.named_parameters() if ".localnmt." in n]
    assert len(attached) > 20
    dead = [n for n, p in attached if p.grad is None or not p.grad.abs().sum() > 0]
    assert not dead, dead


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    """transformers' gradient checkpointing runs each layer's forward again in backward (the
    pre-hook's layer input and the cross-attention's state with it): every gradient as
    without it (to float32 rounding: transformers 4.53's checkpointing moves a plain Marian
    model's gradients by ~3e-8 too; 5.x gives them bit for bit)."""
    ids, mask = source_batch()
    labels = TARGETS[:, 1:].masked_fill(TARGETS[:, 1:].eq(PAD), -100)
    grads = []
    for checkpointing in (False, True):
        model = local_model()
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS[:, :-1],
              labels=labels).loss.backward()  # fmt: skip
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 20
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_only_layers_that_read_the_input_or_the_cache_carry_the_pre_hook() -> None:
    """The pre-hook keeps the layer input (BLOCK's gate) and the decoding cache
    (cross-attention's state); a self-attention layer that reads neither runs without a hook,
    and gives the same numbers as with one. The dispatch check is one hook on the encoder
    and one on the decoder."""
    from localnmt.hf.attention import check_dispatch, remember_call
    from localnmt.hf.sites import attention_sites

    model = local_model()
    hooked = {s.kind: list(s.module._forward_pre_hooks.values()) == [remember_call]
              for s in attention_sites(model)}  # fmt: skip
    assert hooked == {"encoder_self": True, "decoder_self": False, "cross": True}
    assert not any(s.module._forward_pre_hooks for s in attention_sites(model)
                   if s.kind == "decoder_self")  # fmt: skip
    for stack in (model.get_encoder(), model.get_decoder()):
        assert list(stack._forward_pre_hooks.values()) == [check_dispatch]
    assert not model._forward_pre_hooks
    ids, mask = source_batch()
    model.eval()
    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
        for site in attention_sites(model):
            if site.kind == "decoder_self":
                site.module.register_forward_pre_hook(remember_call, with_kwargs=True)
        hooked_logits = model(input_ids=ids, attention_mask=mask,
                              decoder_input_ids=TARGETS).logits  # fmt: skip
    torch.testing.assert_close(plain, hooked_logits, atol=0, rtol=0)


@pytest.mark.parametrize("site", ["encoder_self", "decoder_self", "cross"])
def test_switching_the_attention_implementation_away_is_refused(site: str) -> None:
    """After apply, another attention implementation (``set_attn_implementation("sdpa")``,
    or the config field itself before transformers 4.54) would run plain attention with the
    methods' parameters still in the model: every layer with methods refuses it in one line,
    and switching back gives the model's own numbers again."""
    model = local_model(specs={site: SPECS[site]})
    ids, mask = source_batch()
    run = lambda: model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits  # noqa: E731
    with torch.no_grad():
        before = run()
        model.config._attn_implementation = "sdpa"
        with pytest.raises(RuntimeError, match="implementation is now 'sdpa'.*set_attn_impl"):
            run()
        with pytest.raises(RuntimeError, match=f"methods \\({site}: "):  # PEFT calls forward
            model.forward(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS)
        model.config._attn_implementation = "localnmt"
        torch.testing.assert_close(run(), before, atol=0, rtol=0)
        if callable(getattr(model, "set_attn_implementation", None)):
            model.set_attn_implementation("eager")
            with pytest.raises(RuntimeError, match="implementation is now 'eager'"):
                model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=3)
            model.set_attn_implementation("localnmt")
            torch.testing.assert_close(run(), before, atol=0, rtol=0)


def test_frozen_method_parameters_in_training_are_warned_of_once() -> None:
    """PEFT's get_peft_model freezes every parameter but its adapters': a LoRA fine-tune
    would keep the methods' new parameters at their initialisation. The first training
    forward of a layer whose methods' parameters do not require grad warns (once per layer);
    trainable ones, and evaluation, say nothing."""
    import warnings

    ids, mask = source_batch()
    model = local_model(specs={"encoder_self": "localness", "cross": SPECS["cross"]}).train()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS)
    model = local_model(specs={"encoder_self": "localness", "cross": SPECS["cross"]})
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(".localnmt." not in name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS)
        with torch.no_grad():  # training mode without gradients: nothing trains
            model.train()(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train()
        for _ in range(2):
            model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS)
    texts = [str(w.message) for w in caught if "localnmt: the parameters" in str(w.message)]
    assert len(texts) == 4  # two encoder and two cross layers, each once
    assert "encoder_self layer 0 (localness)" in texts[0]
    assert "modules_to_save=['localnmt']" in texts[0]


def test_save_and_from_pretrained_restore_the_same_model(tmp_path) -> None:
    specs = {**SPECS, "encoder_self": "tied_qk[groups=2] + localness"}
    loaded = assert_saved_and_loaded_alike(local_model(specs=specs), tmp_path)
    assert loaded.config.localnmt == {
        k: specs[k] for k in ("encoder_self", "decoder_self", "cross")
    }


def test_a_baseline_built_from_the_same_config_stays_plain(tmp_path) -> None:
    """A transformers model keeps the config object it was built from: apply gives the method
    model a copy, so that a baseline built from the same object keeps transformers' attention
    and saves no methods, and a second model from it takes methods of its own."""
    import json

    config = tiny_config()
    baseline = type(tiny_model())(config)
    attention = baseline.config._attn_implementation
    model = localnmt.hf.apply(type(baseline)(config), cross="gmm[k=2]")
    assert model.config is not config and model.config.localnmt["cross"] == "gmm[k=2]"
    assert not any(getattr(m, "config", None) is config for m in model.modules())
    assert model.model.decoder.layers[0].encoder_attn.config._attn_implementation == "localnmt"
    assert getattr(config, "localnmt", None) is None
    assert baseline.config._attn_implementation == attention != "localnmt"
    baseline.save_pretrained(tmp_path)
    assert "localnmt" not in json.loads((tmp_path / "config.json").read_text())
    second = localnmt.hf.apply(type(baseline)(config), encoder_self="localness")
    assert second.config.localnmt["encoder_self"] == "localness"


def test_a_model_built_from_a_changed_config_is_refused() -> None:
    """A model built from the config of a model apply changed records methods it does not
    have (it would run plain attention): apply says so rather than adding to the record."""
    from localnmt.attention.modifier import SpecError

    model = local_model()
    with pytest.raises(SpecError, match=r"records localnmt methods .* but the model has none"):
        localnmt.hf.apply(type(model)(model.config), cross="gmm[k=2]")
    with pytest.raises(SpecError, match="already has localnmt methods"):
        localnmt.hf.apply(model, cross="gmm[k=2]")
    plain = localnmt.hf.apply(tiny_model())  # no method anywhere: the baseline, on SDPA
    with pytest.raises(SpecError, match="with no method at any site already"):
        localnmt.hf.apply(plain, cross="gmm[k=2]")


def test_from_pretrained_leaves_a_given_config_alone(tmp_path) -> None:
    model = local_model()
    model.save_pretrained(tmp_path)
    config = type(model.config).from_pretrained(tmp_path)
    loaded = localnmt.hf.from_pretrained(type(model), tmp_path, config=config)
    assert config.localnmt == loaded.config.localnmt == model.config.localnmt
    assert loaded.config is not config and config._attn_implementation != "localnmt"


def test_from_pretrained_takes_a_dtype_and_config_fields_and_refuses_the_rest(tmp_path) -> None:
    """dtype (and transformers' older torch_dtype, and "auto": the saved one) casts the whole
    model, methods included; a config field overrides the saved one; an option that is
    neither is one TypeError instead of being dropped."""
    model = local_model()
    model.save_pretrained(tmp_path / "f32")
    model.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    load = localnmt.hf.from_pretrained
    cls = type(model)
    for folder, options, expected in (
        ("f32", {}, torch.float32),
        ("f32", {"dtype": torch.bfloat16}, torch.bfloat16),
        ("f32", {"torch_dtype": torch.float64}, torch.float64),
        ("f32", {"dtype": "auto"}, torch.float32),
        ("bf16", {"dtype": "auto"}, torch.bfloat16),
        ("bf16", {}, torch.float32),
    ):
        loaded = load(cls, tmp_path / folder, **options)
        assert {p.dtype for p in loaded.parameters()} == {expected}, (folder, options)
    assert load(cls, tmp_path / "f32", dropout=0.25).config.dropout == 0.25
    with pytest.raises(TypeError, match="unexpected option.*device_map"):
        load(cls, tmp_path / "f32", device_map="cpu")
    with pytest.raises(TypeError, match="dtype must be"):
        load(cls, tmp_path / "f32", dtype="bf16")
    with pytest.raises(TypeError, match="attn_implementation='sdpa'.*methods run through"):
        load(cls, tmp_path / "f32", attn_implementation="sdpa")
    assert load(cls, tmp_path / "f32", attn_implementation="localnmt").config.dropout == 0.0
    with pytest.raises(TypeError, match="beside config="):
        load(cls, tmp_path / "f32", config=model.config, dropout=0.25)


def test_from_pretrained_of_a_plain_folder_says_what_to_do(tmp_path) -> None:
    from localnmt.errors import CheckpointError

    tiny_model().save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="no 'localnmt' entry"):
        localnmt.hf.from_pretrained(type(tiny_model()), tmp_path)


def batches(n: int = 4):
    ids, mask = source_batch()
    labels = TARGETS[:, 1:].masked_fill(TARGETS[:, 1:].eq(PAD), -100)
    return [{"input_ids": i, "attention_mask": m, "labels": y}
            for _ in range(n) for i, m, y in zip(ids, mask, labels)]  # fmt: skip


def test_plain_training_loop_learns() -> None:
    model = localnmt.hf.apply(tiny_model(), **SPECS)
    model.train()
    ids, mask = source_batch()
    labels = TARGETS[:, 1:].masked_fill(TARGETS[:, 1:].eq(PAD), -100)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(25):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_seq2seq_trainer_steps(tmp_path) -> None:
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    model = local_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters() if ".localnmt." in n}

    def collate(rows):
        return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=3, learning_rate=1e-3,
        report_to=[], save_strategy="no", logging_steps=1, use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=batches(), data_collator=collate)
    result = trainer.train()
    assert result.global_step == 3 and torch.isfinite(torch.tensor(result.training_loss))
    now = dict(model.named_parameters())
    moved = [n for n in before if not torch.equal(now[n], before[n])]
    assert len(moved) == len(before)


def test_resuming_from_a_checkpoint_of_other_specs_is_refused(tmp_path) -> None:
    """transformers' Trainer resumes non-strictly (a logged warning for the keys that do not
    match): a checkpoint of a model with other methods is one error naming them, not a model
    whose methods start afresh; the same model resumes, and a plain model's weights still load
    into one with methods (fine-tuning)."""
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    def collate(rows):
        return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}

    def trainer(model, steps: int) -> Seq2SeqTrainer:
        args = Seq2SeqTrainingArguments(
            output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=3,
            learning_rate=1e-3, report_to=[], save_strategy="steps", save_steps=2,
            use_cpu=True, disable_tqdm=True,
        )  # fmt: skip
        return Seq2SeqTrainer(model=model, args=args, train_dataset=batches(),
                              data_collator=collate)  # fmt: skip

    trainer(local_model(), 2).train()
    checkpoint = str(tmp_path / "checkpoint-2")
    other = localnmt.hf.apply(tiny_model(), encoder_self="localness", cross="gmm[k=2]")
    with pytest.raises(RuntimeError, match=r"localnmt: the state has \d+ method parameters"):
        trainer(other, 4).train(resume_from_checkpoint=checkpoint)
    assert trainer(local_model(), 4).train(resume_from_checkpoint=checkpoint).global_step == 4
    missing, _ = other.load_state_dict(tiny_model().state_dict(), strict=False)
    assert missing and all(".localnmt." in key for key in missing)
    state = local_model().state_dict()  # one shard of a sharded checkpoint: a part of its keys
    part = dict(list(state.items())[: len(state) // 2])
    assert any(".localnmt." in key for key in part)
    local_model().load_state_dict(part, strict=False)


def test_the_load_check_registers_where_torch_has_only_the_private_hook() -> None:
    """torch 2.1 has no public register_load_state_dict_pre_hook: the private registration
    runs the same check, and its error stops a non-strict load too."""
    from localnmt.hf.attach import _on_load

    class OlderTorch(torch.nn.Linear):
        register_load_state_dict_pre_hook = None

    seen = []

    def hook(module, state_dict, prefix, metadata, strict, missing, unexpected, errors):
        seen.append(module)
        errors.append("refused")

    layer = OlderTorch(2, 2)
    _on_load(layer, hook)
    with pytest.raises(RuntimeError, match="refused"):
        layer.load_state_dict(torch.nn.Linear(2, 2).state_dict(), strict=False)
    assert seen == [layer]


@pytest.mark.parametrize("family", ["bart", "mbart", "m2m_100"])
def test_other_families(family: str) -> None:
    model = local_model(family)
    assert sum(".localnmt." in n for n, _ in model.named_parameters()) > 20
    ids, mask = source_batch()
    ids = ids.clone()
    ids[:, 0] = 5  # mbart / m2m100: any first token
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=5, num_beams=2,
                  do_sample=False, output_scores=True, return_dict_in_generate=True)  # fmt: skip
    cached = model.generate(**kwargs, use_cache=True)
    uncached = model.generate(**kwargs, use_cache=False)
    assert torch.equal(cached.sequences, uncached.sequences)
    with torch.no_grad():
        batch = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
        n = int(mask[1].sum())
        alone = model(input_ids=ids[1:2, :n], decoder_input_ids=TARGETS[1:2]).logits
    assert (batch[1] - alone[0]).abs().max() <= 1e-5


@pytest.mark.parametrize("version", ["4.52.4", "4.48.0", "6.0.0", "3.5.1"])
def test_versions_outside_the_range_are_one_error(version: str) -> None:
    with pytest.raises(TransformersVersionError, match=f"found transformers {version}") as err:
        check_version(version)
    assert "\n" not in str(err.value) and "pip install" in str(err.value)


@pytest.mark.parametrize("version", ["4.53.0", "4.57.6", "5.0.0", "5.24.0", "5.99.1.dev0"])
def test_versions_inside_the_range_pass(version: str) -> None:
    check_version(version)


def test_importing_the_adapter_imports_no_framework() -> None:
    code = ("import sys, localnmt.hf; "
            "print(any(m in sys.modules for m in ('transformers', 'fairseq')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_setup_extra_asks_for_the_checked_range() -> None:
    from pathlib import Path

    from localnmt.hf.versions import REQUIREMENT

    setup = (Path(__file__).parents[2] / "setup.py").read_text()
    assert f'"hf": ["{REQUIREMENT}"' in setup


def test_key_padding_is_read_once_per_mask_and_again_after_a_write() -> None:
    """Every layer of a forward gets the same mask: the answer is kept for that tensor, and
    recomputed once it is written to or another mask comes (inference tensors too)."""
    from localnmt.hf.attention import key_padding

    mask = torch.ones(2, 1, 3, 4, dtype=torch.bool)
    mask[0, ..., 0] = False
    first = key_padding(mask)
    assert first is not None and first.tolist() == [[True, False, False, False], [False] * 4]
    assert key_padding(mask) is first
    mask[0, ..., 0] = True  # written in place: padding gone
    assert key_padding(mask) is None
    other = torch.zeros(2, 1, 1, 4)
    other[1, ..., 3] = float("-inf")
    assert key_padding(other).tolist() == [[False] * 4, [False, False, False, True]]
    again = key_padding(other)
    mask[1, ..., 2] = False  # alternating masks (a decoder's causal and source masks) both kept
    second = key_padding(mask)
    assert key_padding(other) is again and key_padding(mask) is second
    with torch.inference_mode():
        frozen = torch.ones(2, 4)
        frozen[0, 0] = 0
        assert key_padding(frozen).tolist() == [[True, False, False, False], [False] * 4]
        frozen[0, 0] = 1
        assert key_padding(frozen) is None


def test_a_source_mask_built_again_gives_the_last_steps_padding() -> None:
    """transformers builds the same source mask anew at each step: a layer's decoding state
    gives the last step's answer for an equal mask (the same tensor), a new one for another
    mask, and is not fooled by a mask written to in place."""
    from localnmt.hf.attention import _source_padding

    def source_mask(padded: int) -> torch.Tensor:
        mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
        mask[1, ..., 5 - padded :] = False
        return mask

    state: dict = {}
    first = _source_padding(state, source_mask(2))
    assert first is not None and first.tolist() == [[False] * 5, [False] * 3 + [True] * 2]
    assert _source_padding(state, source_mask(2)) is first
    other = _source_padding(state, source_mask(1))
    assert other.tolist() == [[False] * 5, [False] * 4 + [True]]
    mask = source_mask(1)
    assert _source_padding(state, mask) is other
    mask[1] = True  # written in place: no padding any more
    assert _source_padding(state, mask) is None
    assert _source_padding(state, None) is None


def test_the_decoder_step_is_one_tensor_per_step() -> None:
    """Every cross-attention layer of a step reads one offset tensor; the next step or
    another batch gets its own."""
    from localnmt.hf.attention import _query_offset

    class Cache:
        pass

    cache, query = Cache(), torch.zeros(3, 2, 1, 4)
    first = _query_offset(cache, 4, query)
    assert first.tolist() == [4.0] * 3 and first.dtype == torch.float32
    assert _query_offset(cache, 4, query) is first
    assert _query_offset(cache, 5, query).tolist() == [5.0] * 3
    assert _query_offset(cache, 5, torch.zeros(2, 2, 1, 4)).tolist() == [5.0] * 2


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("cross", ["hardcoded_gaussian", "gmm[k=2]"])
def test_planned_decoding_steps_change_nothing(cross: str, beams: int, monkeypatch) -> None:
    """Cross-attention steps run from a kept plan (localnmt/attention/step_plan.py) after
    the first step, in greedy and in beam search (whose reorders move each hypothesis's
    source within its sentence): the sequences and scores of the whole pipeline, and of
    generating without the cache."""
    from helpers.attention import PlanRuns

    from localnmt.attention import step_plan

    model = local_model(specs={"cross": cross})
    ran = PlanRuns(monkeypatch)
    ids, mask = source_batch()
    runs = {}
    for plans in (True, False):
        monkeypatch.setattr(step_plan, "ENABLED", plans)
        runs[plans] = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6,
                                     min_new_tokens=6, num_beams=beams, do_sample=False,
                                     output_scores=True, return_dict_in_generate=True)  # fmt: skip
        if plans:
            assert ran.count == 5 * model.config.decoder_layers  # every step after the first
    assert torch.equal(runs[True].sequences, runs[False].sequences)
    assert all(torch.equal(a, b) for a, b in zip(runs[True].scores, runs[False].scores))
    assert_cache_changes_nothing(model, beams=beams)


@pytest.mark.parametrize("beams", [1, 3])
def test_relative_decoder_steps_through_the_prepared_sdpa_change_nothing(beams, monkeypatch):
    """Relative positions alone in the decoder's self-attention: each step after a layer's
    first runs the shortcut and the SDPA call prepared at that first step (no dispatch),
    in greedy and beam search: the sequences and scores of the whole pipeline, and of
    generating without the cache."""
    from localnmt.attention import dispatch, step_plan

    model = local_model(specs={"decoder_self": "rel_pos[clip=2]"})
    prepared = []
    real = dispatch.PreparedKernel.__call__

    def counted(kernel, q, k, v):
        out = real(kernel, q, k, v)
        prepared.append(out is not None)
        return out

    monkeypatch.setattr(dispatch.PreparedKernel, "__call__", counted)
    ids, mask = source_batch()
    runs = {}
    for shortcuts, cache in ((True, True), (False, True), (True, False)):
        monkeypatch.setattr(step_plan, "ENABLED", shortcuts)
        runs[shortcuts, cache] = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=6, min_new_tokens=6,
            num_beams=beams, do_sample=False, use_cache=cache, output_scores=True,
            return_dict_in_generate=True,
        )  # fmt: skip
        if shortcuts and cache:  # every step after the first, in every decoder layer
            assert prepared.count(True) == 5 * model.config.decoder_layers
    taken, whole, uncached = runs[True, True], runs[False, True], runs[True, False]
    assert torch.equal(taken.sequences, whole.sequences)
    assert all(torch.equal(a, b) for a, b in zip(taken.scores, whole.scores))
    assert torch.equal(taken.sequences, uncached.sequences)
    for a, b in zip(taken.scores, uncached.scores):
        finite = torch.isfinite(a) & torch.isfinite(b)
        assert torch.equal(finite, torch.isfinite(a))
        assert (a[finite] - b[finite]).abs().max() <= 1e-4
