"""GMM cross-attention's predictor FFNs in training, with a hand-written backward (Zhang & Feng
2021, eq. 7-9 and 14: ``V^T tanh(W^T Q(s_i) + b1) + b2``, shared by all heads).

The predictors' hidden layer is ``(B·H·Tq, n·d)``: at 1024 target tokens of a base model 8192
rows of 256 floats (8 MB) per layer, as large as the FFN's hidden layer. Through autograd, its
backward writes the hidden gradient and then a second fresh tensor of that size for the
sigmoid's backward, and on the 4-D input the forward adds the bias in a separate pass.
:func:`predictor_outputs` computes the same products as ``F.linear(F.linear(q, W1, b1).sigmoid_(),
W2, b2)`` with the bias inside the GEMM, on the ``(rows, d)`` input, and takes the sigmoid's
backward in place in the hidden gradient. ``python -m bench.gmm_training`` compares it with
autograd in a whole step (its "autograd predictors" form); the test asks for the autograd
values and gradients to float32 rounding.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from localnmt.attention.fast.native import has_memory

#: Switch for tests and benchmarks (False: always ``F.linear`` through autograd).
ENABLED = True


def predictor_outputs(q: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    """``sigmoid(q W1^T + b1) W2^T + b2`` for ``q`` ``(…, d)``; the hand-written backward where
    autograd records (plain tensors), ``F.linear`` otherwise."""
    tensors = (q, w1, b1, w2, b2)
    recorded = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if not (ENABLED and recorded) or not all(map(has_memory, tensors)):  # inference, torch.func
        return F.linear(F.linear(q, w1, b1).sigmoid_(), w2, b2)
    return _PredictorGemms.apply(q, w1, b1, w2, b2)


class _PredictorGemms(torch.autograd.Function):
    """The two layers as ``addmm`` on ``(rows, d)``; keeps the input and the hidden layer."""

    @staticmethod
    def forward(ctx: Any, q: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
        rows = q.reshape(-1, q.size(-1))
        hidden = torch.addmm(b1, rows, w1.t()).sigmoid_()
        ctx.save_for_backward(q, rows, hidden, w1, b1, w2, b2)
        return torch.addmm(b2, hidden, w2.t()).view(*q.shape[:-1], -1)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        q, rows, hidden, w1, b1, w2, b2 = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: the same gradients, differentiable
            inputs = (q, w1, b1, w2, b2)
            with torch.enable_grad():
                out = F.linear(torch.sigmoid(F.linear(q, w1, b1)), w2, b2)
                wanted = [t for t, w in zip(inputs, ctx.needs_input_grad) if w]
                found = iter(torch.autograd.grad(out, wanted, grad, create_graph=True))
            return tuple(next(found) if w else None for w in ctx.needs_input_grad)
        # under autocast the forward's products ran in the hidden layer's dtype: so does this
        # backward (autograd casts each gradient back to its input's dtype)
        low = hidden.dtype
        rows, w1, w2 = rows.to(low), w1.to(low), w2.to(low)
        grad = grad.reshape(-1, grad.size(-1)).to(low)
        d_hidden = grad @ w2
        torch.ops.aten.sigmoid_backward.grad_input(d_hidden, hidden, grad_input=d_hidden)
        need_q, need_w1, need_b1, need_w2, need_b2 = ctx.needs_input_grad
        return (
            (d_hidden @ w1).view(q.shape) if need_q else None,
            d_hidden.t() @ rows if need_w1 else None,
            d_hidden.sum(0) if need_b1 else None,
            grad.t() @ hidden if need_w2 else None,
            grad.sum(0) if need_b2 else None,
        )
