"""A multi-head attention's parameters, initialisation and decoding-state keys, framework-free.

:class:`MultiheadParameters` holds what fairseq's ``MultiheadAttention`` holds, under the same
names and shapes (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, ``bias_k``, ``bias_v``),
created and initialised in the same order from the same random stream, so that a model built
through the fairseq adapter (:mod:`localnmt.fairseq_plugin`) has the numbers it had when
:class:`~localnmt.attention.pipeline.LocalAttention` subclassed fairseq's module. Its
incremental state follows fairseq's convention (one dict per module, keyed by a per-module
id), which any decoder can hold: a plain ``dict`` is enough.
"""

from __future__ import annotations

import logging
import math
import uuid

import torch
from torch import Tensor, nn
from torch.nn import functional as F

logger = logging.getLogger(__name__)

IncrementalState = dict[str, dict[str, Tensor | None]]


class AttentionDropout(nn.Module):
    """Dropout on attention probabilities, switchable at inference the way fairseq's
    ``--retain-dropout`` switches it (``make_generation_fast_``)."""

    def __init__(self, p: float, module_name: str | None = None):
        super().__init__()
        self.p = p
        self.module_name = module_name
        self.apply_during_inference = False

    def forward(self, x: Tensor, inplace: bool = False) -> Tensor:
        if self.p > 0 and (self.training or self.apply_during_inference):
            return F.dropout(x, p=self.p, training=True, inplace=inplace)
        return x

    def make_generation_fast_(
        self,
        name: str,
        retain_dropout: bool = False,
        retain_dropout_modules: list[str] | None = None,
        **kwargs,
    ) -> None:
        if retain_dropout and (
            retain_dropout_modules is None or self.module_name in retain_dropout_modules
        ):
            logger.info("Enabling dropout during inference for module: %s", name)
            self.apply_during_inference = True


class MultiheadParameters(nn.Module):
    """Projections, optional key/value biases and dropout of a multi-head attention."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        self_attention: bool = False,
        encoder_decoder_attention: bool = False,
    ):
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.qkv_same_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout_module = AttentionDropout(dropout, module_name=type(self).__name__)
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.scaling = self.head_dim**-0.5
        self.self_attention = self_attention
        self.encoder_decoder_attention = encoder_decoder_attention
        if self_attention and not self.qkv_same_dim:
            raise ValueError("self-attention needs query, key and value of the same size")
        # fairseq's order (k, v, q, out): the same random stream gives the same parameters
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.beam_size = 1
        self.reset_parameters()
        self.onnx_trace = False
        self._incremental_state_id = str(uuid.uuid4())

    def reset_parameters(self) -> None:
        """Xavier-uniform projections (gain 1/√2 for q, k, v of equal sizes), zero output bias."""
        gain = 1 / math.sqrt(2) if self.qkv_same_dim else 1.0
        for proj in (self.k_proj, self.v_proj, self.q_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            nn.init.xavier_normal_(self.bias_v)

    # ---- incremental state (fairseq's convention: '<module id>.attn_state') ----------------
    def _state_key(self) -> str:
        return f"{self._incremental_state_id}.attn_state"

    def _get_input_buffer(self, incremental_state: IncrementalState | None) -> dict:
        """This module's dict in ``incremental_state`` (empty when there is none yet)."""
        if incremental_state is None:
            return {}
        return incremental_state.get(self._state_key(), {})

    def _set_input_buffer(
        self, incremental_state: IncrementalState | None, buffer: dict
    ) -> IncrementalState | None:
        if incremental_state is not None:
            incremental_state[self._state_key()] = buffer
        return incremental_state

    def set_beam_size(self, beam_size: int) -> None:
        self.beam_size = beam_size

    def prepare_for_onnx_export_(self) -> None:
        self.onnx_trace = True

    def upgrade_state_dict_named(self, state_dict: dict[str, Tensor], name: str) -> None:
        """Split an old ``in_proj_weight`` / ``in_proj_bias`` into q, k, v (as fairseq does)."""
        prefix = name + "." if name != "" else ""
        for suffix in ("weight", "bias"):
            packed = state_dict.pop(f"{prefix}in_proj_{suffix}", None)
            if packed is None:
                continue
            dim = packed.shape[0] // 3
            for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                state_dict[f"{prefix}{proj}.{suffix}"] = packed[i * dim : (i + 1) * dim]

    def _add_bias(
        self,
        k: Tensor,
        v: Tensor,
        key_padding_mask: Tensor | None,
        attn_mask: Tensor | None,
        bsz: int,
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """``add_bias_kv``: one learned key and value after the others."""
        assert self.bias_k is not None and self.bias_v is not None
        k = torch.cat([k, self.bias_k.repeat(1, bsz, 1)])
        v = torch.cat([v, self.bias_v.repeat(1, bsz, 1)])
        return (*(k, v), *pad_masks_by_one(key_padding_mask, attn_mask))  # type: ignore[return-value]


def pad_masks_by_one(
    key_padding_mask: Tensor | None, attn_mask: Tensor | None
) -> tuple[Tensor | None, Tensor | None]:
    """Both masks with one more (allowed) key at the end."""
    if attn_mask is not None:
        attn_mask = torch.cat([attn_mask, attn_mask.new_zeros(*attn_mask.shape[:-1], 1)], dim=-1)
    if key_padding_mask is not None:
        pad = key_padding_mask.new_zeros(*key_padding_mask.shape[:-1], 1)
        key_padding_mask = torch.cat([key_padding_mask, pad], dim=-1)
    return key_padding_mask, attn_mask
