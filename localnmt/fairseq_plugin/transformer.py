"""The Transformer of localnmt: fairseq's Transformer whose every attention is a
:class:`~localnmt.attention.pipeline.LocalAttention` built from a per-site spec.

Three flags, one per attention site, take a spec (grammar in :mod:`localnmt.attention.spec`)::

    --encoder-attn-modifiers   encoder self-attention
    --decoder-attn-modifiers   decoder self-attention
    --cross-attn-modifiers     encoder-decoder (cross) attention

With no spec the model is fairseq's ``transformer`` (same parameter names, same numbers).
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import torch
from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerModel
from fairseq.models.transformer.transformer_decoder import TransformerDecoderBase
from fairseq.models.transformer.transformer_encoder import TransformerEncoderBase
from fairseq.models.transformer.transformer_legacy import base_architecture
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.quant_noise import quant_noise
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor

from localnmt.attention import shared_source
from localnmt.attention.attention_specs import (
    FAIRSEQ_DESTS,
    AttentionSpecs,
    SiteSpec,
    Stack,
    check_site,
    parse_site,
    side_of,
)
from localnmt.attention.context import AttentionSite
from localnmt.attention.modifier import SpecError, modifier_names
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import build_modifiers
from localnmt.fairseq_plugin import extensions
from localnmt.fairseq_plugin.build_checks import check_at_build

#: fairseq's argument name of each site's spec (``--encoder-attn-modifiers`` ...).
SPEC_FLAGS = FAIRSEQ_DESTS


def _spec_type(text: str) -> str:
    """argparse ``type=``: reject a bad spec at parse time, with what to fix (the parse is
    the one the model build uses: :func:`parse_site` keeps it)."""
    try:
        parse_site(text)
    except SpecError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _size(cfg: Any, side: str, name: str) -> int:
    """``cfg.encoder.layers`` (TransformerConfig) or ``cfg.encoder_layers`` (argparse)."""
    sub = getattr(cfg, side, None)
    if sub is not None and not isinstance(sub, str) and hasattr(sub, name):
        return int(getattr(sub, name))
    return int(getattr(cfg, f"{side}_{name}"))


def stack(cfg: Any, side: str) -> Stack:
    """The sizes of ``side`` (``encoder`` or ``decoder``) of the model ``cfg`` describes."""
    positions = "max_source_positions" if side == "encoder" else "max_target_positions"
    return Stack(
        layers=_size(cfg, side, "layers"),
        heads=_size(cfg, side, "attention_heads"),
        embed_dim=_size(cfg, side, "embed_dim"),
        max_positions=int(getattr(cfg, positions, None) or 1024),
    )


def site_spec(cfg: Any, kind: str) -> SiteSpec:
    """The parsed spec of one site of ``cfg`` (parsed once per string: :func:`parse_site`)."""
    return parse_site(getattr(cfg, SPEC_FLAGS[kind], None))


def check_site_specs(cfg: Any, kind: str, spec: SiteSpec) -> None:
    """One site's parsed spec against the model's sizes and every layer's site (no module
    is built)."""
    check_site(spec, kind, stack(cfg, side_of(kind)))


def check_model_specs(cfg: Any) -> AttentionSpecs:
    """All three specs of ``cfg``, checked against the model's layer and head counts and every
    layer's site; returns them."""
    specs = AttentionSpecs.from_namespace(cfg)
    specs.check(stack(cfg, "encoder"), stack(cfg, "decoder"))
    return specs


def layer_sites(cfg: Any, kind: str) -> list[AttentionSite]:
    """Every layer's site of ``kind`` in the model ``cfg`` describes."""
    return stack(cfg, side_of(kind)).sites(kind)


def _wrap(layer: Any, cfg: Any, side: str, index: int) -> Any:
    """fairseq's activation checkpointing and FSDP wrapping, plus our layer extensions."""
    layer = extensions.wrap_layer(layer, cfg, side, index)
    if cfg.checkpoint_activations:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    min_params = cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0
    return fsdp_wrap(layer, min_num_params=min_params)


def _pipeline_attention(
    layer: Any, cfg: Any, kind: str, spec: SiteSpec, embed_dim: int, **kwargs: Any
) -> Any:
    """The LocalAttention of ``layer`` at ``kind``, with the modifiers its parsed spec gives
    it."""
    site = stack(cfg, side_of(kind)).site(kind, layer.layer_index)
    attention = LocalAttention(
        embed_dim,
        site.num_heads,
        site=site,
        modifiers=build_modifiers(list(spec.items), site),
        dropout=cfg.attention_dropout,
        **kwargs,
    )
    if layer.quant_noise > 0:  # fairseq's quant-noise: a forward pre-hook on each projection
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            quant_noise(getattr(attention, name), layer.quant_noise, layer.quant_noise_block_size)
    return attention


class LocalEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer with a pipeline self-attention."""

    def __init__(self, cfg: Any, layer_index: int, spec: SiteSpec, return_fc: bool = False):
        self.layer_index = layer_index
        self._spec = spec
        super().__init__(cfg, return_fc=return_fc)

    def build_self_attention(self, embed_dim: int, cfg: Any) -> LocalAttention:
        return _pipeline_attention(
            self, cfg, "encoder_self", self._spec, embed_dim, self_attention=True
        )


class LocalDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer with pipeline self- and cross-attention."""

    def __init__(
        self, cfg: Any, layer_index: int, specs: AttentionSpecs, no_encoder_attn: bool = False
    ):
        self.layer_index = layer_index
        self._specs = specs
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)

    def build_self_attention(
        self, embed_dim: int, cfg: Any, add_bias_kv: bool = False, add_zero_attn: bool = False
    ) -> LocalAttention:
        return _pipeline_attention(
            self,
            cfg,
            "decoder_self",
            self._specs.site("decoder_self"),
            embed_dim,
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
            self_attention=not cfg.cross_self_attention,
        )

    def build_encoder_attention(self, embed_dim: int, cfg: Any) -> LocalAttention:
        return _pipeline_attention(
            self,
            cfg,
            "cross",
            self._specs.site("cross"),
            embed_dim,
            kdim=cfg.encoder.embed_dim,
            vdim=cfg.encoder.embed_dim,
            encoder_decoder_attention=True,
        )


class LocalTransformerEncoder(TransformerEncoderBase):
    """fairseq's encoder built from :class:`LocalEncoderLayer`; every layer shares the one
    parse of the encoder spec."""

    def __init__(self, cfg: Any, dictionary: Any, embed_tokens: Any, return_fc: bool = False):
        self._layer_counter = itertools.count()
        self._spec = site_spec(cfg, "encoder_self")
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)

    def build_encoder_layer(self, cfg: Any) -> Any:
        index = next(self._layer_counter)
        layer = LocalEncoderLayer(cfg, index, self._spec, return_fc=self.return_fc)
        return _wrap(layer, cfg, "encoder", index)


class LocalTransformerDecoder(TransformerDecoderBase):
    """fairseq's decoder built from :class:`LocalDecoderLayer`; every layer shares the one
    parse of each decoder spec."""

    def __init__(self, cfg: Any, dictionary: Any, embed_tokens: Any, **kwargs: Any):
        self._layer_counter = itertools.count()
        self._specs = AttentionSpecs.from_namespace(cfg)
        super().__init__(cfg, dictionary, embed_tokens, **kwargs)

    def build_decoder_layer(self, cfg: Any, no_encoder_attn: bool = False) -> Any:
        index = next(self._layer_counter)
        layer = LocalDecoderLayer(cfg, index, self._specs, no_encoder_attn=no_encoder_attn)
        return _wrap(layer, cfg, "decoder", index)

    def forward(
        self,
        prev_output_tokens: Tensor,
        encoder_out: dict[str, list[Tensor]] | None = None,
        incremental_state: dict[str, dict[str, Tensor | None]] | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, dict[str, Any]]:
        """fairseq's decoder forward. The first step of incremental decoding runs once per
        group of equal rows (beam search's hypotheses of one sentence start alike:
        :func:`~localnmt.attention.shared_source.first_step_group`), then the state and the
        outputs are spread to every hypothesis with the decoder's own reorder."""
        group = 1
        first_step = incremental_state is not None and not incremental_state
        if first_step and shared_source.ENABLED and not self.training:
            group = shared_source.first_step_group(prev_output_tokens, encoder_out)
        if group == 1:
            return super().forward(prev_output_tokens, encoder_out, incremental_state, **kwargs)
        assert encoder_out is not None
        rows = torch.arange(0, prev_output_tokens.size(0), group,
                            device=prev_output_tokens.device)  # fmt: skip
        x, extra = super().forward(
            prev_output_tokens.index_select(0, rows),
            shared_source.encoder_rows(encoder_out, rows),
            incremental_state,
            **kwargs,
        )
        spread = torch.arange(rows.numel(), device=rows.device).repeat_interleave(group)
        self.reorder_incremental_state_scripting(incremental_state, spread)
        extra = dict(extra)
        if extra.get("attn") is not None:  # (B, Tq, Tk) per entry
            extra["attn"] = [None if a is None else a.index_select(0, spread)
                             for a in extra["attn"]]  # fmt: skip
        if extra.get("inner_states") is not None:  # (T, B, C) per entry
            extra["inner_states"] = [h.index_select(1, spread) for h in extra["inner_states"]]
        return x.index_select(0, spread), extra


@register_model("localnmt_transformer")
class LocalTransformerModel(TransformerModel):
    """fairseq's Transformer (argparse flavour) with per-site attention specs."""

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        super().add_args(parser)
        methods = ", ".join(modifier_names())
        for kind, dest in SPEC_FLAGS.items():
            parser.add_argument(
                "--" + dest.replace("_", "-"),
                type=_spec_type,
                metavar="SPEC",
                help=f"attention methods for {kind.replace('_', ' ')} attention, e.g. "
                f"'method[layers=1-3,heads=1-4,key=value] + method2' (methods: {methods})",
            )
        extensions.add_extension_args(parser)

    @classmethod
    def build_model(cls, args: Any, task: Any) -> LocalTransformerModel:
        base_architecture(args)
        for dest in SPEC_FLAGS.values():
            if not hasattr(args, dest):
                setattr(args, dest, None)
        check_at_build(check_model_specs, args)  # parsed here once; the layers reuse the parse
        model = super().build_model(args, task)
        extensions.run_build_hooks(model, args)
        return model

    @classmethod
    def build_encoder(cls, cfg: Any, src_dict: Any, embed_tokens: Any) -> Any:
        return LocalTransformerEncoder(
            TransformerConfig.from_namespace(cfg), src_dict, embed_tokens
        )

    @classmethod
    def build_decoder(cls, cfg: Any, tgt_dict: Any, embed_tokens: Any) -> Any:
        cfg = TransformerConfig.from_namespace(cfg)
        return LocalTransformerDecoder(
            cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention
        )
