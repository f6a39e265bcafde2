"""Zero gradients for what a layer's output does not depend on, in distributed training.

A method that replaces the attention distribution outright (the hard-coded Gaussian;
GMM with ``fusion=gmm``, γ = β) leaves the dot-product logits out of the layer's output: the
query and key projections (and any other method's logit terms in that layer) then get no
gradient. A single process does not mind (the optimiser skips them), but
``torch.nn.parallel.DistributedDataParallel`` without ``find_unused_parameters=True`` (fairseq's
``pytorch_ddp`` on GPUs; accelerate's default; transformers' ``Trainer`` with gradient
checkpointing) stops at the second update: "Expected to have finished reduction in the prior
iteration". While a process group of more than one process is initialised, such a layer
gives those tensors an exact zero gradient instead (:func:`keep_in_graph`): the numbers of
every parameter the output depends on are unchanged, and the others stay where an optimiser
with zero gradients leaves them.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor


def distributed_training() -> bool:
    """Whether a process group of more than one process is initialised."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class _ZeroGradients(torch.autograd.Function):
    """``out`` unchanged; every other input gets a zero gradient."""

    @staticmethod
    def forward(ctx, out: Tensor, *others: Tensor) -> Tensor:  # type: ignore[override]
        ctx.others = [(t.shape, t.dtype, t.device) for t in others]
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, ...]:  # type: ignore[override]
        zeros = (torch.zeros(s, dtype=d, device=dev) for s, d, dev in ctx.others)
        return (grad, *zeros)


def keep_in_graph(out: Tensor, others: Iterable[Tensor]) -> Tensor:
    """``out`` with each of ``others`` that requires grad linked to it with a zero gradient
    (``out`` itself unchanged, forward and backward)."""
    linked = [t for t in others if t is not None and t.requires_grad]
    if not linked or not torch.is_grad_enabled():
        return out
    return _ZeroGradients.apply(out, *linked)
