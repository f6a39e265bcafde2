"""Named architectures of Zhang & Feng (2021), Gaussian mixture cross-attention.

Each preset only sets the cross-attention spec (``--cross-attn-modifiers`` on the command
line wins) on top of Transformer-base/big. Ablations (Tables 3-5, Figure 4) are catalog rows
that pass a spec with options, e.g. ``gmm[k=2]`` or ``gmm[layers=5-6]``.
"""

from __future__ import annotations

from typing import Any

from fairseq.models import register_model_architecture

from localnmt.fairseq_plugin.architectures import MODEL, default_specs, localnmt_base, localnmt_big

#: Cross-attention specs of the Table 2 systems.
SPECS = {
    "gmm": "gmm",  # Our Method (eq. 6-15, K = 4)
    "gmm_norm": "gmm[variant=norm]",  # Our Method+Norm.
    "synthesis": "gmm[variant=synthesis]",  # Synthesis Network (Graves 2013, Table 1)
    "hardcoded": "hardcoded_gaussian",  # Hard-Code Gaussian (You et al. 2020)
    "localness": "localness",  # Localness Gaussian (Yang et al. 2018 on cross-attention)
}


def _base(spec: str):
    def arch(args: Any) -> None:
        default_specs(args, cross=spec)
        localnmt_base(args)

    return arch


def _big(spec: str):
    def arch(args: Any) -> None:
        default_specs(args, cross=spec)
        localnmt_big(args)

    return arch


for _name, _spec in SPECS.items():
    register_model_architecture(MODEL, f"zhang2021_{_name}_base")(_base(_spec))
register_model_architecture(MODEL, "zhang2021_gmm_big")(_big(SPECS["gmm"]))
