"""One call's :class:`~localnmt.attention.problem.AttentionProblem`, from fairseq's masks and the
modifiers' biases and restrictions.

fairseq hands an ``attn_mask`` (bool: True = blocked; float: additive, −inf = blocked): the
causal triangle is recognised as such (kernels take it without a mask), other blocked entries
become a dense restriction and finite values a bias. Each ``bias`` / ``restrict`` modifier's
result is added with its head selection applied (the other heads get a neutral value: bias 0,
all keys, an unlimited band).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from localnmt.attention.context import AttentionContext, BandMask, QuadraticBias, RelativeTerms
from localnmt.attention.deferred import stored, stored_shape
from localnmt.attention.modifier import AttentionModifier, apply_head_selection
from localnmt.attention.problem import AttentionProblem


def build_problem(
    ctx: AttentionContext,
    modifiers: Iterable[AttentionModifier],
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    dropout_p: float,
    causal_site: bool,
) -> AttentionProblem:
    """The problem of one call: ``key_padding_mask`` as the layer received it (a transform may
    have changed ``ctx.key_padding_mask``), ``attn_mask`` fairseq's, ``causal_site`` whether the
    site is decoder self-attention (only there is a triangular mask the causal triangle)."""
    problem = AttentionProblem(
        site=ctx.site,
        q=ctx.q,
        k=stored(ctx, "k"),  # a deferred layout stays unbuilt until a kernel reads it
        v=stored(ctx, "v"),
        key_padding_mask=None if key_padding_mask is None else key_padding_mask.bool(),
        dropout_p=dropout_p,
        key_group=ctx.key_group,
        padding_source=key_padding_mask,
        stacked_groups=ctx.stacked_groups,
        head_area=ctx.head_area,
        positions=ctx.positions,
    )
    if ctx.key_padding_mask is not key_padding_mask:  # a transform changed the key set
        problem.key_padding_mask = ctx.key_padding_mask
    add_attn_mask(problem, attn_mask, causal_site)
    for modifier in modifiers:
        if modifier.uses("bias"):
            add_bias(problem, modifier, modifier.bias(ctx))
    for modifier in modifiers:
        if modifier.uses("restrict"):
            add_restriction(problem, modifier, modifier.restrict(ctx))
    return problem


def add_attn_mask(problem: AttentionProblem, attn_mask: Tensor | None, causal_site: bool) -> None:
    """fairseq's ``attn_mask`` (bool: True = blocked; float: additive, −inf = blocked)."""
    if attn_mask is None:
        return
    if attn_mask.dtype == torch.bool or not attn_mask.is_floating_point():
        blocked = attn_mask.bool()
        additive = None
    else:
        blocked = torch.isneginf(attn_mask)
        additive = attn_mask.float().masked_fill(blocked, 0.0)
        if not additive.any():
            additive = None
    tq, tk = problem.q.size(2), stored_shape(problem, "k")[2]
    causal = causal_mask(tq, tk, blocked.device)
    if causal_site and blocked.shape == (tq, tk) and torch.equal(blocked, causal):
        problem.causal = True
    elif blocked.any():
        problem.allowed = ~blocked
    if additive is not None:
        problem.dense_bias = additive


def add_bias(
    problem: AttentionProblem,
    modifier: AttentionModifier,
    bias: Tensor | QuadraticBias | RelativeTerms | None,
) -> None:
    """A modifier's logit bias (dense float32, quadratic or relative), on its heads only."""
    if bias is None:
        return
    if isinstance(bias, RelativeTerms):
        if modifier.head_selection is None and problem.relative is None:
            problem.relative = bias
            return
        bias = bias.bias(problem.q)
    if isinstance(bias, QuadraticBias):
        if modifier.head_selection is not None:
            bias = QuadraticBias(
                apply_head_selection(modifier, bias.a, 0.0),
                apply_head_selection(modifier, bias.b, 0.0),
            )
        problem.quadratic.append(bias)
        return
    bias = apply_head_selection(modifier, bias.float(), 0.0)
    problem.dense_bias = bias if problem.dense_bias is None else problem.dense_bias + bias


def add_restriction(
    problem: AttentionProblem, modifier: AttentionModifier, allowed: Tensor | BandMask | None
) -> None:
    """A modifier's allowed keys (dense bool or a band), on its heads only."""
    if allowed is None:
        return
    if isinstance(allowed, BandMask):
        sel = modifier.head_selection
        if sel is not None:
            unlimited = torch.full_like(sel, 1 << 30, dtype=torch.long)
            left = torch.as_tensor(allowed.left, device=sel.device).expand(sel.shape)
            right = torch.as_tensor(allowed.right, device=sel.device).expand(sel.shape)
            allowed = BandMask(
                torch.where(sel, left, unlimited), torch.where(sel, right, unlimited)
            )
        problem.bands.append(allowed)
        return
    allowed = apply_head_selection(modifier, allowed.bool(), True)
    problem.allowed = allowed if problem.allowed is None else problem.allowed & allowed


def causal_mask(queries: int, keys: int, device: torch.device | None = None) -> Tensor:
    """``(queries, keys)`` bool, True where blocked: the last ``queries`` of ``keys`` positions
    each see themselves and what precedes them (a decoder's causal triangle)."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).triu(keys - queries + 1)
