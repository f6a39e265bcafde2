"""A LoRA fine-tune with PEFT of a model given methods (docs/huggingface.md, "With PEFT"):
the methods train when named in ``modules_to_save``, are warned of when not, and the adapter's
save / load and ``merge_and_unload`` keep the model's outputs."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("transformers")
try:
    import peft
except Exception as error:  # not installed, or a release that refuses this transformers
    pytest.skip(f"peft does not import here: {error}", allow_module_level=True)

from hf_models import TARGETS, randomise, source_batch, tiny_model  # noqa: E402

import localnmt.hf  # noqa: E402

SPECS = {"encoder_self": "localness[window=query]", "cross": "gmm[k=2]"}
FROZEN = "localnmt: the parameters"


def base_model():
    """The same tiny Marian model with the same methods every call (weights drawn at random,
    so that a trained method or a LoRA update shows in the logits)."""
    model = tiny_model("marian", seed=0)
    localnmt.hf.apply(model, **SPECS)
    randomise(model)
    return model


def lora(model, **extra):
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], **extra)
    return peft.get_peft_model(model, config)


def logits(model) -> torch.Tensor:
    ids, mask = source_batch()
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits


def train_steps(model, steps: int = 3) -> list[str]:
    """A few Adam steps on a fixed batch; returns the warnings raised."""
    ids, mask = source_batch()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=0.05)
    model.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(steps):
            loss = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS,
                         labels=TARGETS).loss  # fmt: skip
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return [str(w.message) for w in caught]


def method_weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if ".localnmt." in n}


def test_lora_without_modules_to_save_leaves_the_methods_frozen_and_says_so() -> None:
    model = lora(base_model())
    before = method_weights(model)
    assert before and not any(p.requires_grad for n, p in model.named_parameters()
                              if ".localnmt." in n)  # fmt: skip
    said = [w for w in train_steps(model) if FROZEN in w]
    assert said and all("modules_to_save=['localnmt']" in w for w in said)
    after = method_weights(model)
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_lora_with_modules_to_save_trains_the_methods_and_saves_them(tmp_path) -> None:
    model = lora(base_model(), modules_to_save=["localnmt"])
    trained = {n for n, p in model.named_parameters() if p.requires_grad and ".localnmt." in n}
    # PEFT's trainable copies of every layer's methods (encoder self, cross)
    assert len(trained) >= 4 and all("modules_to_save" in n for n in trained)
    before = method_weights(model)
    assert not [w for w in train_steps(model) if FROZEN in w]
    after = method_weights(model)
    assert all(not torch.equal(before[n], after[n]) for n in trained)
    # the original copies stay as they were (PEFT keeps them for disabling the adapter)
    assert all(torch.equal(before[n], after[n]) for n in before if n not in trained)
    expected = logits(model)
    with model.disable_adapter():
        assert not torch.allclose(logits(model), expected)

    model.save_pretrained(tmp_path / "adapter")
    reloaded = peft.PeftModel.from_pretrained(base_model(), tmp_path / "adapter").eval()
    torch.testing.assert_close(logits(reloaded), expected, atol=1e-6, rtol=0)

    merged = model.merge_and_unload()
    torch.testing.assert_close(logits(merged), expected, atol=1e-5, rtol=0)
    merged.save_pretrained(tmp_path / "merged")
    loaded = localnmt.hf.from_pretrained(type(merged), tmp_path / "merged")
    assert loaded.config.localnmt == merged.config.localnmt
    torch.testing.assert_close(logits(loaded), expected, atol=1e-5, rtol=0)


def test_the_dispatch_check_runs_under_peft() -> None:
    """PEFT calls the model's forward directly: switching the attention away from localnmt
    is still refused in one line."""
    model = lora(base_model(), modules_to_save=["localnmt"])
    expected = logits(model)
    # what set_attn_implementation("sdpa") sets (the method is missing before 4.54)
    model.base_model.model.config._attn_implementation = "sdpa"
    with pytest.raises(RuntimeError, match="implementation is now 'sdpa'.*set_attn_impl"):
        logits(model)
    model.base_model.model.config._attn_implementation = "localnmt"
    torch.testing.assert_close(logits(model), expected, atol=0, rtol=0)
