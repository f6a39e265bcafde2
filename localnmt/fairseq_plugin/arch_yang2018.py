"""Named architectures of Yang et al. (2018), "Modeling Localness for Self-Attention Networks".

The paper's main model (§4.2, Table 4): query-specific localness on the lower three encoder
self-attention layers. Command-line spec flags still override these defaults.
"""

from __future__ import annotations

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

#: The main configuration (Tables 2–5): query-specific window, encoder layers 1–3.
YANG2018 = AttentionSpecs.parse(encoder_self="localness[layers=1-3,window=query]")
#: Its encoder spec string.
YANG2018_ENCODER = YANG2018.site("encoder_self").text


@register_model_architecture(MODEL, "yang2018_localness_base")
def yang2018_localness_base(args: Any) -> None:
    """Transformer-base + localness (query-specific, encoder layers 1–3)."""
    default_specs(args, YANG2018)
    localnmt_base(args)


@register_model_architecture(MODEL, "yang2018_localness_big")
def yang2018_localness_big(args: Any) -> None:
    """Transformer-big + localness (query-specific, encoder layers 1–3)."""
    default_specs(args, YANG2018)
    localnmt_big(args)


PRESET_SPECS.update(yang2018_localness_base=YANG2018, yang2018_localness_big=YANG2018)
