"""The hard-coded Gaussian's distribution (You et al. 2020) as a typed problem for kernels.

Target token ``i`` attends to source position ``j`` with::

    p_ij = softmax_j(−(j − μ_i)² / (2σ²)),   μ_i = min(ratio · i, J − 1)

over the real source keys (``methods/gmm_hardcoded.py`` says why each choice). Nothing in it
depends on the queries or keys, so where nothing needs ``p`` the layer's output is ``p @ V``
alone. This module is what the method and its kernels share: the torch reference of ``p``
(:func:`fixed_probabilities`) and :class:`FixedGaussianProblem`, the question "``p @ V`` of
one decoding step", which :func:`fixed_gaussian_output` hands to the registered kernels
(``fast/fixed_gaussian_step.py``: one C call), the torch ops being the reference path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from localnmt.attention.context import MASK_VALUE
from localnmt.attention.dispatch import KernelRegistry
from localnmt.attention.shared_source import grouped_matmul


def fixed_means(query_positions: Tensor, key_lengths: Tensor, ratio: float) -> Tensor:
    """``μ_i = min(ratio · i, J − 1)`` ``(B, Tq)`` from the query positions ``i`` and the real
    source lengths ``J`` (both ``(B, Tq)``); ``J − 1`` floored at 0."""
    last = (key_lengths - 1).clamp_(min=0)
    diagonal = query_positions if ratio == 1.0 else ratio * query_positions
    return torch.minimum(diagonal, last)


def fixed_probabilities(
    mu: Tensor, key_positions: Tensor, key_padding_mask: Tensor | None, std: float
) -> Tensor:
    """``p_ij`` float32 ``(B, 1, Tq, Tk)`` (one distribution for every head) from the means
    ``mu`` ``(B, Tq)`` and the key positions ``j`` ``(B, Tk)``, normalised over the real keys
    (``key_padding_mask`` ``(B, Tk)`` True at padding)."""
    dist = key_positions[:, None, :] - mu[:, :, None]  # (B, Tq, Tk)
    logits = dist.square_().mul_(-0.5 / std**2)
    if key_padding_mask is not None:
        logits = logits.masked_fill(key_padding_mask.bool()[:, None, :], MASK_VALUE)
    return torch.softmax(logits.float(), dim=-1).unsqueeze(1)


@dataclass
class FixedGaussianProblem:
    """``p @ V`` of one decoding step of hard-coded Gaussian cross-attention: ``v``
    ``(B / key_group, H, Tk, d)`` (beam search's shared source: row ``b`` reads ``b //
    key_group``), key positions ``j`` ``(B, Tk)``, query positions ``i`` and real lengths
    ``J`` ``(B, Tq)`` float32, padding ``(B, Tk)`` True at padding or None."""

    v: Tensor
    key_group: int
    key_positions: Tensor
    query_positions: Tensor
    key_lengths: Tensor
    key_padding_mask: Tensor | None
    ratio: float
    std: float

    def describe(self) -> str:
        rows, heads, tk, dim = self.v.shape
        batch, tq = self.query_positions.shape
        return f"fixed Gaussian B={batch} H={heads} Tq={tq} Tk={tk} d={dim}"


def reference_output(problem: FixedGaussianProblem) -> Tensor:
    """``p @ V`` ``(B, H, Tq, d)`` in torch ops (the reference path)."""
    mu = fixed_means(problem.query_positions, problem.key_lengths, problem.ratio)
    probs = fixed_probabilities(mu, problem.key_positions, problem.key_padding_mask, problem.std)
    return grouped_matmul(probs.type_as(problem.v), problem.v, problem.key_group)


#: Decoding steps of the hard-coded Gaussian (``fast/fixed_gaussian_step.py``; torch ops after).
REGISTRY: KernelRegistry[FixedGaussianProblem] = KernelRegistry(
    "fixed gaussian",
    reference_name="fixed_gaussian_torch",
    reference=reference_output,
    describe=FixedGaussianProblem.describe,
)
register_kernel = REGISTRY.register


def fixed_gaussian_output(problem: FixedGaussianProblem) -> Tensor:
    """``p @ V`` from the first kernel that takes the problem, else the torch ops."""
    return REGISTRY.run(problem)
