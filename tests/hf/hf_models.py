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
