"""Where the attention layers of a transformers encoder-decoder sit, and which site each is.

Two layouts (:class:`Layout`):

- MarianMT, BART / mBART, M2M100 / NLLB (and the other BART-like models: Pegasus, Blenderbot,
  …) keep ``encoder.layers[i].self_attn``, ``decoder.layers[i].self_attn`` (causal) and
  ``decoder.layers[i].encoder_attn`` (cross), with projections ``q_proj`` … ``out_proj``;
- T5, mT5 and UMT5 keep ``encoder.block[i].layer[0].SelfAttention``,
  ``decoder.block[i].layer[0].SelfAttention`` (causal) and
  ``decoder.block[i].layer[1].EncDecAttention`` (cross), with projections ``q``, ``k``, ``v``,
  ``o``; their self-attention adds a learned relative position bias, which the attention
  function receives (only from transformers 5.15.0 on: :func:`~localnmt.hf.versions.
  require_t5_dispatch`). LongT5's encoder runs local / transient-global attention of its own:
  refused in one line.

Self and cross are told apart by the module path, decoder self-attention by the decoder.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import nn

from localnmt.attention.modifier import SpecError
from localnmt.hf.versions import require_t5_dispatch

SITES = ("encoder_self", "decoder_self", "cross")
SUPPORTED = "MarianMT, BART / mBART, M2M100 / NLLB, T5 / mT5 / UMT5"
T5_TYPES = ("t5", "mt5", "umt5")


@dataclass(frozen=True)
class Layout:
    """Where a model family keeps its attention layers and what it calls their parts."""

    layers: str  #: the encoder's and the decoder's list of layers
    self_attention: str  #: path of the self-attention inside a layer
    cross_attention: str  #: path of the cross-attention inside a decoder layer
    projections: tuple[str, str, str, str]  #: query, key, value, output
    width: str  #: attribute holding all heads' width (H·d)
    heads: str  #: attribute holding the number of heads
    #: whether the layer splits its projections into heads of its head width (``view(…, -1,
    #: d)``), so that a method's narrower projection (``tied_qk``) passes through it
    narrow_projections: bool = True
    #: whether self-attention adds a relative position bias (T5's) to the logits
    position_bias: bool = False


BART_LIKE = Layout(
    "layers", "self_attn", "encoder_attn", ("q_proj", "k_proj", "v_proj", "out_proj"),
    "embed_dim", "num_heads",
)  # fmt: skip
T5_LIKE = Layout(
    "block", "layer.0.SelfAttention", "layer.1.EncDecAttention", ("q", "k", "v", "o"),
    "inner_dim", "n_heads", position_bias=True,
)  # fmt: skip
#: UMT5 splits heads by their number (``view(B, -1, H, d)``): no narrower projection
UMT5_LIKE = replace(T5_LIKE, narrow_projections=False)


@dataclass
class HFSite:
    """One attention layer of the model: its site kind, 0-based layer and the module."""

    kind: str
    layer: int
    num_layers: int
    module: nn.Module
    path: str
    layout: Layout = BART_LIKE

    @property
    def width(self) -> int:
        """All heads' width, H·d."""
        return int(getattr(self.module, self.layout.width))

    @property
    def num_heads(self) -> int:
        return int(getattr(self.module, self.layout.heads))

    def projection(self, role: int) -> nn.Linear:
        """The layer's query (0), key (1), value (2) or output (3) projection."""
        return getattr(self.module, self.layout.projections[role])


def layout_of(model: nn.Module) -> Layout:
    """The layout of ``model``'s family; one line where the family is not supported."""
    model_type = getattr(getattr(model, "config", None), "model_type", "")
    if model_type == "longt5":
        raise SpecError(
            "localnmt.hf does not support longt5: its encoder runs local / transient-global "
            f"attention of its own, not through transformers' attention functions (supported: "
            f"{SUPPORTED})"
        )
    if model_type in T5_TYPES:
        require_t5_dispatch(model_type)
        return UMT5_LIKE if model_type == "umt5" else T5_LIKE
    return BART_LIKE


def attention_sites(model: nn.Module) -> list[HFSite]:
    """Every attention layer of an encoder-decoder model, encoder first."""
    layout = layout_of(model)
    encoder, decoder = stack(model, "get_encoder"), stack(model, "get_decoder")
    names = {id(m): n for n, m in model.named_modules()}
    sites: list[HFSite] = []
    for kind, part, path in (
        ("encoder_self", encoder, layout.self_attention),
        ("decoder_self", decoder, layout.self_attention),
        ("cross", decoder, layout.cross_attention),
    ):
        layers = getattr(part, layout.layers, None)
        modules = None if layers is None else [_get(layer, path) for layer in layers]
        if modules is None or any(m is None for m in modules):
            raise SpecError(
                f"localnmt.hf: {type(model).__name__} has no {kind} attention at "
                f"{layout.layers}[i].{path} (supported: {SUPPORTED})"
            )
        for index, module in enumerate(modules):
            sites.append(HFSite(kind, index, len(modules), module, names.get(id(module), ""),
                                layout))  # fmt: skip
    return sites


def _get(layer: nn.Module, path: str) -> nn.Module | None:
    """``layer``'s submodule at the dotted ``path`` (``layer.1.EncDecAttention``), or None."""
    try:
        return layer.get_submodule(path)
    except AttributeError:
        return None


def stack(model: nn.Module, getter: str) -> nn.Module:
    """The model's encoder (``getter`` ``get_encoder``) or decoder; one line where it has none."""
    get = getattr(model, getter, None)
    part = get() if callable(get) else None
    if part is None:
        raise SpecError(
            f"localnmt.hf: {type(model).__name__} is not an encoder-decoder model with "
            f"{getter}() (supported: {SUPPORTED})"
        )
    return part
