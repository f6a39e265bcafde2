"""Named architectures of Pande et al. 2021, Tables 1–3 (Transformer-base encoder; §5.2–5.4).

Masks per head are listed in head order. Where the paper gives a set but no order, the order is
the paper's listing (§4.1: prev-1, prev-2, next-1, next-2, band-1, band-2, identity), with the
second identity last; local heads of configs b and c come first, global heads after.

Every flag can still be overridden on the command line (fairseq's usual rule).
"""

from __future__ import annotations

from typing import Any

from fairseq.models import register_model_architecture

from localnmt.attention.attention_specs import AttentionSpecs
from localnmt.fairseq_plugin.architectures import MODEL, PRESET_SPECS, default_specs, localnmt_base

#: "All masks used once and identity mask repeated twice" (configs d, e, f, i, j, k, l).
ALL_MASKS = "prev1;prev2;next1;next2;band1;band2;identity;identity"
#: Config b: two local heads, band1 and band2.
TWO_LOCAL = "band1;band2;global*6"
#: Config c: band1 and band2, repeated twice each.
FOUR_LOCAL = "band1;band2;band1;band2;global*4"
#: Config g: four pairs (head, tied head) with masks identity and band2.
PAIRS_G = "identity;band2;identity;band2;identity;band2;identity;band2"
#: Config h: identity, band2, prev1, next1, repeated twice (heads 1 and 5 own the parameters).
QUADS_H = "identity;band2;prev1;next1;identity;band2;prev1;next1"


def local(masks: str, layers: str = "all", groups: int | None = None) -> AttentionSpecs:
    """Encoder spec: post-softmax masks (eq. 9), optionally with Wq/Wk tied in groups."""
    spec = f"local_heads[layers={layers},masks={masks}]"
    if groups is not None:
        spec += f" + tied_qk[layers={layers},groups={groups}]"
    return AttentionSpecs.parse(encoder_self=spec)


#: arch name → (attention specs, --encoder-tie-attn-layers)
PANDE2021_ARCHS: dict[str, tuple[AttentionSpecs, str | None]] = {
    "pande2021_2lochead_all6": (local(TWO_LOCAL), None),  # b
    "pande2021_4lochead_all6": (local(FOUR_LOCAL), None),  # c
    "pande2021_8lochead_first3": (local(ALL_MASKS, "1-3"), None),  # d
    "pande2021_8lochead_last3": (local(ALL_MASKS, "4-6"), None),  # e
    "pande2021_8lochead_all6": (local(ALL_MASKS), None),  # f
    "pande2021_4lochead_4tiedloc_all6": (local(PAIRS_G, groups=4), None),  # g
    "pande2021_2lochead_6tiedloc_all6": (local(QUADS_H, groups=2), None),  # h
    "pande2021_1lochead_7tiedloc_all6": (local(ALL_MASKS, groups=1), None),  # i
    "pande2021_1lochead_7tiedloc_first3": (local(ALL_MASKS, "1-3", groups=1), None),  # j
    "pande2021_half_tied": (local(ALL_MASKS, "1-3", groups=1), "1-3"),  # k
    "pande2021_fully_tied": (local(ALL_MASKS, groups=1), "all"),  # l
}


def _preset(specs: AttentionSpecs, tie: str | None):
    def arch(args: Any) -> None:
        default_specs(args, specs)
        args.encoder_tie_attn_layers = getattr(args, "encoder_tie_attn_layers", tie)
        localnmt_base(args)

    return arch


for _name, (_specs, _tie) in PANDE2021_ARCHS.items():
    register_model_architecture(MODEL, _name)(_preset(_specs, _tie))
    PRESET_SPECS[_name] = _specs
