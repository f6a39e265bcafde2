"""The hard-coded Gaussian's decoding step in C (``fixed gaussian`` registry).

A decoding step of the hard-coded Gaussian (``attention/fixed_gaussian.py``) in torch ops is
about a dozen small ops on ``(B, 1, Tk)`` tensors (the means, the squared distances, the
padding, the softmax, the product with the values), each costing more in dispatch than in
arithmetic; ``fixed_gaussian_c`` computes the same numbers in one call
(``csrc/gmm_step.c``, ``native/gmm_step.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from localnmt.attention.dispatch import Declined
from localnmt.attention.fast.native import gmm_step as c_step
from localnmt.attention.fixed_gaussian import FixedGaussianProblem, register_kernel


def _check(problem: FixedGaussianProblem) -> str | None:
    if not c_step.ENABLED:
        return "localnmt._gmm_step is not built (or stale)"
    if problem.query_positions.size(1) != 1:
        return f"{problem.query_positions.size(1)} queries (the C step takes one)"
    if torch.is_grad_enabled() and problem.v.requires_grad:
        return "needs gradients (the C step has no backward)"
    for t in (problem.v, problem.key_positions):
        if t.device.type != "cpu" or t.dtype != torch.float32:
            return f"{t.dtype} on {t.device.type} (C kernels: float32 on the CPU)"
    return None


@register_kernel("fixed_gaussian_c", check=_check, shares_source=True)
def fixed_gaussian_c(problem: FixedGaussianProblem) -> Tensor | Declined:
    """``p @ V`` of one decoding step in one C call."""
    out = c_step.fixed_gaussian_step(
        problem.v, problem.key_group, problem.key_positions, problem.query_positions,
        problem.key_lengths, problem.key_padding_mask, problem.ratio, problem.std,
    )  # fmt: skip
    if out is None:
        return Declined("inputs the C step does not take (dtype, shapes, memory or autograd)")
    return out
