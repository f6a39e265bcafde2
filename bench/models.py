"""Models to compare: a catalog row's model and fairseq's own Transformer of the same sizes.

Both are built from one parsed argparse namespace (the row's ``--arch`` and args plus size
overrides), so layer and head counts, dimensions, dropout and shared embeddings agree; the
baseline is ``fairseq.models.transformer.TransformerModel`` (fairseq's ``transformer``), which
ignores the localnmt flags.
"""

from __future__ import annotations

import argparse
import copy
from types import SimpleNamespace
from typing import Any

from torch import nn

#: Namespace attributes that define a Transformer's size (the baseline cache key).
SIZE_KEYS = (
    "encoder_embed_dim",
    "encoder_ffn_embed_dim",
    "encoder_layers",
    "encoder_attention_heads",
    "encoder_normalize_before",
    "decoder_embed_dim",
    "decoder_ffn_embed_dim",
    "decoder_layers",
    "decoder_attention_heads",
    "decoder_normalize_before",
    "share_all_embeddings",
    "share_decoder_input_output_embed",
    "dropout",
    "attention_dropout",
    "activation_dropout",
)


def size_overrides(embed_dim: int | None, ffn_dim: int | None) -> list[str]:
    """Flags that set every model to one size, keeping each row's layer and head counts."""
    out: list[str] = []
    if embed_dim is not None:
        out += ["--encoder-embed-dim", str(embed_dim), "--decoder-embed-dim", str(embed_dim)]
    if ffn_dim is not None:
        out += ["--encoder-ffn-embed-dim", str(ffn_dim), "--decoder-ffn-embed-dim", str(ffn_dim)]
    return out


def parse_model_args(
    arch: str, args: tuple[str, ...] | list[str], overrides: list[str], quiet: bool = False
):
    """The namespace ``fairseq-train --arch arch --share-all-embeddings args overrides``
    would build the model from (no data needed). ``quiet``: a row that does not parse (not a
    translation model) raises SystemExit without printing argparse's usage page."""
    import contextlib
    import io

    from fairseq import options

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    parser = options.get_training_parser()
    argv = ["/nonexistent", "--arch", arch, "--share-all-embeddings", *args, *overrides]
    muted = contextlib.redirect_stderr(io.StringIO()) if quiet else contextlib.nullcontext()
    with muted:
        return options.parse_args_and_arch(parser, argv)


def _task(dictionary) -> Any:
    return SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)


def build_candidate(ns: argparse.Namespace, dictionary) -> nn.Module:
    """The row's model (``ARCH_MODEL_REGISTRY[ns.arch]``)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    return ARCH_MODEL_REGISTRY[ns.arch].build_model(copy.deepcopy(ns), _task(dictionary))


def baseline_namespace(ns: argparse.Namespace) -> argparse.Namespace:
    """The same sizes under fairseq's own ``transformer`` architecture."""
    base = copy.deepcopy(ns)
    base.arch = "transformer"
    for name in ("encoder_attn_modifiers", "decoder_attn_modifiers", "cross_attn_modifiers"):
        if hasattr(base, name):
            delattr(base, name)
    return base


def build_baseline(ns: argparse.Namespace, dictionary) -> nn.Module:
    """fairseq's ``TransformerModel`` with the sizes of ``ns``."""
    from fairseq.models.transformer import TransformerModel

    return TransformerModel.build_model(baseline_namespace(ns), _task(dictionary))


def size_key(ns: argparse.Namespace) -> tuple:
    return tuple(getattr(ns, key, None) for key in SIZE_KEYS)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, shared tensors counted once."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
