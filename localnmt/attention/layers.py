"""The attention core as modules any PyTorch model can hold, and as one function.

Each takes the method specs of the fairseq flags (``'localness[window=query] + rel_pos[clip=16]'``,
``'gmm[k=4]'``, ``'csan_2d[window=3,area_heads=3]'``, ``'local_heads[masks=...]'`` …) for its
site, and runs the same pipeline, methods and kernels as the fairseq plugin (C on the CPU,
SDPA / FlexAttention on the GPU; :func:`localnmt.attention.dispatch.trace` records which ran)::

    attn = LocalSelfAttention(512, 8, "localness[window=query]")
    y = attn(x, padding_mask=pad)                       # x (B, T, 512), pad (B, T) True = padding

    dec = LocalSelfAttention(512, 8, "csan_1d[window=5]", causal=True)
    cache = {}                                          # one dict for every layer of a decoder
    for t in range(steps):
        y_t = dec(x_t, cache=cache)                     # x_t (B, 1, 512): one step at a time
    reorder_cache(model, cache, order)                  # beam search: hypotheses reordered

    cross = LocalCrossAttention(512, 8, "gmm[k=4]")
    y = cross(x, memory, memory_padding_mask=src_pad)

Tensors are batch-first here; :class:`~localnmt.attention.pipeline.LocalAttention` itself keeps
fairseq's ``(T, B, C)``. A method that depends on the layer (``layers=`` in a spec) is told the
layer by ``layer`` and ``num_layers``. Positions count from each sentence's first real token,
so left and right padding give the same outputs for real tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from localnmt.attention.attention_specs import SiteSpec, parse_site
from localnmt.attention.context import AttentionSite
from localnmt.attention.multihead_parameters import IncrementalState
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.problem_builder import causal_mask
from localnmt.attention.spec import build_modifiers, check_spec

__all__ = [
    "LocalCrossAttention",
    "LocalSelfAttention",
    "build_attention",
    "causal_mask",
    "local_attention",
    "reorder_cache",
]


def build_attention(
    kind: str,
    embed_dim: int,
    num_heads: int,
    spec: str | SiteSpec = "",
    *,
    layer: int = 0,
    num_layers: int = 1,
    max_positions: int = 1024,
    dropout: float = 0.0,
    bias: bool = True,
    kdim: int | None = None,
    vdim: int | None = None,
) -> LocalAttention:
    """A :class:`LocalAttention` at site ``kind`` (``encoder_self``, ``decoder_self`` or
    ``cross``) of 0-based ``layer``, with the methods ``spec`` gives that layer (checked
    first: one :class:`~localnmt.attention.modifier.SpecError` saying what to fix); ``spec``
    is a string or an already parsed :class:`SiteSpec`."""
    specs = list((spec if isinstance(spec, SiteSpec) else parse_site(spec)).items)
    check_spec(specs, kind, num_layers, num_heads)
    site = AttentionSite(kind, layer, num_layers, embed_dim, num_heads, max_positions)
    return LocalAttention(
        embed_dim,
        num_heads,
        site=site,
        modifiers=build_modifiers(specs, site),
        kdim=kdim,
        vdim=vdim,
        dropout=dropout,
        bias=bias,
        self_attention=kind != "cross",
        encoder_decoder_attention=kind == "cross",
    )


class LocalSelfAttention(nn.Module):
    """Self-attention with localnmt methods; ``causal=True`` for a decoder (batch-first)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        spec: str = "",
        *,
        causal: bool = False,
        layer: int = 0,
        num_layers: int = 1,
        max_positions: int = 1024,
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        kind = "decoder_self" if causal else "encoder_self"
        self.attention = build_attention(
            kind, embed_dim, num_heads, spec, layer=layer, num_layers=num_layers,
            max_positions=max_positions, dropout=dropout, bias=bias,
        )  # fmt: skip

    def forward(
        self,
        x: Tensor,
        padding_mask: Tensor | None = None,
        *,
        cache: IncrementalState | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """``x`` ``(B, T, C)``, ``padding_mask`` ``(B, T)`` True at padding (with a cache: of
        this call's tokens). Returns ``(B, T, C)``, and the head-averaged weights ``(B, T,
        Tk)`` with ``need_weights``."""
        padding_mask = checked_padding(padding_mask, x.shape[:2], "padding_mask")
        causal = self.attention.site.causal
        queries = x.size(1)
        keys = queries + _cached_keys(self.attention, cache)
        attn_mask = causal_mask(queries, keys, x.device) if causal and queries > 1 else None
        return _run(self.attention, x.transpose(0, 1), None, padding_mask, attn_mask, cache,
                    False, need_weights)  # fmt: skip


class LocalCrossAttention(nn.Module):
    """Cross-attention (decoder queries, encoder memory) with localnmt methods (batch-first)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        spec: str = "",
        *,
        memory_dim: int | None = None,
        layer: int = 0,
        num_layers: int = 1,
        max_positions: int = 1024,
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        self.attention = build_attention(
            "cross", embed_dim, num_heads, spec, layer=layer, num_layers=num_layers,
            max_positions=max_positions, dropout=dropout, bias=bias, kdim=memory_dim,
            vdim=memory_dim,
        )  # fmt: skip

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        memory_padding_mask: Tensor | None = None,
        *,
        cache: IncrementalState | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """``x`` ``(B, Tq, C)`` decoder states, ``memory`` ``(B, Tk, Cm)`` with
        ``memory_padding_mask`` ``(B, Tk)`` True at padding. With a cache the memory's keys
        and values are projected at the first step only, and methods that follow the decoder
        step (GMM's cumulative means) continue from the cache."""
        memory_padding_mask = checked_padding(memory_padding_mask, memory.shape[:2],
                                              "memory_padding_mask")  # fmt: skip
        m = memory.transpose(0, 1)
        return _run(self.attention, x.transpose(0, 1), m, memory_padding_mask, None, cache,
                    True, need_weights)  # fmt: skip


def checked_padding(mask: Tensor | None, shape: tuple[int, ...] | torch.Size | None,
                    name: str) -> Tensor | None:  # fmt: skip
    """``mask`` where it is a bool tensor (of ``shape`` ``(B, T)`` where given), True at
    padding; else one ValueError saying what to pass. A 0/1 integer or float mask is refused:
    it reads either way, and transformers' ``attention_mask`` is 1 at real tokens, the
    opposite of this one."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        dtype = str(mask.dtype).removeprefix("torch.")
        raise ValueError(f"{name} must be a bool tensor, True at padding; got {dtype} (from a "
                         "transformers attention_mask, 1 at real tokens, pass "
                         "attention_mask == 0)")  # fmt: skip
    if shape is not None and tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} must be (batch, length) = {tuple(shape)}, got "
                         f"{tuple(mask.shape)}")  # fmt: skip
    return mask


def _cached_keys(attention: LocalAttention, cache: IncrementalState | None) -> int:
    saved = attention._get_input_buffer(cache).get("prev_key")
    return 0 if saved is None else saved.size(2)


def _run(
    attention: LocalAttention,
    query: Tensor,
    memory: Tensor | None,
    padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    cache: IncrementalState | None,
    static_kv: bool,
    need_weights: bool,
) -> Tensor | tuple[Tensor, Tensor]:
    out, weights = attention(
        query, memory, memory, key_padding_mask=padding_mask, incremental_state=cache,
        need_weights=need_weights, static_kv=static_kv, attn_mask=attn_mask,
    )  # fmt: skip
    out = out.transpose(0, 1)
    return (out, weights) if need_weights and weights is not None else out


def reorder_cache(model: nn.Module, cache: IncrementalState, new_order: Tensor) -> None:
    """Beam search: reorder the cached rows of every localnmt attention in ``model`` (the
    modifiers' own decoding state included) by ``new_order`` (hypothesis indices)."""
    for module in model.modules():
        if isinstance(module, LocalAttention):
            module.reorder_incremental_state(cache, new_order)


def local_attention(
    attention: LocalAttention,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    query_input: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    attn_mask: Tensor | None = None,
    causal: bool | None = None,
    scaling: float | None = None,
    state: dict | None = None,
    query_offset: Tensor | None = None,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """The functional form, on heads already projected: ``q`` ``(B, H, Tq, d)``, ``k`` and
    ``v`` ``(B, H, Tk, d)`` (cached keys included); returns ``(out (B, H, Tq, d), weights
    (B, H, Tq, Tk) or None)``. ``attention`` holds the methods and their parameters (its
    projections are not used); ``query_input`` ``(B, Tq, C)`` is the layer input, which
    BLOCK's gate reads; ``key_padding_mask`` ``(B, Tk)`` bool, True at padding (a 0/1 mask
    is refused: :func:`checked_padding`). ``scaling`` multiplies ``q`` (default ``1/√d``);
    ``causal`` (default: the site's) adds the causal triangle to ``attn_mask`` (``(Tq, Tk)``
    bool, True = blocked, or additive float). ``state`` is the module's decoding dict and
    ``query_offset`` each row's decoder step, for methods that follow decoding in
    cross-attention."""
    key_padding_mask = checked_padding(key_padding_mask, None, "key_padding_mask")
    scale = attention.scaling if scaling is None else scaling
    if causal is None:
        causal = attention.site.causal
    tq, tk = q.size(2), k.size(2)
    if causal and tq > 1 and attn_mask is None:
        attn_mask = causal_mask(tq, tk, q.device)
    elif causal and tq > 1:
        blocked = causal_mask(tq, tk, q.device)
        attn_mask = (
            attn_mask | blocked
            if attn_mask.dtype == torch.bool
            else attn_mask.masked_fill(blocked, float("-inf"))
        )
    if query_input is None:
        readers = [m.name for m in attention.modifiers if m.reads_layer_input]
        if readers:
            raise ValueError(f"method {readers[0]} reads the layer input: pass query_input")
    return attention.attend_heads(
        None if query_input is None else query_input.transpose(0, 1), q * scale, k, v,
        key_padding_mask=key_padding_mask,
        attn_mask=attn_mask, state=state, query_offset=query_offset, need_weights=need_weights,
    )  # fmt: skip
