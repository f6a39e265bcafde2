"""CNNs (Yu et al. 2018, QANet; as compared by Yang et al. 2019, Table 1): convolution layers
feeding the self-attention of the chosen encoder layers.

Each chosen layer gets, before its self-attention sub-layer, ``convs`` residual blocks
(QANet §2.2: ``x + conv(layernorm(x))``, ReLU) over time, kernel ``kernel``. ``separable`` is
QANet's depthwise-separable convolution; ``standard`` a full convolution (Kim 2014, which
Yang et al. 2019 cite for these layers). Padded positions are zeroed before every convolution,
so a sentence's convolution sees zeros beyond its edges whatever the padding side.

Flags (set by ``--arch`` presets with getattr; none = no convolutions)::

    --encoder-cnn-layers 1-3   --encoder-cnn-convs 4   --encoder-cnn-kernel 7
    --encoder-cnn-type separable|standard

The convolutions are attached to the fairseq layer as ``layer.cnn`` (state-dict
``encoder.layers.<i>.cnn.*``) and run from a forward pre-hook, so the layer keeps its class.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import Tensor, nn

from localnmt.attention.spec import parse_ranges
from localnmt.fairseq_plugin import extensions

CONV_TYPES = ("separable", "standard")


class ConvBlock(nn.Module):
    """``x + relu(conv(layernorm(x)))`` over time, padding zeroed (QANet §2.2)."""

    def __init__(self, dim: int, kernel: int, kind: str, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        if kind == "separable":
            self.conv = nn.Sequential(
                nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim),
                nn.Conv1d(dim, dim, 1),
            )
        else:
            self.conv = nn.Conv1d(dim, dim, kernel, padding=kernel // 2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, padding: Tensor | None) -> Tensor:
        """``x`` (T, B, C), ``padding`` (B, T) True at padding."""
        y = self.norm(x)
        if padding is not None:
            y = y.masked_fill(padding.transpose(0, 1)[..., None], 0.0)
        y = self.conv(y.permute(1, 2, 0)).permute(2, 0, 1)
        return x + self.dropout(torch.relu(y))


class ConvStack(nn.Module):
    def __init__(self, dim: int, convs: int, kernel: int, kind: str, dropout: float):
        super().__init__()
        self.blocks = nn.ModuleList(ConvBlock(dim, kernel, kind, dropout) for _ in range(convs))

    def forward(self, x: Tensor, padding: Tensor | None) -> Tensor:
        for block in self.blocks:
            x = block(x, padding)
        return x


@extensions.register_model_args
def add_cnn_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("CNN layers before self-attention (Yu et al. 2018)")
    group.add_argument(
        "--encoder-cnn-layers",
        metavar="RANGES",
        help="encoder layers (1-based, e.g. 1-3) whose self-attention is fed "
        "by convolutions; 'none' = no convolutions",
    )
    group.add_argument(
        "--encoder-cnn-convs",
        type=int,
        metavar="N",
        help="convolution blocks per chosen layer (QANet: 4)",
    )
    group.add_argument(
        "--encoder-cnn-kernel", type=int, metavar="K", help="convolution width, odd (QANet: 7)"
    )
    group.add_argument("--encoder-cnn-type", choices=CONV_TYPES,
                       help="depthwise-separable (QANet) or standard convolutions")  # fmt: skip


def _settings(cfg: Any) -> tuple[list[int], int, int, str]:
    text = getattr(cfg, "encoder_cnn_layers", None)
    layers = [] if text in (None, "", "none") else parse_ranges(str(text), "layers")
    convs = int(getattr(cfg, "encoder_cnn_convs", None) or 4)
    kernel = int(getattr(cfg, "encoder_cnn_kernel", None) or 7)
    kind = getattr(cfg, "encoder_cnn_type", None) or "separable"
    if kernel < 1 or kernel % 2 == 0:
        raise ValueError(f"--encoder-cnn-kernel {kernel} must be odd and >= 1")
    if convs < 1:
        raise ValueError(f"--encoder-cnn-convs {convs} must be >= 1")
    return layers or [], convs, kernel, kind


def _pre_hook(layer: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    x = args[0] if args else kwargs["x"]
    padding = args[1] if len(args) > 1 else kwargs.get("encoder_padding_mask")
    x = layer.cnn(x, padding)
    if args:
        return (x, *args[1:]), kwargs
    return args, {**kwargs, "x": x}


@extensions.register_layer_wrapper
def add_convolutions(layer: nn.Module, cfg: Any, side: str, index: int) -> nn.Module:
    """Attach ``layer.cnn`` to the chosen encoder layers."""
    if side != "encoder":
        return layer
    layers, convs, kernel, kind = _settings(cfg)
    if index not in (layers or []):
        return layer
    dim = cfg.encoder.embed_dim if hasattr(cfg, "encoder") else cfg.encoder_embed_dim
    layer.cnn = ConvStack(dim, convs, kernel, kind, float(getattr(cfg, "dropout", 0.0)))
    layer.register_forward_pre_hook(_pre_hook, with_kwargs=True)
    return layer
