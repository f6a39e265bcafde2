"""Extension points of the model that are not attention modifiers.

Some methods change more than one attention call: parameters tied across layers (Pande et
al. §4.2), layers added in front of self-attention (CNNs, Yu et al. 2018). They register here
instead of editing the model: extra command-line arguments, and hooks that run once the
encoder and decoder are built.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from torch import nn

ArgsAdder = Callable[[argparse.ArgumentParser], None]
BuildHook = Callable[[nn.Module, Any], None]
LayerWrapper = Callable[[nn.Module, Any, str, int], nn.Module]

_ARG_ADDERS: list[ArgsAdder] = []
_BUILD_HOOKS: list[BuildHook] = []
_LAYER_WRAPPERS: list[LayerWrapper] = []


def register_model_args(fn: ArgsAdder) -> ArgsAdder:
    """``fn(parser)`` adds arguments (no defaults: architectures set them with getattr)."""
    _ARG_ADDERS.append(fn)
    return fn


def register_build_hook(fn: BuildHook) -> BuildHook:
    """``fn(model, cfg)`` runs after the whole model is built (e.g. tie parameters)."""
    _BUILD_HOOKS.append(fn)
    return fn


def register_layer_wrapper(fn: LayerWrapper) -> LayerWrapper:
    """``fn(layer, cfg, side, index) -> layer`` may wrap or replace each encoder/decoder layer
    (``side`` is 'encoder' or 'decoder', ``index`` 0-based)."""
    _LAYER_WRAPPERS.append(fn)
    return fn


def add_extension_args(parser: argparse.ArgumentParser) -> None:
    for fn in _ARG_ADDERS:
        fn(parser)


def run_build_hooks(model: nn.Module, cfg: Any) -> None:
    for fn in _BUILD_HOOKS:
        fn(model, cfg)


def wrap_layer(layer: nn.Module, cfg: Any, side: str, index: int) -> nn.Module:
    for fn in _LAYER_WRAPPERS:
        layer = fn(layer, cfg, side, index)
    return layer
