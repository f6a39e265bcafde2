"""The affine-post shortcut: a post-softmax stage ``p ↦ keep·p + add`` without forming ``p``.

Since ``(keep·p + add) @ V = keep·(p @ V) + add @ V``, where a call needs no probabilities
(no weights, no recording, no value term) and its one post modifier, on every head, offers
its stage as an :class:`~localnmt.attention.context.AffinePost` before ``p`` exists, ``p @ V``
comes from a fused kernel that never forms ``p`` (GMM cross-attention's eq. 13 is one).
Dropped-out probabilities are not affine in ``p``: with attention dropout the dense path runs.
"""

from __future__ import annotations

import torch
from torch import Tensor

from localnmt.attention.context import AffinePost, AttentionContext
from localnmt.attention.modifier import AttentionModifier
from localnmt.attention.problem import REGISTRY, AttentionProblem, fast_attention, note_reference
from localnmt.attention.shared_source import grouped_matmul


def affine_post(
    ctx: AttentionContext, problem: AttentionProblem, modifiers: list[AttentionModifier]
) -> AffinePost | None:
    """The post stage as ``p ↦ keep·p + add`` where its one modifier (on every head) offers
    it and dropout does not act on ``p`` (dropped probabilities are not affine in ``p``)."""
    if len(modifiers) != 1 or modifiers[0].head_selection is not None:
        return None
    if problem.dropout_p > 0.0:
        return None
    return modifiers[0].post_affine(ctx)


def fused_output(
    ctx: AttentionContext, problem: AttentionProblem, modifiers: list[AttentionModifier]
) -> Tensor | None:
    """The call's output from its one post modifier's own fused kernel
    (:meth:`AttentionModifier.fused_output`), where that modifier acts on every head, no
    dropout acts on ``p`` and no attention kernel is forced (a forced one runs as asked)."""
    if len(modifiers) != 1 or modifiers[0].head_selection is not None:
        return None
    if problem.dropout_p > 0.0 or REGISTRY.forced() is not None:
        return None
    return modifiers[0].fused_output(ctx, problem)


def attend_affine(problem: AttentionProblem, affine: AffinePost) -> Tensor:
    """``(keep·p + add) @ V`` as ``keep·(p @ V)`` from a fused kernel plus ``add @ V`` (one
    ``addcmul`` where both are there)."""
    keep = affine.keep
    fused = None
    if not (isinstance(keep, float) and keep == 0.0):
        if isinstance(keep, Tensor):  # float32 like the probabilities; the output keeps v's dtype
            keep = keep.to(problem.v.dtype)
        fused = fast_attention(problem)
    else:  # p is not needed at all: the traced call says so
        note_reference(problem, "the post stage replaces p: add @ V only")
    if affine.add is None:
        assert fused is not None, "an affine post stage with keep = 0 must add something"
        return fused * keep
    added = grouped_matmul(affine.add.type_as(problem.v), problem.v, problem.key_group)
    if fused is None:
        return added
    if isinstance(keep, Tensor):
        return torch.addcmul(added, fused, keep)
    return torch.add(added, fused, alpha=keep)
