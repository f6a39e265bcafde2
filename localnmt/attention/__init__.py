"""The attention core: one pipeline, its modifiers (one module per method) and the kernels.

Plain PyTorch: nothing here imports fairseq or transformers. Importing the package registers
every method (:mod:`localnmt.attention.methods`) and kernel (:mod:`localnmt.attention.fast`)
with the core's own registries. :mod:`localnmt.attention.layers` has the modules and the
function any model can hold.
"""

from localnmt.attention import fast, methods  # noqa: E402,F401,I001  (registration side effects)
from localnmt.attention.context import (
    AffinePost,
    AttentionContext,
    AttentionSite,
    BandMask,
    QuadraticBias,
    RelativeTerms,
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
    "RelativeTerms",
    "SpecError",
    "get_modifier",
    "modifier_names",
    "option",
    "register_modifier",
]
