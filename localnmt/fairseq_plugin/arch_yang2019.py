"""Named architectures of Yang et al. (2019), "Convolutional Self-Attention Networks".

Every locality method of Table 1 sits in the lowest three encoder self-attention layers (§5:
"we applied our approach to the lowest three layers of the encoder"), the rest is
Transformer-base/big. Table 2's "+ CSANs" is the 2D model (its En⇒De BLEU equals Table 1's
2D-CSANs row). Spec flags on the command line still override these defaults.
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

LOWER = "layers=1-3"
#: encoder spec (or CNN flags) of each method, all on encoder layers 1–3
ENCODER_SPECS = {
    "csan1d": f"csan_1d[{LOWER},window=11]",
    "csan2d": f"csan_2d[{LOWER},window=11,area_heads=3]",
    "bi_direct": f"bi_direct[{LOWER}]",
    "rel_pos": f"rel_pos[{LOWER}]",
    "neighbor": f"neighbor[{LOWER}]",
    "local_hard": f"local_hard[{LOWER}]",
    "local_soft": f"localness[{LOWER},window=query]",
    "block": f"block[{LOWER}]",
    "cnns": None,
}


def _cnn_defaults(args: Any) -> None:
    """QANet convolutions feeding encoder layers 1–3 (models/cnn_layers.py)."""
    args.encoder_cnn_layers = getattr(args, "encoder_cnn_layers", "1-3")
    args.encoder_cnn_convs = getattr(args, "encoder_cnn_convs", 4)
    args.encoder_cnn_kernel = getattr(args, "encoder_cnn_kernel", 7)
    args.encoder_cnn_type = getattr(args, "encoder_cnn_type", "standard")


def _preset(method: str, specs: AttentionSpecs, base: Callable[[Any], None]):
    def arch(args: Any) -> None:
        default_specs(args, specs)
        if method == "cnns":
            _cnn_defaults(args)
        base(args)

    arch.__doc__ = f"Transformer + {method} on encoder layers 1–3 (Yang et al. 2019)."
    return arch


for _method in ENCODER_SPECS:
    for _size, _base in (("base", localnmt_base), ("big", localnmt_big)):
        _name = f"yang2019_{_method}_{_size}"
        _specs = AttentionSpecs.parse(encoder_self=ENCODER_SPECS[_method])
        register_model_architecture(MODEL, _name)(_preset(_method, _specs, _base))
        PRESET_SPECS[_name] = _specs
