"""Where the attention layers of a transformers encoder-decoder sit, and which site each is.

MarianMT, BART / mBART, M2M100 / NLLB (and the other BART-like models: Pegasus, Blenderbot,
…) keep ``encoder.layers[i].self_attn``, ``decoder.layers[i].self_attn`` (causal) and
``decoder.layers[i].encoder_attn`` (cross): self and cross are told apart by the module path,
decoder self-attention by the decoder. T5 keeps its own layout and a learned relative position
bias added inside attention, which the pipeline does not take: refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from localnmt.attention.modifier import SpecError

SITES = ("encoder_self", "decoder_self", "cross")


@dataclass
class HFSite:
    """One attention layer of the model: its site kind, 0-based layer and the module."""

    kind: str
    layer: int
    num_layers: int
    module: nn.Module
    path: str


def attention_sites(model: nn.Module) -> list[HFSite]:
    """Every attention layer of an encoder-decoder model, encoder first."""
    model_type = getattr(getattr(model, "config", None), "model_type", "")
    if model_type in ("t5", "mt5", "umt5", "longt5"):
        raise SpecError(
            f"localnmt.hf does not support {model_type}: its attention adds a learned relative "
            "position bias per head, which the localnmt pipeline does not take (supported: "
            "MarianMT, BART / mBART, M2M100 / NLLB and other BART-like models)"
        )
    encoder, decoder = _part(model, "get_encoder"), _part(model, "get_decoder")
    names = {id(m): n for n, m in model.named_modules()}
    sites: list[HFSite] = []
    for kind, part, attr in (
        ("encoder_self", encoder, "self_attn"),
        ("decoder_self", decoder, "self_attn"),
        ("cross", decoder, "encoder_attn"),
    ):
        layers = getattr(part, "layers", None)
        if layers is None or not all(hasattr(layer, attr) for layer in layers):
            raise SpecError(
                f"localnmt.hf: {type(model).__name__} has no {kind} attention at "
                f"layers[i].{attr} (supported: MarianMT, BART / mBART, M2M100 / NLLB)"
            )
        for index, layer in enumerate(layers):
            module = getattr(layer, attr)
            sites.append(HFSite(kind, index, len(layers), module, names.get(id(module), "")))
    return sites


def _part(model: nn.Module, getter: str) -> nn.Module:
    get = getattr(model, getter, None)
    part = get() if callable(get) else None
    if part is None:
        raise SpecError(
            f"localnmt.hf: {type(model).__name__} is not an encoder-decoder model with "
            f"{getter}() (supported: MarianMT, BART / mBART, M2M100 / NLLB)"
        )
    return part
