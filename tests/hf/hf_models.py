"""Tiny transformers models built from configs (no download), for the adapter's tests."""

from __future__ import annotations

import torch
from torch import nn

PAD, EOS, START = 0, 1, 0
VOCAB = 40


def tiny_config(family: str = "marian", **overrides):
    """A 2 + 2 layer, 16-dim, 4-head config of ``family`` without dropout."""
    import transformers as tf

    sizes = dict(
        vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
        decoder_start_token_id=START, bos_token_id=EOS, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, forced_eos_token_id=None,
    )  # fmt: skip
    sizes.update(overrides)
    config_class = {
        "marian": tf.MarianConfig, "bart": tf.BartConfig, "mbart": tf.MBartConfig,
        "m2m_100": tf.M2M100Config,
    }[family]  # fmt: skip
    return config_class(**sizes)


def tiny_model(family: str = "marian", seed: int = 0, **overrides) -> nn.Module:
    import transformers as tf

    model_class = {
        "marian": tf.MarianMTModel, "bart": tf.BartForConditionalGeneration,
        "mbart": tf.MBartForConditionalGeneration, "m2m_100": tf.M2M100ForConditionalGeneration,
    }[family]  # fmt: skip
    torch.manual_seed(seed)
    return model_class(tiny_config(family, **overrides)).eval()


T5_FAMILIES = ("t5", "mt5", "umt5")


def tiny_t5(family: str = "t5", seed: int = 0, **overrides) -> nn.Module:
    """A 2 + 2 layer, 16-dim, 4-head T5-family model (``t5``, ``mt5``, ``umt5``) without
    dropout, with 8 relative-position buckets up to distance 16; ``d_kv=…`` changes the head
    width (mT5-small's ``d_model != num_heads·d_kv``)."""
    import transformers as tf

    sizes = dict(
        vocab_size=VOCAB, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2,
        num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
        dropout_rate=0.0, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=START,
    )  # fmt: skip
    sizes.update(overrides)
    config_class, model_class = {
        "t5": (tf.T5Config, tf.T5ForConditionalGeneration),
        "mt5": (tf.MT5Config, tf.MT5ForConditionalGeneration),
        "umt5": (tf.UMT5Config, tf.UMT5ForConditionalGeneration),
    }[family]  # fmt: skip
    torch.manual_seed(seed)
    return model_class(config_class(**sizes)).eval()


def randomise(module: nn.Module, seed: int = 1) -> None:
    """Every parameter drawn again (1-d ones N(0, 0.5²), others N(0, 0.3²)): every term of
    every equation matters, zero-initialised biases and gates included. Fixed sinusoidal
    position tables (not saved by transformers) stay."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "embed_positions" in name and not p.requires_grad:
                continue
            p.copy_(torch.randn(p.shape, generator=gen) * (0.5 if p.dim() == 1 else 0.3))


def source_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three sentences of 7, 4 and 2 tokens, right-padded (transformers' side)."""
    rows = [[5, 6, 7, 8, 9, 10, EOS], [11, 12, 13, EOS], [14, EOS]]
    width = max(map(len, rows))
    ids = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    return ids, ids.ne(PAD).long()


#: Decoder inputs for three sentences, right-padded.
TARGETS = torch.tensor([[START, 7, 8, 9, 5], [START, 11, 12, PAD, PAD], [START, 14, PAD, PAD, PAD]])


def assert_padding_does_not_change_real_tokens(model: nn.Module) -> None:
    """Each sentence of a padded batch gets the logits it gets alone (within 1e-5)."""
    ids, mask = source_batch()
    dec_mask = TARGETS.ne(PAD).long()
    dec_mask[:, 0] = 1
    with torch.no_grad():
        batch = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS,
                      decoder_attention_mask=dec_mask).logits  # fmt: skip
        for row in range(ids.size(0)):
            n, m = int(mask[row].sum()), int(dec_mask[row].sum())
            alone = model(input_ids=ids[row : row + 1, :n],
                          decoder_input_ids=TARGETS[row : row + 1, :m]).logits  # fmt: skip
            diff = (batch[row, :m] - alone[0]).abs().max().item()
            assert diff <= 1e-5, f"sentence {row}: max |Δ| = {diff:.2e}"


def assert_cache_changes_nothing(model: nn.Module, beams: int) -> None:
    """``generate`` with the cache gives the sequences and scores it gives without."""
    ids, mask = source_batch()
    cached, uncached = (
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, num_beams=beams,
                       do_sample=False, use_cache=cache, output_scores=True,
                       return_dict_in_generate=True, early_stopping=False)
        for cache in (True, False)
    )  # fmt: skip
    assert torch.equal(cached.sequences, uncached.sequences)
    for a, b in zip(cached.scores, uncached.scores):
        finite = torch.isfinite(a) & torch.isfinite(b)
        assert torch.equal(finite, torch.isfinite(a))
        assert (a[finite] - b[finite]).abs().max() <= 1e-4
    assert cached.sequences.size(1) > 3


def assert_saved_and_loaded_alike(model: nn.Module, folder) -> nn.Module:
    """``save_pretrained`` then :func:`localnmt.hf.from_pretrained`: the same specs, every
    tensor and the logits bit for bit; returns the loaded model."""
    import localnmt.hf

    model.save_pretrained(folder)
    loaded = localnmt.hf.from_pretrained(type(model), folder)
    assert loaded.config.localnmt == model.config.localnmt
    ours, theirs = model.state_dict(), loaded.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    ids, mask = source_batch()
    with torch.no_grad():
        a = model(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
        b = loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=TARGETS).logits
    assert torch.equal(a, b)
    return loaded
