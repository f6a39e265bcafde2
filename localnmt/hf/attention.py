"""The attention and mask functions registered with transformers under :data:`NAME`.

transformers calls :func:`localnmt_attention` for every attention layer of a model whose
``config._attn_implementation`` is ``"localnmt"``, with the layer itself as ``module`` and its
projected heads. A layer that holds a :class:`~localnmt.attention.pipeline.LocalAttention`
(attached by :func:`localnmt.hf.apply` as ``module.localnmt``) runs the localnmt pipeline on
them (:func:`localnmt.attention.layers.local_attention`: the same code, methods and kernels as
the fairseq plugin); any other layer runs transformers' own SDPA attention. T5's relative
position bias (``position_bias``, ``(1 or B, H, Tq, Tk)``) joins the logits as an additive
float mask, and T5's ``scaling`` (1: T5 does not divide by √d) multiplies the queries as
given (docs/huggingface.md, "T5"). The mask function
is transformers' SDPA mask (since transformers 5 a custom name without one gets no mask at
all); the pipeline reads each key's padding from the mask's last query row (it sees every
real key, also in a causal mask) and takes the causal triangle from the site.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import torch
from torch import Tensor, nn

from localnmt.attention.incremental import reorder_buffer
from localnmt.attention.layers import local_attention
from localnmt.attention.pipeline import LocalAttention

NAME = "localnmt"
#: The names under which transformers' attention layers have received their cache.
_CACHE_KWARGS = ("cache", "past_key_values", "past_key_value")


def register() -> None:
    """Register :func:`localnmt_attention` and the mask function under :data:`NAME` (again is
    harmless)."""
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, localnmt_attention)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    except ImportError:  # no mask registry: the model builds transformers' eager mask itself
        return
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def check_dispatch(stack: nn.Module, args: tuple) -> None:
    """Forward pre-hook of the encoder and decoder of a model :func:`localnmt.hf.apply` gave
    methods: each layer with methods must still dispatch to :data:`NAME`.
    ``model.set_attn_implementation("sdpa")`` (or any other name) afterwards would otherwise
    run plain attention without a word while the methods' parameters stay in the model and
    its config records them."""
    for layer in stack.__dict__.get("_localnmt_layers", ()):
        implementation = getattr(getattr(layer, "config", None), "_attn_implementation", NAME)
        if implementation != NAME:
            specs = stack.__dict__.get("_localnmt_specs") or {}
            methods = "; ".join(f"{kind}: {spec}" for kind, spec in specs.items() if spec)
            raise RuntimeError(
                f"localnmt: this model has localnmt methods ({methods}) but its attention "
                f"implementation is now {implementation!r}, which would skip them; switch back "
                f"with model.set_attn_implementation({NAME!r}), or build a model without "
                "localnmt.hf.apply for plain attention"
            )


def remember_call(module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
    """Forward pre-hook of a layer with localnmt methods: keep its input (BLOCK's gate reads
    the layer input) and its decoding cache for the attention function."""
    hidden = args[0] if args else kwargs.get("hidden_states")
    cache = next((kwargs[n] for n in _CACHE_KWARGS if kwargs.get(n) is not None), None)
    module.__dict__["_localnmt_call"] = (hidden, cache)  # a plain attribute: no Module checks


def localnmt_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[Tensor, Tensor | None]:
    """transformers' attention-function interface: ``query`` ``(B, H, Tq, d)``, ``key`` and
    ``value`` ``(B, H, Tk, d)``; returns ``(out (B, Tq, H, d), weights or None)``."""
    attention: LocalAttention | None = module._modules.get("localnmt")
    if attention is None:
        return _sdpa()(module, query, key, value, attention_mask, scaling=scaling,
                       dropout=dropout, **kwargs)  # fmt: skip
    if kwargs.get("head_mask") is not None:
        raise ValueError("localnmt attention does not take head_mask")
    if module.training and torch.is_grad_enabled() and "_localnmt_trained" not in vars(attention):
        warn_if_frozen(attention)
    calls = module.__dict__
    hidden, cache = calls.get("_localnmt_call", (None, None))
    calls["_localnmt_call"] = (None, None)  # do not keep the activation past this call
    state = query_offset = None
    if cache is not None and attention.site.kind == "cross":
        state = decoding_state(cache, attention)
        past = _decoder_length(cache, getattr(module, "layer_idx", 0)) - query.size(2)
        query_offset = _query_offset(cache, past, query)
    if state is None:
        padding = key_padding(attention_mask)
    else:
        padding = _source_padding(state, attention_mask)
    need_weights = bool(kwargs.get("output_attentions"))
    out, weights = local_attention(
        attention, query, key, value, query_input=hidden, key_padding_mask=padding,
        attn_mask=kwargs.get("position_bias"), scaling=scaling, state=state,
        query_offset=query_offset, need_weights=need_weights,
    )  # fmt: skip
    return out.transpose(1, 2), weights


def warn_if_frozen(attention: LocalAttention) -> None:
    """Once per layer, at its first forward in training mode with gradients on: warn where the
    methods' own parameters do not require grad. They are new (random) on a pretrained
    checkpoint, and PEFT's ``get_peft_model`` freezes every parameter but its adapters', so a
    LoRA fine-tune would keep them at their initialisation without a word. (``attention`` may
    be PEFT's ``ModulesToSaveWrapper``, whose attributes are those of its trainable copy.)"""
    attention.__dict__["_localnmt_trained"] = True
    frozen = [p for m in attention.modifiers for p in m.parameters() if not p.requires_grad]
    if not frozen:
        return
    site = attention.site
    names = ", ".join(m.name for m in attention.modifiers)
    warnings.warn(
        f"localnmt: the parameters of the methods in {site.kind} layer {site.layer} ({names}) "
        "do not require grad while the model trains, so they keep their initialisation. With "
        "PEFT, give get_peft_model modules_to_save=['localnmt'] (or set requires_grad on the "
        "parameters named '.localnmt.'); where that is intended, ignore this warning",
        stacklevel=2,
    )


def _sdpa():
    """transformers' own SDPA attention function (imported on first use)."""
    global _sdpa_forward
    if _sdpa_forward is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        _sdpa_forward = sdpa_attention_forward
    return _sdpa_forward


_sdpa_forward = None


def _query_offset(cache: Any, past: int, query: Tensor) -> Tensor:
    """Each row's decoder step before this call ``(B,)`` float32: one tensor per step, which
    every cross-attention layer of the step reads (kept on the cache)."""
    batch, device = query.size(0), query.device
    kept = cache.__dict__.get("_localnmt_offset")
    if kept is not None and kept[0] == (past, batch, device):
        return kept[1]
    offset = torch.full((batch,), float(past), device=device)
    cache.__dict__["_localnmt_offset"] = ((past, batch, device), offset)
    return offset


def key_padding(mask: Tensor | None) -> Tensor | None:
    """``(B, Tk)`` True at padding, from transformers' mask: 4-D bool (True = attend) or
    additive float, or 2-D (1 = real token); None where no key is padding. A model hands
    every layer of a forward the same masks (a decoder alternates its causal mask and the
    source's): the answers for the last few masks seen are kept (while each tensor lives and
    is not written to), which spares each further layer a pass and a sync."""
    if mask is None:
        return None
    version = _version_of(mask)
    for seen, seen_version, answer in _recent_padding:
        if seen() is mask and version is not None and seen_version == version:
            return answer
    if mask.dim() == 2:
        blocked = ~mask.bool()
    else:
        row = mask[:, 0, -1, :]  # the last query sees every real key, causal or not
        blocked = ~row if row.dtype == torch.bool else row < 0
    found = blocked if bool(blocked.any()) else None
    _remember_padding(mask, version, found)
    return found


def _source_padding(state: dict, mask: Tensor | None) -> Tensor | None:
    """:func:`key_padding` of a cross-attention decoding step's mask. transformers builds the
    same source mask anew at every step: equal to this layer's mask of the last step, it gives
    the last answer (the same tensor, which a kept step plan recognises by identity)."""
    kept = state.get(_SOURCE_MASK)
    if kept is not None and mask is not None:
        last, answer = kept  # ``last``: a copy, which nothing else can write to
        if last.shape == mask.shape and last.dtype == mask.dtype and torch.equal(last, mask):
            return answer
    answer = key_padding(mask)
    if mask is not None:
        state[_SOURCE_MASK] = (mask.clone(), answer)
    return answer


#: Where :func:`_source_padding` keeps a layer's last source mask in its decoding state.
_SOURCE_MASK = "hf source mask"
#: ``(weak reference to a mask, its version counter, key_padding's answer)``, latest first.
_recent_padding: tuple[tuple[weakref.ref, int, Tensor | None], ...] = ()
_REMEMBERED_MASKS = 4


def _remember_padding(mask: Tensor, version: int | None, found: Tensor | None) -> None:
    global _recent_padding
    if version is not None:
        entry = (weakref.ref(mask), version, found)
        _recent_padding = (entry, *_recent_padding[: _REMEMBERED_MASKS - 1])


def _version_of(mask: Tensor) -> int | None:
    """The tensor's version counter (None for inference tensors, which keep none)."""
    try:
        return mask._version
    except RuntimeError:
        return None


def _decoder_length(cache: Any, layer: int) -> int:
    """Decoder tokens the self-attention cache of ``layer`` holds (this step's included)."""
    own = getattr(cache, "self_attention_cache", cache)
    return int(own.get_seq_length(layer))


def decoding_state(cache: Any, attention: LocalAttention) -> dict:
    """The decoding dict of ``attention`` for one generation, kept on transformers' cache
    object (modifiers keep per-hypothesis tensors there: GMM's cumulative means), reordered
    with it when beam search reorders the cache."""
    states = cache.__dict__.get("_localnmt_states")
    if states is None:
        states = cache.__dict__["_localnmt_states"] = {}
        reorder = cache.reorder_cache

        def reorder_cache(beam_idx: Tensor) -> Any:
            for owner, entries in states.values():
                reorder_buffer(entries, beam_idx, owner.encoder_decoder_attention, False)
            return reorder(beam_idx)

        cache.reorder_cache = reorder_cache
    return states.setdefault(id(attention), (attention, {}))[1]
