"""Self-attention Jacobian norms ``β[i, j] = ‖∂Y[i]/∂X[j]‖_F`` (Pande et al. 2021 §3.1).

Three methods giving the same numbers to float32 precision (tests: ≤ 1e-5 relative):
``structured`` (default), the closed form of :mod:`localnmt.analysis.jacobian_structured`,
falling back to ``chunked`` where it does not apply; ``chunked``, batched vector–Jacobian
products (``torch.func.vmap``), ``T·C`` of them, in chunks within ``memory_mb``; ``reference``,
the first, all-at-once implementation (``T²·C²`` floats). The chunked method holds one chunk at
a time (its products carry no graph of the weights: tests), but its chunk size comes from a
rough per-product estimate (:func:`_bytes_per_product`) that no test checks against measured
memory, so ``memory_mb`` steers it rather than bounding it exactly; it is hundreds of times
slower than the closed form and meant for short sentences and cross-checks.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import Tensor

from localnmt.analysis.jacobian_structured import (
    structured_jacobian_norms,
    structured_unsupported,
)

logger = logging.getLogger(__name__)

#: Default memory budget of one chunk of vector–Jacobian products (MiB).
MEMORY_MB = 512

METHODS = ("structured", "chunked", "reference")


def jacobian_norms(
    attention: Any, x: Tensor, method: str = "structured", memory_mb: int = MEMORY_MB
) -> Tensor:
    """``β (T, T)``: Frobenius norm of ``∂Y[i]/∂X[j]`` for self-attention ``attention``.

    ``method="structured"`` (default): the closed form of
    :mod:`localnmt.analysis.jacobian_structured`, where
    :func:`structured_unsupported` finds none of its limits; elsewhere ``"chunked"``.
    ``method="chunked"``: one forward, then the ``T·C`` vector–Jacobian products (one per
    output coordinate ``Y[i, c]``) batched with ``torch.func.vmap`` in chunks sized to
    ``memory_mb``; each chunk's rows ``∂Y[i, c]/∂X`` are squared and summed into ``β²[i, :]``
    at once (the chunk size follows a rough estimate: see the module docstring).
    ``method="reference"``: the full Jacobian
    at once (``torch.autograd.functional.jacobian``), ``T²·C²`` floats."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if method == "reference":
        return _jacobian_norms_reference(attention, x)
    if method == "structured":
        reason = structured_unsupported(attention)
        if reason is None:
            return structured_jacobian_norms(attention, x, memory_mb)
        logger.debug("structured Jacobian not applicable (%s): chunked", reason)
    t, dim = x.size(0), x.size(-1)

    def f(inp: Tensor) -> Tensor:
        # need_weights: the dense reference path, whose every backward op has a vmap rule
        return attention(inp, inp, inp, need_weights=True)[0]

    # Outside no_grad the products would also be differentiable in the layer's weights (which
    # require grad), and β² would keep every chunk's graph alive: memory grew by one chunk's
    # backward per chunk. torch.func.vjp ignores the outer no_grad for its own derivative.
    with torch.no_grad():
        _, vjp_fn = torch.func.vjp(f, x)
        rows = t * dim
        chunk = max(1, min(rows, memory_mb * 2**20 // _bytes_per_product(attention, t, dim)))
        beta2 = x.new_zeros(t, t)
        for start in range(0, rows, chunk):
            index = torch.arange(start, min(start + chunk, rows), device=x.device)
            cotangents = torch.zeros(index.numel(), rows, dtype=x.dtype, device=x.device)
            cotangents[torch.arange(index.numel()), index] = 1.0  # e_(i, c), i = index // C
            (grads,) = torch.func.vmap(vjp_fn)(cotangents.view(-1, *x.shape))  # (n, T, 1, C)
            beta2.index_add_(0, index // dim, grads.pow(2).sum(dim=-1).view(-1, t))
    return beta2.sqrt()


def _bytes_per_product(attention: Any, t: int, dim: int) -> int:
    """Rough float32 memory of one batched vector–Jacobian product: a few ``(H, T, T)``
    attention-sized and ``(T, C)`` activation-sized tensors."""
    heads = int(getattr(attention, "num_heads", 1))
    return 4 * (8 * heads * t * t + 12 * t * dim)


def _jacobian_norms_reference(attention: Any, x: Tensor) -> Tensor:
    """The first implementation: the whole Jacobian ``(T, 1, C, T, 1, C)`` at once."""

    def f(inp: Tensor) -> Tensor:
        return attention(inp, inp, inp, need_weights=False)[0]

    jac = torch.autograd.functional.jacobian(f, x, vectorize=True)  # (T, 1, C, T, 1, C)
    t = x.size(0)
    return jac.reshape(t, -1, t, x.size(-1)).pow(2).sum(dim=(1, 3)).sqrt()
