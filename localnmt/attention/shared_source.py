"""Beam search's shared source: the hypotheses of one sentence read the same keys and values.

fairseq's ``SequenceGenerator`` repeats each sentence's encoder output once per hypothesis
(``B·beam`` rows, each sentence's rows consecutive) and every cross-attention then projects
and caches keys and values for all ``B·beam`` rows, reads them all at every step, and keeps
them in place when hypotheses are reordered within a sentence. Rows that are equal give
equal keys, so :class:`~localnmt.attention.pipeline.LocalAttention` projects and stores one
row per group of equal consecutive rows (``group`` = beam size in beam search) and, at each
step, multiplies the group's queries with its keys in one product::

    q (B·g, H, Tq, d)  →  (B, H, g·Tq, d)  @  kᵀ (B, H, d, Tk)  →  (B·g, H, Tq, Tk)

The numbers are those of the per-row product up to the rounding of a matrix product with
``g·Tq`` rows instead of ``Tq`` (tests: beam search gives the hypotheses of decoding without
incremental state). Layers whose modifiers read the keys themselves
(``AttentionModifier.reads_keys``) keep one row per hypothesis.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: Switch for tests and benchmarks (False: one key row per hypothesis, as fairseq does).
ENABLED = True
#: Name of the incremental-state entry holding the group size (a 0-dim CPU tensor).
GROUP_KEY = "source_group"


def group_of_runs(same_as_next: Tensor, rows: int) -> int:
    """The largest ``g`` dividing ``rows`` such that rows ``[s·g, s·g + g)`` are equal for
    every ``s``, from ``same_as_next[i]`` = rows ``i`` and ``i + 1`` are equal (``rows − 1``
    bools): every place where a new value starts must fall on a multiple of ``g``."""
    starts = (~same_as_next).nonzero().flatten().add(1).tolist()
    return math.gcd(rows, *starts)


def source_group(key: Tensor, value: Tensor, key_padding_mask: Tensor | None) -> int:
    """The group size of equal consecutive batch rows of a cross-attention's inputs: key and
    value ``(Tk, N, C)`` and the padding mask ``(N, Tk)`` (1: all rows differ)."""
    rows = key.size(1)
    if rows < 2:
        return 1
    same = (key[:, 1:] == key[:, :-1]).all(dim=2).all(dim=0)
    if value is not key:
        same &= (value[:, 1:] == value[:, :-1]).all(dim=2).all(dim=0)
    if key_padding_mask is not None:
        same &= (key_padding_mask[1:] == key_padding_mask[:-1]).all(dim=1)
    return group_of_runs(same, rows)


def regroup(rows: Tensor) -> tuple[Tensor, int]:
    """After beam search drops finished sentences: ``rows`` ``(N′,)`` is the stored row each
    remaining hypothesis reads; returns the stored rows to keep, one per new group, and the
    new group size."""
    group = group_of_runs(rows[1:] == rows[:-1], rows.numel()) if rows.numel() > 1 else 1
    return rows[::group], group


def to_groups(x: Tensor, group: int) -> Tensor:
    """``(N, H, T, e)`` → ``(N/g, H, g·T, e)``: each group's rows side by side."""
    rows, heads, length, dim = x.shape
    x = x.view(rows // group, group, heads, length, dim).transpose(1, 2)
    return x.reshape(rows // group, heads, group * length, dim)


def from_groups(x: Tensor, group: int, length: int) -> Tensor:
    """The inverse of :func:`to_groups`: ``(N/g, H, g·T, e)`` → ``(N, H, T, e)``."""
    stored, heads, _, dim = x.shape
    x = x.view(stored, heads, group, length, dim).transpose(1, 2)
    return x.reshape(stored * group, heads, length, dim)


def grouped_matmul(a: Tensor, b: Tensor, group: int) -> Tensor:
    """``a[r] @ b[r // g]`` for every row ``r``; ``a`` ``(N, H, T, x)``, ``b``
    ``(N/g, H, x, y)``."""
    if group == 1:
        return torch.matmul(a, b)
    return from_groups(torch.matmul(to_groups(a, group), b), group, a.size(2))


#: fairseq's encoder output entries and their batch axes (TransformerEncoderBase.forward).
_ENCODER_BATCH_AXES = {"encoder_out": 1, "encoder_padding_mask": 0, "encoder_embedding": 0,
                       "encoder_states": 1, "fc_results": 1, "src_tokens": 0,
                       "src_lengths": 0}  # fmt: skip


def first_step_group(tokens: Tensor, encoder_out: dict[str, list[Tensor]] | None) -> int:
    """The group size of a decoder's first incremental step (fairseq's beam search starts
    every hypothesis of a sentence from the same token and encoder output): the largest
    ``g`` whose consecutive groups of ``g`` rows are equal in ``tokens`` ``(N, 1)`` and in
    every encoder output entry; 1 where an entry is not fairseq's Transformer's."""
    if encoder_out is None or tokens.size(1) != 1 or tokens.size(0) < 2:
        return 1
    if not set(encoder_out) <= set(_ENCODER_BATCH_AXES):
        return 1
    rows = tokens.size(0)
    group = group_of_runs(tokens[1:, 0] == tokens[:-1, 0], rows)
    states = encoder_out.get("encoder_out") or []
    masks = encoder_out.get("encoder_padding_mask") or []
    if len(states) != 1 or states[0].size(1) != rows or len(masks) > 1:
        return 1
    mask = masks[0] if masks else None
    return math.gcd(group, source_group(states[0], states[0], mask)) if group > 1 else 1


def encoder_rows(
    encoder_out: dict[str, list[Tensor | None]], index: Tensor
) -> dict[str, list[Tensor | None]]:
    """A new encoder output dict with the batch rows ``index`` of every entry (the input is
    not changed; None entries, as ``fc_results`` holds for layers without one, stay None)."""
    return {
        name: [
            None if value is None else value.index_select(_ENCODER_BATCH_AXES[name], index)
            for value in values
        ]
        for name, values in encoder_out.items()
    }
