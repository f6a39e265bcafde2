"""Attach localnmt methods to a transformers model, record them in its config, restore them.

Each attention layer whose site's spec gives it at least one method gets a
:class:`~localnmt.attention.pipeline.LocalAttention` as the submodule ``localnmt``: its
modifiers (and their learned parameters) join the model's ``state_dict`` under
``<layer path>.localnmt.modifiers.<i>.…``. The layer keeps its own ``q_proj``, ``k_proj``,
``v_proj`` and ``out_proj`` (the LocalAttention's copies are removed; a method that replaces
projections, ``tied_qk``, replaces the layer's). The specs go to ``config.localnmt`` so that
:func:`from_pretrained` rebuilds the same model from a saved folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from torch import nn

from localnmt.attention.attention_specs import AttentionSpecs, SiteSpec
from localnmt.attention.layers import build_attention
from localnmt.attention.modifier import SpecError
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import check_spec
from localnmt.errors import CheckpointError
from localnmt.hf.attention import NAME, register, remember_call
from localnmt.hf.sites import SITES, HFSite, attention_sites
from localnmt.hf.versions import require_transformers

_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def apply(
    model: nn.Module,
    encoder_self: str | None = None,
    decoder_self: str | None = None,
    cross: str | None = None,
) -> nn.Module:
    """Give ``model`` the methods of the three specs (the grammar of the fairseq flags, e.g.
    ``'localness[window=query] + rel_pos[clip=16]'``) and switch it to the ``localnmt``
    attention function. Every spec is checked against every layer before the model changes
    (one :class:`~localnmt.attention.modifier.SpecError` saying what to fix). Returns
    ``model``."""
    require_transformers()
    register()
    if getattr(model.config, NAME, None) is not None or any(
        isinstance(m, LocalAttention) for m in model.modules()
    ):
        raise SpecError("localnmt.hf.apply: this model already has localnmt methods; build a "
                        "fresh model (or load it with localnmt.hf.from_pretrained)")  # fmt: skip
    specs = AttentionSpecs.parse(encoder_self, decoder_self, cross)
    sites = attention_sites(model)
    built = [(site, _build(model, site, specs.site(site.kind))) for site in sites]
    for site, attention in built:
        if attention is not None:
            _attach(site.module, attention)
    texts = specs.texts()
    model.config.localnmt = {kind: texts[kind] for kind in SITES}
    _use_attention_function(model)
    return model


def _build(model: nn.Module, site: HFSite, spec: SiteSpec) -> LocalAttention | None:
    """The LocalAttention of one layer, or None where its spec gives it no method."""
    module = site.module
    check_spec(list(spec.items), site.kind, site.num_layers, module.num_heads)
    if not any(s.applies_to(site.layer) for s in spec.items):
        return None
    cross = site.kind == "cross"
    attention = build_attention(
        site.kind, module.embed_dim, module.num_heads, spec, layer=site.layer,
        num_layers=site.num_layers, max_positions=_max_positions(model),
        dropout=float(getattr(module, "dropout", 0.0)), bias=module.q_proj.bias is not None,
        kdim=module.k_proj.in_features if cross else None,
        vdim=module.v_proj.in_features if cross else None,
    )  # fmt: skip
    return attention.to(module.q_proj.weight)


def _attach(module: nn.Module, attention: LocalAttention) -> None:
    """``attention`` becomes ``module.localnmt`` without projections of its own; a
    projection a method replaced (narrower: ``tied_qk``) replaces the layer's."""
    for name in _PROJECTIONS:
        own, theirs = getattr(attention, name), getattr(module, name)
        if own.weight.shape != theirs.weight.shape:
            setattr(module, name, own)
        delattr(attention, name)
    module.localnmt = attention
    module.register_forward_pre_hook(remember_call, with_kwargs=True)


def _max_positions(model: nn.Module) -> int:
    return int(getattr(model.config, "max_position_embeddings", None) or 1024)


def _use_attention_function(model: nn.Module) -> None:
    setter = getattr(model, "set_attn_implementation", None)
    if callable(setter):
        setter(NAME)
    else:  # transformers < 4.54
        model.config._attn_implementation = NAME


def from_pretrained(cls: Any, folder: str | Path, **kwargs: Any) -> nn.Module:
    """``cls.from_pretrained`` for a folder that ``save_pretrained`` wrote after
    :func:`apply`: the model is built from the saved config, given the recorded methods, and
    every saved tensor (methods' parameters included) is loaded into it, strictly."""
    require_transformers()
    register()
    config = kwargs.pop("config", None) or cls.config_class.from_pretrained(folder, **kwargs)
    specs = getattr(config, NAME, None)
    if not isinstance(specs, dict):
        raise CheckpointError(f"{folder}: config.json has no 'localnmt' entry; load it with "
                              f"{cls.__name__}.from_pretrained")  # fmt: skip
    config.localnmt = None
    config._attn_implementation = "sdpa"
    model = cls(config)
    apply(model, **{kind: specs.get(kind) for kind in SITES})
    _load_weights(model, Path(folder))
    _load_generation_config(model, folder)
    return model.eval()


def _load_weights(model: nn.Module, folder: Path) -> None:
    """Every tensor of the folder's checkpoint into ``model``; missing ones only where a
    tied parameter shares its storage with a loaded one or where the model class says they
    are not saved (``_keys_to_ignore_on_load_missing``: Marian's sinusoidal positions, which
    the constructor computes)."""
    from transformers.modeling_utils import load_state_dict

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        import json

        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = [n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()]
    if not files:
        raise CheckpointError(f"{folder}: no model.safetensors or pytorch_model.bin")
    state: dict = {}
    for name in files:
        state.update(load_state_dict(str(folder / name)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    model.tie_weights()
    own = model.state_dict()
    loaded = {own[n].data_ptr() for n in state if n in own}
    ignored = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_missing", None) or []]
    missing = [n for n in missing if own[n].data_ptr() not in loaded
               and not any(p.search(n) for p in ignored)]  # fmt: skip
    if missing or unexpected:
        raise CheckpointError(f"{folder}: checkpoint does not match the model: missing "
                              f"{missing[:3]}, unexpected {unexpected[:3]}")  # fmt: skip


def _load_generation_config(model: nn.Module, folder: str | Path) -> None:
    from transformers import GenerationConfig

    if (Path(folder) / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(folder)
