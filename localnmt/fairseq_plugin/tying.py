"""Attention parameters tied across encoder layers (Pande et al. 2021, §4.2 and §5.4, configs
k and l; Table 4's AllTied / 132Tied / 120Tied).

``--encoder-tie-attn-layers 1-3`` makes the self-attention of encoder layers 1–3 use the same
projection modules as the first of them (same Parameter objects: stored once, one gradient).
``--encoder-tie-attn-params`` says which projections: ``q;k`` (default) or any of
``q;k;v;out``.

The paper's own counts decide the default: Table 3 gives 4.78M (Half Tied) and 3.21M (Fully
Tied) encoder attention parameters for Transformer-base, which is one head-sized Wq, Wk
(2·512·64) shared across the tied layers plus per-layer Wv, Wo (2·512²): 65,536 + 3·524,288 +
3·1,048,576 = 4.78M and 65,536 + 6·524,288 = 3.21M. Tying Wv and Wo too would give 3.73M and
0.59M. Shared modules survive fairseq's checkpoint save/load because the build hook re-ties
them whenever the model is built (state dicts hold one entry per layer, equal values).
"""

from __future__ import annotations

import argparse
from typing import Any

from torch import nn

from localnmt.attention.modifier import SpecError
from localnmt.attention.spec import parse_ranges
from localnmt.fairseq_plugin import extensions

PROJECTIONS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "out_proj"}


@extensions.register_model_args
def add_tying_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--encoder-tie-attn-layers",
        metavar="RANGES",
        help="encoder layers (1-based, e.g. 1-3 or all) whose self-attention projections are "
        "one shared set (Pande et al. 2021 configs k, l)",
    )
    parser.add_argument(
        "--encoder-tie-attn-params",
        metavar="NAMES",
        help="which projections --encoder-tie-attn-layers shares, ';'-separated among "
        "q;k;v;out (default q;k, as the paper's parameter counts imply)",
    )


def tied_projections(text: str | None) -> list[str]:
    """``'q;k'`` → ``['q_proj', 'k_proj']`` (names checked)."""
    names = [n.strip() for n in (text or "q;k").replace(",", ";").split(";") if n.strip()]
    bad = [n for n in names if n not in PROJECTIONS]
    if bad or not names:
        raise SpecError(
            f"--encoder-tie-attn-params: unknown '{';'.join(bad)}' (valid: q, k, v, out)"
        )
    return [PROJECTIONS[n] for n in names]


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    """The encoder layers of a translation model or of a RoBERTa-style model."""
    encoder = model.encoder
    encoder = getattr(encoder, "sentence_encoder", encoder)
    return encoder.layers


def tie_encoder_attention(
    layers: nn.ModuleList, layer_ids: list[int], projections: list[str]
) -> None:
    """Make ``projections`` of every listed layer's ``self_attn`` the first listed layer's."""
    if len(layer_ids) < 2:
        return
    owner = layers[layer_ids[0]].self_attn
    for index in layer_ids[1:]:
        attn = layers[index].self_attn
        for name in projections:
            mine, theirs = getattr(attn, name), getattr(owner, name)
            if mine.weight.shape != theirs.weight.shape:
                raise SpecError(
                    f"cannot tie {name} of encoder layers {layer_ids[0] + 1} and {index + 1}: "
                    f"shapes {tuple(theirs.weight.shape)} and {tuple(mine.weight.shape)} differ "
                    "(give the tied layers the same tied_qk groups)"
                )
            setattr(attn, name, theirs)


@extensions.register_build_hook
def tie_from_args(model: nn.Module, args: Any) -> None:
    text = getattr(args, "encoder_tie_attn_layers", None)
    if not text or str(text).lower() == "none":
        return
    layers = encoder_layers(model)
    ids = parse_ranges(str(text), "layers")
    ids = list(range(len(layers))) if ids is None else ids
    if ids and ids[-1] >= len(layers):
        raise SpecError(
            f"--encoder-tie-attn-layers {text}: the encoder has {len(layers)} layers "
            f"(valid: 1-{len(layers)})"
        )
    tie_encoder_attention(
        layers, ids, tied_projections(getattr(args, "encoder_tie_attn_params", None))
    )
