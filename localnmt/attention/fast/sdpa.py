"""Kernel ``sdpa``: fused ``scaled_dot_product_attention`` with the restrictions as one
materialised bool mask and the biases as one float32 tensor. It takes almost anything: the
last kernel before the dense reference (``fast/__init__.py``'s order).

Its prepared form (:meth:`~localnmt.attention.dispatch.KernelRegistry.prepared`) serves
plain problems, queries, keys and values and nothing else (no mask, bias, dropout or shared
keys): the one-query steps of a self-attention layer whose method added its terms to the keys
and values (relative positions' shortcut). Every kernel before it needs a feature such a
problem lacks (a band, a Gaussian, relative terms, shared keys), whatever its shapes, so the
prepared call takes the growing keys of later steps as well."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.problem import AttentionProblem, masked_sdpa, register_kernel


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason fused SDPA cannot take ``problem``."""
    if problem.has_bias and problem.q.dtype != torch.float32:
        dtype = str(problem.q.dtype).removeprefix("torch.")
        yield f"a bias with {dtype} inputs (biases stay float32, as on the reference path)"


def _is_plain(problem: AttentionProblem) -> bool:
    """Nothing but ``q``, ``k`` and ``v``: no restriction, bias, dropout or shared keys."""
    return (
        problem.key_padding_mask is None
        and not problem.causal
        and problem.allowed is None
        and not problem.bands
        and not problem.has_bias
        and not problem.relative_values
        and problem.dropout_p == 0.0
        and problem.key_group == 1
        and problem.stacked_groups == 1
        and problem.head_area is None
    )


def _plain_sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """:func:`sdpa_kernel` on a plain problem: the same call of ``masked_sdpa`` without a
    mask (the same numbers)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, scale=1.0)


def prepare(problem: AttentionProblem) -> Callable[[Tensor, Tensor, Tensor], Tensor] | None:
    """The prepared form for plain problems (module docstring); None for any other."""
    return _plain_sdpa if _is_plain(problem) else None


@register_kernel("sdpa", check=check, prepare=prepare)
def sdpa_kernel(problem: AttentionProblem) -> Tensor:
    """Fused SDPA; the causal triangle alone (square, no other restriction or bias) as
    ``is_causal`` without a mask."""
    bias = problem.total_bias() if problem.has_bias else None
    only_causal = (
        problem.causal
        and problem.key_padding_mask is None
        and problem.allowed is None
        and not problem.bands
        and problem.q.size(2) == problem.k.size(2)
    )
    if only_causal and bias is None:
        return F.scaled_dot_product_attention(
            problem.q, problem.k, problem.v, dropout_p=problem.dropout_p, is_causal=True, scale=1.0
        )
    return masked_sdpa(
        problem.q, problem.k, problem.v, problem.dense_allowed(), bias, problem.dropout_p
    )
