"""A ``LocalAttention``'s buffers in a decoding state, and beam search's shared source.

The state follows fairseq's convention, which any decoder can hold: one dict per attention
module across decoding steps (``prev_key``, ``prev_value``, ``prev_key_padding_mask``).
:class:`DecodingBuffer` is this module's view of that dict for one call: it appends the step's
keys and values (or reuses a cross-attention's static source), counts each hypothesis's decoder
step (``query_offset``, for modifiers that read query positions), and reorders every entry when
beam search reorders hypotheses. Beam search's shared source
(:mod:`localnmt.attention.shared_source`): a cross-attention whose modifiers do not read the
keys stores one key row per group of equal rows (``key_group``); the grouping is found at the
first step and kept, or regrouped, when the batch changes size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from localnmt.attention.modifier import SOURCE_SUFFIX
from localnmt.attention.multihead_parameters import IncrementalState, MultiheadParameters
from localnmt.attention.shared_source import GROUP_KEY, regroup, source_group
from localnmt.attention.step_plan import PLAN_KEY

_BASE_BUFFER_KEYS = ("prev_key", "prev_value", "prev_key_padding_mask")
#: cross-attention buffers that depend on the source sentence only
STATIC_SOURCE_KEYS = (*_BASE_BUFFER_KEYS, "key_positions", "key_lengths")


@dataclass
class DecodingBuffer:
    """One call's view of its module's dict in fairseq's incremental state (``entries``), and
    how many hypotheses share each stored key row (``key_group``)."""

    entries: dict[str, Any]
    key_group: int = 1

    @classmethod
    def open(
        cls,
        attention: MultiheadParameters,
        incremental_state: IncrementalState,
        key: Tensor | None,
        value: Tensor | None,
        key_padding_mask: Tensor | None,
        static_kv: bool,
        shares_source: bool,
    ) -> tuple[DecodingBuffer, Tensor | None, Tensor | None]:
        """The buffer, and the key and value inputs still to project: None for a static
        source already cached, one row per group of equal rows at a shared source's first
        step (``shares_source``: the module's modifiers do not read the keys)."""
        entries = attention._get_input_buffer(incremental_state)
        buffer = cls(entries)
        if "prev_key" in entries and static_kv:
            assert attention.encoder_decoder_attention and not attention.self_attention
            buffer.key_group = int(entries.get(GROUP_KEY, 1))
            return buffer, None, None
        if static_kv and key is not None and value is not None and shares_source:
            # the first step: project each group of equal source rows once
            buffer.key_group = source_group(key, value, key_padding_mask)
            if buffer.key_group > 1:
                key, value = key[:, :: buffer.key_group], value[:, :: buffer.key_group]
                entries[GROUP_KEY] = torch.tensor(buffer.key_group)
        return buffer, key, value

    def append(
        self,
        k: Tensor | None,
        v: Tensor | None,
        key_padding_mask: Tensor | None,
        static_kv: bool,
        bsz: int,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Append the new keys/values to the cache (or reuse it for static_kv)."""
        saved = self.entries
        if "prev_key" in saved:
            prev_key, prev_value = saved["prev_key"], saved["prev_value"]
            if static_kv:
                k, v = prev_key, prev_value
            else:
                assert k is not None and v is not None
                k = torch.cat([prev_key, k], dim=2)
                v = torch.cat([prev_value, v], dim=2)
        elif static_kv and k is not None and v is not None:
            # the source's keys and values are read at every decoding step: store them in
            # (B, H, Tk, d) order once (the projection's layout is (Tk, B, H, d), so reading
            # it as (B, H, Tk, d) strides over the whole batch for every key)
            k, v = k.contiguous(), v.contiguous()
        assert k is not None and v is not None
        key_padding_mask = append_key_padding_mask(
            key_padding_mask, saved.get("prev_key_padding_mask"), bsz, k.size(2), static_kv
        )
        saved["prev_key"] = k
        saved["prev_value"] = v
        saved["prev_key_padding_mask"] = key_padding_mask
        return k, v, key_padding_mask

    def advance_queries(self, bsz: int, steps: int, device: torch.device) -> Tensor | None:
        """Each hypothesis's decoder step before this call (None at the first), counted on by
        ``steps`` for the next call."""
        offset = self.entries.get("query_offset")
        start = torch.zeros(bsz, device=device) if offset is None else offset
        self.entries["query_offset"] = start + steps
        return offset


def append_key_padding_mask(
    new: Tensor | None, prev: Tensor | None, batch: int, keys: int, static_kv: bool
) -> Tensor | None:
    """The padding mask ``(B, keys)`` of the cached keys followed by this step's (fairseq's
    rule: a side without a mask is unpadded; a static source keeps its cached mask)."""
    if prev is not None and static_kv:
        return prev.bool()
    if prev is not None and new is not None:
        return torch.cat([prev.bool(), new.bool()], dim=1)
    if prev is None and new is None:
        return None
    known = prev if prev is not None else new
    assert known is not None
    known = known.bool()
    if keys <= known.size(1):
        return known
    filler = known.new_zeros(batch, keys - known.size(1))
    # fairseq puts the filler after cached keys and before a new step's keys
    return torch.cat([known, filler] if prev is not None else [filler, known], dim=1)


def reorder_buffer(
    entries: dict[str, Any], new_order: Tensor, cross_attention: bool, shares_source: bool
) -> None:
    """Reorder every cached tensor by hypothesis, modifiers' state included (fairseq's own
    version skips cross-attention buffers whose batch size already matches)."""
    grouped = (
        cross_attention
        and entries.get("prev_key") is not None
        and (GROUP_KEY in entries or shares_source)
    )
    plan = entries.get(PLAN_KEY)
    if plan is not None and not plan.reordered(new_order):
        del entries[PLAN_KEY]
    if grouped:
        _reorder_shared_source(entries, new_order)
    for name, value in list(entries.items()):
        if not isinstance(value, Tensor):  # None, or the step plan (reordered above)
            continue
        if grouped and name in ("prev_key", "prev_value", GROUP_KEY):
            continue
        if (
            (name in STATIC_SOURCE_KEYS or name.endswith(SOURCE_SUFFIX))
            and cross_attention
            and value.size(0) == new_order.size(0)
        ):
            # beam search reorders hypotheses within a sentence, and every hypothesis
            # of a sentence has the same source: nothing to move (fairseq skips too)
            continue
        entries[name] = value.index_select(0, new_order)


def _reorder_shared_source(entries: dict[str, Any], new_order: Tensor) -> None:
    """Keys and values stored once per group of hypotheses (shared_source): they stay while
    hypotheses are reordered within their sentences, like fairseq's cached source keys; when
    the batch changes size (finished sentences leave it, or the first step ran once per
    sentence and is now spread to every hypothesis) the rows still read are kept and
    regrouped."""
    group = int(entries.get(GROUP_KEY, 1))
    if new_order.size(0) == entries["prev_key"].size(0) * group:
        return
    keep, new_group = regroup(torch.div(new_order, group, rounding_mode="floor"))
    for name in ("prev_key", "prev_value"):
        entries[name] = entries[name].index_select(0, keep)
    entries[GROUP_KEY] = torch.tensor(new_group)
