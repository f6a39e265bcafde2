"""Named architectures of Zhang & Feng (2021), Gaussian mixture cross-attention.

Each preset only sets the cross-attention spec (``--cross-attn-modifiers`` on the command
line wins) on top of Transformer-base/big. Ablations (Tables 3-5, Figure 4) are catalog rows
that pass a spec with options, e.g. ``gmm[k=2]`` or ``gmm[layers=5-6]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fairseq.models import register_model_architecture

from localnmt.attention.attention_specs import AttentionSpecs
from localnmt.fairseq_plugin.architectures import (
    MODEL,
    PRESET_SPECS,
    default_specs,
    localnmt_base,
    localnmt_big,
)

#: Cross-attention specs of the Table 2 systems.
SPECS = {
    "gmm": "gmm",  # Our Method (eq. 6-15, K = 4)
    "gmm_norm": "gmm[variant=norm]",  # Our Method+Norm.
    "synthesis": "gmm[variant=synthesis]",  # Synthesis Network (Graves 2013, Table 1)
    "hardcoded": "hardcoded_gaussian",  # Hard-Code Gaussian (You et al. 2020)
    "localness": "localness",  # Localness Gaussian (Yang et al. 2018 on cross-attention)
}


def _preset(name: str, spec: str, base: Callable[[Any], None]) -> None:
    specs = AttentionSpecs.parse(cross=spec)

    def arch(args: Any) -> None:
        default_specs(args, specs)
        base(args)

    register_model_architecture(MODEL, name)(arch)
    PRESET_SPECS[name] = specs


for _name, _spec in SPECS.items():
    _preset(f"zhang2021_{_name}_base", _spec, localnmt_base)
_preset("zhang2021_gmm_big", SPECS["gmm"], localnmt_big)
