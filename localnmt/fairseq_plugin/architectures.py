"""Base architectures of ``localnmt_transformer``: fairseq's presets under our model.

Per-paper named architectures live beside the paper's catalog rows and call these.
"""

from __future__ import annotations

from typing import Any

from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_vaswani_wmt_en_de_big,
)

from localnmt.fairseq_plugin.transformer import LocalTransformerModel  # noqa: E402  (registers the model)

MODEL = "localnmt_transformer"
assert LocalTransformerModel is not None


def default_specs(
    args: Any, encoder: str | None = None, decoder: str | None = None, cross: str | None = None
) -> None:
    """Set spec flags the user did not give (command line wins, as for every fairseq flag)."""
    args.encoder_attn_modifiers = getattr(args, "encoder_attn_modifiers", encoder)
    args.decoder_attn_modifiers = getattr(args, "decoder_attn_modifiers", decoder)
    args.cross_attn_modifiers = getattr(args, "cross_attn_modifiers", cross)


@register_model_architecture(MODEL, "localnmt_base")
def localnmt_base(args: Any) -> None:
    """Transformer-base, as fairseq's ``transformer_wmt_en_de`` (Vaswani et al. 2017)."""
    default_specs(args)
    base_architecture(args)


@register_model_architecture(MODEL, "localnmt_big")
def localnmt_big(args: Any) -> None:
    """Transformer-big, as fairseq's ``transformer_vaswani_wmt_en_de_big``."""
    default_specs(args)
    transformer_vaswani_wmt_en_de_big(args)


@register_model_architecture(MODEL, "localnmt_tiny")
def localnmt_tiny(args: Any) -> None:
    """A tiny model for tests and CPU smoke runs (2 layers, 4 heads, 32 dims)."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 32)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 64)
    args.encoder_layers = getattr(args, "encoder_layers", 2)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 32)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", 64)
    args.decoder_layers = getattr(args, "decoder_layers", 2)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 4)
    localnmt_base(args)
