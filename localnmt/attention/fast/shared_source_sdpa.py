"""Kernel ``shared_source`` (the first of ``fast/__init__.py``'s order): beam search's
cross-attention whose keys serve groups of ``key_group`` hypotheses
(:mod:`localnmt.attention.shared_source`). Where padding alone
restricts the keys (the same within a group), fused SDPA runs on each group's queries side by
side against the group's one key row. The other kernels decline such problems; where this one
declines too (a window, a dense mask, a bias), the dense reference takes them, which reads
grouped keys as well."""

from __future__ import annotations

from collections.abc import Iterator

from torch import Tensor

from localnmt.attention.problem import AttentionProblem, masked_sdpa, register_kernel
from localnmt.attention.shared_source import from_groups, to_groups


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason the grouped SDPA cannot take ``problem``."""
    if problem.causal or problem.allowed is not None or problem.bands:
        yield "restrictions other than padding (the dense reference reads grouped keys)"
    if problem.has_bias:
        yield "a bias (the dense reference reads grouped keys)"


def requires(problem: AttentionProblem) -> str | None:
    return "one key row per query row (no shared source)" if problem.key_group == 1 else None


@register_kernel("shared_source", check=check, shares_source=True, requires=requires)
def shared_source_kernel(problem: AttentionProblem) -> Tensor:
    """Fused SDPA over ``(B, H, g·Tq, d)`` grouped queries against ``(B, H, Tk, d)`` keys."""
    group, tq = problem.key_group, problem.q.size(2)
    mask = problem.key_padding_mask
    allowed = None if mask is None else ~mask[::group, None, None, :]
    queries = to_groups(problem.q, group)
    out = masked_sdpa(queries, problem.k, problem.v, allowed, None, problem.dropout_p)
    return from_groups(out, group, tq)
