"""Base architectures of ``localnmt_transformer``: fairseq's presets under our model.

Per-paper named architectures (``arch_*.py``, ``roberta_local.py``) call these. A preset's
attention is an :class:`~localnmt.attention.attention_specs.AttentionSpecs`, kept in
:data:`PRESET_SPECS` (what the quickstart checks a catalog row against) and turned into
fairseq's arguments by :func:`default_specs`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from fairseq.models import ARCH_CONFIG_REGISTRY, register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_vaswani_wmt_en_de_big,
)

from localnmt.attention.attention_specs import FAIRSEQ_DESTS, AttentionSpecs, Stack
from localnmt.fairseq_plugin.transformer import (  # noqa: E402  (registers the model)
    LocalTransformerModel,
    stack,
)

MODEL = "localnmt_transformer"
assert LocalTransformerModel is not None

#: The attention specs of every named architecture that sets some (arch name → specs).
PRESET_SPECS: dict[str, AttentionSpecs] = {}
NO_SPECS = AttentionSpecs()


def preset_specs(arch: str) -> AttentionSpecs:
    """The attention specs the architecture ``arch`` sets (none for a plain one)."""
    return PRESET_SPECS.get(arch, NO_SPECS)


#: The model arguments that size what attention specs are checked against.
SIZE_DESTS = tuple(f"{side}_{name}" for side in ("encoder", "decoder")
                   for name in ("layers", "attention_heads", "embed_dim"))  # fmt: skip


def arch_stacks(arch: str, args: Sequence[str] = ()) -> tuple[Stack, Stack | None]:
    """The encoder and decoder sizes (decoder None: an encoder-only model) of ``--arch arch``
    with the size flags among ``args`` (the last of each wins; other arguments are ignored):
    the architecture's own function fills in the rest, as at a model build. No fairseq
    parser, no data path."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for dest in SIZE_DESTS:
        parser.add_argument("--" + dest.replace("_", "-"), dest=dest, type=int)
    given, _ = parser.parse_known_args(list(args))
    ns = argparse.Namespace(**{k: v for k, v in vars(given).items() if v is not None})
    ARCH_CONFIG_REGISTRY[arch](ns)
    decoder = stack(ns, "decoder") if getattr(ns, "decoder_layers", None) else None
    return stack(ns, "encoder"), decoder


def default_specs(args: Any, specs: AttentionSpecs = NO_SPECS) -> None:
    """Set the spec arguments the user did not give from ``specs`` (command line wins, as for
    every fairseq flag); fairseq's arguments hold the strings, the layers reuse their parse."""
    for kind, dest in FAIRSEQ_DESTS.items():
        given = getattr(specs, kind)
        setattr(args, dest, getattr(args, dest, None if given is None else given.text))


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
