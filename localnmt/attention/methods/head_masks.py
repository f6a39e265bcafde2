"""Local heads (Pande et al. 2021, §4.1, eq. 9): a fixed binary mask per head.

Masks, over the offset ``r = j − i`` of key ``j`` from query ``i`` (positions counted from the
first real token, whatever the padding side):

    prevK      r = −K      (the paper's "identity matrix whose columns are left shifted by k";
                            its formula "j − i = k" has the sign of nextK: we follow the name)
    nextK      r = +K
    bandK      −K ≤ r ≤ K
    identity   r = 0
    global     every key (an ordinary head)

Two methods share the masks:

* ``local_heads`` (the paper's method, eq. 9): ``α̃_h = mask_h ⊙ softmax(·)``, applied AFTER
  the full softmax, without renormalisation (masked rows sum to less than 1).
* ``local_heads_renorm`` (the "more efficient implementation" the paper points at, §4.1): the
  same masks BEFORE softmax (renormalised over the allowed keys), as a per-head
  :class:`BandMask`, so window kernels can run it in O(T·w). A query whose window holds no real
  key (prevK on the first K tokens) attends to nothing (the pipeline's empty-row rule: zero
  output).

Spec: ``local_heads[layers=1-6,masks=prev1;next1;global*6]``: one mask per head (``name*N``
repeats), or one per selected head when ``heads=`` is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import Tensor

from localnmt.attention.context import AttentionContext, AttentionSite, BandMask
from localnmt.attention.modifier import AttentionModifier, SpecError, option, register_modifier

#: The largest ``name*N`` repeat (more heads than any attention has).
MAX_REPEAT = 1024
#: Offset bound meaning "no limit" (a global head).
UNLIMITED = 1 << 30

MASK_HELP = "prevK, nextK, bandK (K >= 1, e.g. prev1, next2, band6), identity, global"
_MASK = re.compile(r"^(prev|next|band)-?(\d+)$")


def mask_offsets(name: str) -> tuple[int, int]:
    """``(lo, hi)``: the mask allows offsets ``lo ≤ j − i ≤ hi`` (§4.1 definitions)."""
    text = name.strip().lower()
    if text == "identity":
        return 0, 0
    if text == "global":
        return -UNLIMITED, UNLIMITED
    m = _MASK.match(text)
    if not m or int(m.group(2)) < 1:
        raise SpecError(f"unknown local-head mask '{name}' (valid: {MASK_HELP})")
    kind, k = m.group(1), int(m.group(2))
    return {"prev": (-k, -k), "next": (k, k), "band": (-k, k)}[kind]


def parse_masks(text: str) -> list[str]:
    """``'prev1;band2*2;global'`` → ``['prev1', 'band2', 'band2', 'global']`` (names checked)."""
    names: list[str] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, _, times = part.partition("*")
        if times and not times.strip().isdigit():
            raise SpecError(f"bad repeat '{part}' in masks (use e.g. global*6)")
        mask_offsets(name)
        if times and int(times) > MAX_REPEAT:
            raise SpecError(f"repeat '{part}' in masks is more than {MAX_REPEAT} heads")
        names.extend([name.strip().lower()] * (int(times) if times else 1))
    return names


@dataclass
class MaskOptions:
    masks: str = option("", f"one mask per head, ';' between heads; names: {MASK_HELP}")

    def __post_init__(self) -> None:
        parse_masks(self.masks)  # unknown names fail when the spec is parsed


class _MaskedHeads(AttentionModifier):
    """Shared configuration: per-head offset bounds ``lo``/``hi`` as buffers of shape (H,)."""

    Options = MaskOptions
    sites = ("encoder_self", "decoder_self")

    @classmethod
    def validate(cls, options: MaskOptions, site: AttentionSite) -> None:
        super().validate(options, site)
        if not parse_masks(options.masks):
            raise SpecError(f"method '{cls.name}' needs masks=... (names: {MASK_HELP})")
        for name in set(parse_masks(options.masks)) - {"global"}:
            offset = max(map(abs, mask_offsets(name)))
            if offset > site.max_positions:
                raise SpecError(
                    f"mask '{name}' of method '{cls.name}' reaches {offset} positions away, "
                    f"more than the {site.max_positions} max positions of {site.kind} "
                    f"attention; use K <= {site.max_positions}"
                )

    @classmethod
    def validate_heads(
        cls, options: MaskOptions, site: AttentionSite, heads: list[int] | None
    ) -> None:
        names = parse_masks(options.masks)
        targets = site.num_heads if heads is None else len(heads)
        if len(names) != targets:
            where = "heads" if heads is None else "selected heads"
            raise SpecError(
                f"method '{cls.name}' at {site.kind} layer {site.layer + 1}: {len(names)} masks "
                f"for {targets} {where} (give one mask per head; 'global' = unmasked)"
            )

    def __init__(self, options: MaskOptions, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        names = parse_masks(options.masks)
        targets = list(range(site.num_heads)) if heads is None else list(heads)
        lo = torch.full((site.num_heads,), -UNLIMITED, dtype=torch.long)
        hi = torch.full((site.num_heads,), UNLIMITED, dtype=torch.long)
        for head, name in zip(targets, names, strict=True):
            lo[head], hi[head] = mask_offsets(name)
        self.mask_names = names
        self.register_buffer("lo", lo, persistent=False)
        self.register_buffer("hi", hi, persistent=False)

    def allowed(self, ctx: AttentionContext) -> Tensor:
        """``mask_h[i, j]`` as bool ``(B, H, Tq, Tk)`` from real-token positions."""
        rel = ctx.key_positions[:, None, None, :] - ctx.query_positions[:, None, :, None]
        lo = self.lo.to(rel.device, torch.float32).view(1, -1, 1, 1)
        hi = self.hi.to(rel.device, torch.float32).view(1, -1, 1, 1)
        return (rel >= lo) & (rel <= hi)


@register_modifier
class LocalHeads(_MaskedHeads):
    """Eq. 9: ``α̃_h = mask_h ⊙ α_h`` after the full softmax, not renormalised."""

    name = "local_heads"

    def post(self, ctx: AttentionContext, probs: Tensor) -> Tensor:
        return probs * self.allowed(ctx).to(probs.dtype)


@register_modifier
class LocalHeadsRenorm(_MaskedHeads):
    """The masks of eq. 9 applied before softmax (renormalised), as a per-head band."""

    name = "local_heads_renorm"

    def restrict(self, ctx: AttentionContext) -> BandMask:
        # BandMask allows -left <= j - i <= right.
        return BandMask(left=-self.lo, right=self.hi)
