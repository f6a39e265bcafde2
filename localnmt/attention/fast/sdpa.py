"""Kernel ``sdpa``: fused ``scaled_dot_product_attention`` with the restrictions as one
materialised bool mask and the biases as one float32 tensor. It takes almost anything: the
last kernel before the dense reference (``fast/__init__.py``'s order)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.problem import AttentionProblem, masked_sdpa, register_kernel


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason fused SDPA cannot take ``problem``."""
    if problem.has_bias and problem.q.dtype != torch.float32:
        dtype = str(problem.q.dtype).removeprefix("torch.")
        yield f"a bias with {dtype} inputs (biases stay float32, as on the reference path)"


@register_kernel("sdpa", check=check)
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
