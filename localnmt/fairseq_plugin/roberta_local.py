"""``localnmt_roberta``: fairseq's RoBERTa (masked-LM encoder) whose self-attention is
:class:`~localnmt.attention.pipeline.LocalAttention`, for Pande et al. 2021 Table 4 (BERT-base,
GLUE sentence classification).

fairseq's ``RobertaEncoder.build_encoder`` builds a ``TransformerEncoder``; the only change here
is to build :class:`~localnmt.fairseq_plugin.transformer.LocalTransformerEncoder` instead (same
layers, same parameter names), configured by ``--encoder-attn-modifiers`` and the tying flags
(``--encoder-tie-attn-layers``). With no spec it is fairseq's RoBERTa.

Table 4 archs (12 layers × 12 heads, band masks on all 144 heads):

    pande2021_bert_band2_untied    band2 everywhere, no tying
    pande2021_bert_band6_untied    band6 everywhere, no tying
    pande2021_bert_band6_alltied   band6; one Wq/Wk for all heads of all 12 layers (144 tied)
    pande2021_bert_band6_132tied   the same for layers 1–11 (132 heads); layer 12 untied
    pande2021_bert_band6_120tied   the same for layers 1–10 (120 heads); layers 11–12 untied

"Parameters shared across layers" is read as in Table 3 (Wq, Wk tied; Wv, Wo per layer),
whose parameter counts fix that reading for the translation model.
"""

from __future__ import annotations

import argparse
from typing import Any

from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta.model import (
    RobertaEncoder,
    RobertaModel,
    init_bert_params,
    roberta_base_architecture,
)
from fairseq.models.transformer import TransformerConfig
from fairseq.utils import safe_hasattr

from localnmt.attention.attention_specs import AttentionSpecs, SiteSpec
from localnmt.attention.modifier import modifier_names
from localnmt.fairseq_plugin import extensions
from localnmt.fairseq_plugin.architectures import PRESET_SPECS, default_specs
from localnmt.fairseq_plugin.build_checks import check_at_build
from localnmt.fairseq_plugin.transformer import (
    LocalTransformerEncoder,
    _spec_type,
    check_site_specs,
    site_spec,
)

MODEL = "localnmt_roberta"


class LocalRobertaEncoder(RobertaEncoder):
    """RoBERTa's encoder with a pipeline self-attention in every layer."""

    def build_encoder(self, args: Any, dictionary: Any, embed_tokens: Any) -> Any:
        encoder = LocalTransformerEncoder(
            TransformerConfig.from_namespace(args), dictionary, embed_tokens
        )
        encoder.apply(init_bert_params)
        return encoder


def check_encoder_spec(args: Any) -> SiteSpec:
    """The encoder spec against the layer and head counts and every layer's site (decoder
    flags do not apply); returns it."""
    spec = site_spec(args, "encoder_self")
    check_site_specs(args, "encoder_self", spec)
    return spec


@register_model(MODEL)
class LocalRobertaModel(RobertaModel):
    """fairseq's ``roberta`` with ``--encoder-attn-modifiers`` and cross-layer tying."""

    @staticmethod
    def add_args(parser: argparse.ArgumentParser) -> None:
        RobertaModel.add_args(parser)
        parser.add_argument(
            "--encoder-attn-modifiers",
            type=_spec_type,
            metavar="SPEC",
            help="attention methods for encoder self-attention "
            f"(methods: {', '.join(modifier_names())})",
        )
        extensions.add_extension_args(parser)

    @classmethod
    def build_model(cls, args: Any, task: Any) -> LocalRobertaModel:
        roberta_base_architecture(args)
        if not safe_hasattr(args, "max_positions"):
            if not safe_hasattr(args, "tokens_per_sample"):
                args.tokens_per_sample = task.max_positions()
            args.max_positions = args.tokens_per_sample
        args.encoder_attn_modifiers = getattr(args, "encoder_attn_modifiers", None)
        check_at_build(check_encoder_spec, args)  # parsed here once; the layers reuse the parse
        model = cls(args, LocalRobertaEncoder(args, task.source_dictionary))
        extensions.run_build_hooks(model, args)
        return model


def _preset(specs: AttentionSpecs, tie: str | None):
    def arch(args: Any) -> None:
        default_specs(args, specs)
        args.encoder_tie_attn_layers = getattr(args, "encoder_tie_attn_layers", tie)
        roberta_base_architecture(args)

    return arch


def _band6_tied(layers: str) -> AttentionSpecs:
    return _encoder(f"local_heads[masks=band6*12] + tied_qk[layers={layers},groups=1]")


def _encoder(spec: str | None) -> AttentionSpecs:
    return AttentionSpecs.parse(encoder_self=spec)


#: arch → (attention specs, --encoder-tie-attn-layers); Table 4 rows.
PANDE2021_BERT_ARCHS: dict[str, tuple[AttentionSpecs, str | None]] = {
    "localnmt_roberta_base": (_encoder(None), None),
    "pande2021_bert_band2_untied": (_encoder("local_heads[masks=band2*12]"), None),
    "pande2021_bert_band6_untied": (_encoder("local_heads[masks=band6*12]"), None),
    "pande2021_bert_band6_alltied": (_band6_tied("all"), "all"),
    "pande2021_bert_band6_132tied": (_band6_tied("1-11"), "1-11"),
    "pande2021_bert_band6_120tied": (_band6_tied("1-10"), "1-10"),
}

for _name, (_specs, _tie) in PANDE2021_BERT_ARCHS.items():
    register_model_architecture(MODEL, _name)(_preset(_specs, _tie))
    PRESET_SPECS[_name] = _specs
