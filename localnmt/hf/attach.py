"""Attach localnmt methods to a transformers model, record them in its config, restore them.

Each attention layer whose site's spec gives it at least one method gets a
:class:`~localnmt.attention.pipeline.LocalAttention` as the submodule ``localnmt``: its
modifiers (and their learned parameters) join the model's ``state_dict`` under
``<layer path>.localnmt.modifiers.<i>.…``. The layer keeps its own query, key, value and output
projections (``q_proj`` … ``out_proj``, T5's ``q`` … ``o``: the LocalAttention's copies are
removed; a method that replaces projections, ``tied_qk``, replaces the layer's). The specs go
to ``config.localnmt`` so that :func:`from_pretrained` rebuilds the same model from a saved
folder.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from localnmt.attention.attention_specs import AttentionSpecs, SiteSpec
from localnmt.attention.layers import build_attention
from localnmt.attention.modifier import SpecError
from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.spec import check_spec
from localnmt.errors import CheckpointError
from localnmt.hf.attention import NAME, check_dispatch, register, remember_call
from localnmt.hf.sites import SITES, HFSite, attention_sites, stack
from localnmt.hf.versions import require_transformers

#: the LocalAttention's projections, in the order of :attr:`~localnmt.hf.sites.Layout.projections`
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
#: methods whose transform stacks neighbouring heads' keys along the key axis, where the core
#: does not lay out an additive mask (T5's position bias) for them
_STACKED_KEYS = ("csan_2d",)


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
    _check_fresh(model)
    specs = AttentionSpecs.parse(encoder_self, decoder_self, cross)
    sites = attention_sites(model)
    built = [(site, _build(model, site, specs.site(site.kind))) for site in sites]
    _own_config(model)
    for site, attention in built:
        if attention is not None:
            _attach(site, attention)
    texts = specs.texts()
    model.config.localnmt = {kind: texts[kind] for kind in SITES}
    _use_attention_function(model)
    _on_load(model, check_loaded_methods)
    _check_dispatch_on_call(model, [site.module for site, a in built if a is not None],
                            model.config.localnmt)  # fmt: skip
    return model


def _check_dispatch_on_call(model: nn.Module, layers: list[nn.Module], specs: dict) -> None:
    """:func:`~localnmt.hf.attention.check_dispatch` as a forward pre-hook of the encoder and
    the decoder (once per call of each, not on every layer's call of every decoding step;
    on the stacks rather than the model, which PEFT calls through ``forward`` directly)."""
    parts = (stack(model, "get_encoder"), stack(model, "get_decoder"))
    for part in {id(p): p for p in parts}.values():
        # plain attributes: no submodules, nothing in the state_dict
        part.__dict__["_localnmt_layers"] = layers
        part.__dict__["_localnmt_specs"] = dict(specs)
        part.register_forward_pre_hook(check_dispatch)


def _on_load(model: nn.Module, hook: Any) -> None:
    """``hook(module, state_dict, prefix, …, error_msgs)`` before every ``load_state_dict``
    of ``model`` (torch's public registration where it has one, its older private one else)."""
    public = getattr(model, "register_load_state_dict_pre_hook", None)
    if callable(public):
        public(hook)
    else:  # older torch (2.1 has only the private one; it raises error_msgs as well)
        model._register_load_state_dict_pre_hook(hook, with_module=True)


def check_loaded_methods(module: nn.Module, state_dict: dict, prefix: str, local_metadata: Any,
                         strict: bool, missing_keys: list, unexpected_keys: list,
                         error_msgs: list) -> None:  # fmt: skip
    """A ``load_state_dict`` pre-hook of a model with methods: a state that brings methods'
    parameters (``….localnmt.…``) this model does not have is one error, strict or not, so
    that a checkpoint of other specs (transformers' ``Trainer`` resumes non-strictly, with a
    logged warning) cannot leave the model's own methods starting afresh. A state with a part
    of the model's (one shard of a sharded checkpoint) or none (a pretrained checkpoint to
    fine-tune from) loads as before; shapes that differ fail in torch's own check."""
    incoming = {k[len(prefix):] for k in state_dict if k.startswith(prefix) and ".localnmt." in k}
    if not incoming:
        return
    own = {k for k in module.state_dict() if ".localnmt." in k}
    extra = sorted(incoming - own)
    if extra:
        error_msgs.append(
            f"localnmt: the state has {len(extra)} method parameters this model has not (e.g. "
            f"{extra[:2]}; this model's methods: {getattr(module.config, NAME, None)}): a "
            "checkpoint of a model with other localnmt specs: load it into a model with those "
            "(or localnmt.hf.from_pretrained its folder)"
        )


def _check_fresh(model: nn.Module) -> None:
    """One line where ``model`` has methods already, or a config that records some without
    any attached (built from the config of a model :func:`apply` changed, or of a folder it
    saved): such a model would run plain attention while its config claims the methods."""
    if any(isinstance(m, LocalAttention) for m in model.modules()):
        raise SpecError("localnmt.hf.apply: this model already has localnmt methods; build a "
                        "fresh model (or load it with localnmt.hf.from_pretrained)")  # fmt: skip
    recorded = getattr(model.config, NAME, None)
    if isinstance(recorded, dict) and not any(recorded.values()):
        raise SpecError("localnmt.hf.apply: this model went through localnmt.hf.apply with no "
                        "method at any site already; build a fresh model to give it "
                        "methods")  # fmt: skip
    if recorded is not None:
        raise SpecError(f"localnmt.hf.apply: this model's config records localnmt methods "
                        f"(config.localnmt = {recorded}) but the model has none: it was built "
                        "from the config of a model that localnmt.hf.apply changed or saved; "
                        "build it from a fresh config, or load the folder with "
                        "localnmt.hf.from_pretrained")  # fmt: skip


def _own_config(model: nn.Module) -> None:
    """Give ``model`` a copy of its config before the methods are recorded in it. A
    transformers model keeps the very config object it was built from and hands it to its
    layers, so a second model built from the same object (the baseline beside the method
    model) would otherwise run the localnmt attention function and save the methods' specs in
    its own config.json."""
    shared = model.config
    own = copy.deepcopy(shared)
    for module in model.modules():
        if getattr(module, "config", None) is shared:
            module.config = own


def _build(model: nn.Module, site: HFSite, spec: SiteSpec) -> LocalAttention | None:
    """The LocalAttention of one layer, or None where its spec gives it no method."""
    check_spec(list(spec.items), site.kind, site.num_layers, site.num_heads)
    if not any(s.applies_to(site.layer) for s in spec.items):
        return None
    cross = site.kind == "cross"
    query, key, value = (site.projection(role) for role in range(3))
    attention = build_attention(
        site.kind, site.width, site.num_heads, spec, layer=site.layer,
        num_layers=site.num_layers, max_positions=_max_positions(model),
        dropout=float(getattr(site.module, "dropout", 0.0)), bias=query.bias is not None,
        kdim=key.in_features if cross else None, vdim=value.in_features if cross else None,
    )  # fmt: skip
    _check_layout(site, attention, query.in_features)
    return attention.to(query.weight)


def _check_layout(site: HFSite, attention: LocalAttention, input_width: int) -> None:
    """One line for a method this layer cannot carry: one that stacks keys where the layer
    adds a position bias; one that reads the layer input or replaces a projection where the
    input is not as wide as the heads (T5 with ``d_model != num_heads·d_kv``); a narrower
    projection where the layer splits heads by their number (UMT5)."""
    where = f"localnmt.hf: {site.path or site.kind}"
    for modifier in attention.modifiers:
        if site.layout.position_bias and site.kind != "cross" and modifier.name in _STACKED_KEYS:
            raise SpecError(f"{where}: method '{modifier.name}' stacks neighbouring heads' keys, "
                            "which the layer's relative position bias is not laid out for "
                            "(T5 family: use csan_1d)")  # fmt: skip
        if modifier.reads_layer_input and input_width != site.width:
            raise SpecError(f"{where}: method '{modifier.name}' reads the layer input "
                            f"({input_width} wide), which must be as wide as the heads "
                            f"({site.width})")  # fmt: skip
    for role in _replaced(site, attention):
        own, theirs = getattr(attention, _PROJECTIONS[role]), site.projection(role)
        method = next((m.name for m in attention.modifiers if m.uses("transform")), "a method")
        if own.in_features != theirs.in_features or not site.layout.narrow_projections:
            raise SpecError(f"{where}: method '{method}' replaces "
                            f"{site.layout.projections[role]} by a narrower projection, which "
                            f"this {type(site.module).__name__} cannot take")  # fmt: skip


def _replaced(site: HFSite, attention: LocalAttention) -> list[int]:
    """The projections (roles 0-3) a method replaced: narrower on the heads' side than the
    layer's (the heads' side is the output of q, k, v and the input of the output)."""
    return [role for role, name in enumerate(_PROJECTIONS)
            if _heads_side(getattr(attention, name), role)
            != _heads_side(site.projection(role), role)]  # fmt: skip


def _heads_side(linear: nn.Linear, role: int) -> int:
    return linear.out_features if role < 3 else linear.in_features


def _attach(site: HFSite, attention: LocalAttention) -> None:
    """``attention`` becomes ``module.localnmt`` without projections of its own; a
    projection a method replaced (narrower: ``tied_qk``) replaces the layer's."""
    module = site.module
    for role in _replaced(site, attention):
        setattr(module, site.layout.projections[role], getattr(attention, _PROJECTIONS[role]))
    for name in _PROJECTIONS:
        delattr(attention, name)
    module.localnmt = attention
    if site.kind == "cross" or any(m.reads_layer_input for m in attention.modifiers):
        # the layer input (BLOCK's gate) and the cache (cross-attention's decoding state);
        # a layer that reads neither is called without a hook
        module.register_forward_pre_hook(remember_call, with_kwargs=True)


def _max_positions(model: nn.Module) -> int:
    return int(getattr(model.config, "max_position_embeddings", None) or 1024)


def _use_attention_function(model: nn.Module) -> None:
    setter = getattr(model, "set_attn_implementation", None)
    if not callable(setter):  # transformers < 4.54
        model.config._attn_implementation = NAME
        return
    setter(NAME)
    # T5's encoder and decoder stacks are models of their own holding deep copies of the
    # config, which set_attn_implementation passes over in some releases (5.15.0): set each
    for module in model.modules():
        config = getattr(module, "config", None)
        own = getattr(module, "set_attn_implementation", None)
        if callable(own) and getattr(config, "_attn_implementation", NAME) != NAME:
            own(NAME)


def from_pretrained(cls: Any, folder: str | Path, *, dtype: Any = None,
                    **kwargs: Any) -> nn.Module:  # fmt: skip
    """``cls.from_pretrained`` for a folder that ``save_pretrained`` wrote after
    :func:`apply`: the model is built from the saved config, given the recorded methods, and
    every saved tensor (methods' parameters included) is loaded into it, strictly.

    ``dtype`` (``torch_dtype`` too, transformers' older name): the parameters' dtype, a
    ``torch.dtype`` or ``"auto"`` (the one ``config.json`` records); default float32, as the
    model's constructor builds it. ``config``: a config to build from instead of the saved one
    (copied, not changed). Other keyword arguments override fields of the saved config
    (``dropout=0.1``) or are transformers' options for reading it (``revision``,
    ``cache_dir`` …); anything else is one ``TypeError`` (a misspelt field would otherwise
    be dropped without a word), as is an ``attn_implementation`` other than ``"localnmt"``."""
    require_transformers()
    register()
    if "torch_dtype" in kwargs:
        older = kwargs.pop("torch_dtype")
        dtype = older if dtype is None else dtype
    implementation = kwargs.pop("attn_implementation", NAME)
    if implementation != NAME:
        raise TypeError(f"localnmt.hf.from_pretrained: attn_implementation={implementation!r}: "
                        f"the methods run through the {NAME!r} attention function, and the "
                        "layers without a method use transformers' SDPA already; leave it "
                        "out")  # fmt: skip
    given = kwargs.pop("config", None)
    if given is not None:
        if kwargs:
            raise TypeError(f"localnmt.hf.from_pretrained: {', '.join(kwargs)} given beside "
                            "config=: set them on that config instead")  # fmt: skip
        config = copy.deepcopy(given)  # the caller's object stays as it is
    else:
        config, unused = cls.config_class.from_pretrained(folder, return_unused_kwargs=True,
                                                          **kwargs)  # fmt: skip
        if unused:
            raise TypeError(f"localnmt.hf.from_pretrained: unexpected option(s) "
                            f"{', '.join(unused)}: neither fields of "
                            f"{type(config).__name__} nor options this function takes (dtype, "
                            "config, and transformers' options for reading a config)")  # fmt: skip
    specs = getattr(config, NAME, None)
    if not isinstance(specs, dict):
        raise CheckpointError(f"{folder}: config.json has no 'localnmt' entry; load it with "
                              f"{cls.__name__}.from_pretrained")  # fmt: skip
    target = _dtype(dtype, config)
    config.localnmt = None
    config._attn_implementation = "sdpa"
    model = cls(config)
    apply(model, **{kind: specs.get(kind) for kind in SITES})
    _load_weights(model, Path(folder))
    _load_generation_config(model, folder)
    if target is not None:
        model.to(target)
    return model.eval()


def _dtype(dtype: Any, config: Any) -> torch.dtype | None:
    """The dtype :func:`from_pretrained` casts to: None (keep float32), a ``torch.dtype``, or
    for ``"auto"`` the one the config records (``dtype``; ``torch_dtype`` before transformers
    5), None where it records none."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype != "auto":
        raise TypeError(f"localnmt.hf.from_pretrained: dtype must be a torch.dtype or 'auto', "
                        f"got {dtype!r}")  # fmt: skip
    recorded = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(recorded, str):
        recorded = getattr(torch, recorded.removeprefix("torch."), None)
    return recorded if isinstance(recorded, torch.dtype) else None


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
