"""The attention pipeline and its modifiers (one module per method)."""

from localnmt.attention.context import (
    AffinePost,
    AttentionContext,
    AttentionSite,
    BandMask,
    QuadraticBias,
)
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    get_modifier,
    modifier_names,
    option,
    register_modifier,
)
from localnmt.attention.pipeline import LocalAttention

__all__ = [
    "AffinePost",
    "AttentionContext",
    "AttentionModifier",
    "AttentionSite",
    "BandMask",
    "LocalAttention",
    "QuadraticBias",
    "SpecError",
    "get_modifier",
    "modifier_names",
    "option",
    "register_modifier",
]
