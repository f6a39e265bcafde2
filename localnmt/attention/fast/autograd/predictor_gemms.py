"""GMM cross-attention's predictor FFNs in training, with a hand-written backward (Zhang & Feng
2021, eq. 7-9 and 14: ``V^T tanh(W^T Q(s_i) + b1) + b2``, shared by all heads).

The predictors are stored stacked (``PredictorBank`` in ``methods/gmm.py``): ``W`` ``(n·d, d)``,
``b1`` ``(n·d,)``, ``V^T`` ``(Σ out, d)``, ``b2`` ``(Σ out,)``. They run as two GEMMs, the hidden
layers side by side and the output layers as one block-diagonal product, with tanh as a
sigmoid (``tanh(x) = 2·sigmoid(2x) − 1``, so ``V^T tanh(x) + b2 = (2V)^T sigmoid(2x) + (b2 −
V^T 1)``: torch's CPU tanh is slower than its sigmoid, 3.2 vs 1.1 ms on the (8192, 256) hidden
layer of a 1024-token batch, ``python -m bench.small_op_threads``). :class:`BankShape` says
where each predictor's weights go in the folded ones.

In training, :func:`bank_outputs` runs one autograd Function over the stored parameters: the
fold (the factors as the GEMMs' ``alpha`` / ``beta``, the block-diagonal written in place)
records no autograd node, the biases go inside the GEMMs, and the sigmoid's backward runs in
place in the hidden gradient. Through autograd the same step recorded a dozen small ops per
layer forward and as many backward, and two fresh hidden-layer-sized tensors for the
sigmoid's backward. ``python -m bench.gmm_training`` compares it with autograd in a whole step
(its "autograd predictors" form); the tests ask for the autograd values and gradients to
float32 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from localnmt.attention.fast.native import c_bank_head, has_memory

#: Switch for tests and benchmarks (False: always ``F.linear`` through autograd).
ENABLED = True
#: Switch for tests and benchmarks (False: the output layer as torch's GEMMs, not C).
HEAD_IN_C = True

#: ``(W, b1, V^T, b2)`` as stored by the bank (see the module docstring for the shapes).
BankWeights = tuple[Tensor, Tensor, Tensor, Tensor]


@dataclass(frozen=True)
class BankShape:
    """``n`` predictors of hidden size ``dim`` with ``outs`` output columns each."""

    dim: int
    outs: tuple[int, ...]
    _index: dict[torch.device, Tensor] = field(default_factory=dict, compare=False, repr=False)
    _predictors: dict[torch.device, Tensor] = field(default_factory=dict, compare=False,
                                                    repr=False)  # fmt: skip

    @property
    def total(self) -> int:
        return sum(self.outs)

    def width(self, device: torch.device) -> int:
        """Output columns as computed: on CPU zero columns up to a multiple of 16 when Σ out
        is 9-15 (mod 16): MKL's single-precision GEMM computes 16 output columns in one panel
        and a ragged edge slowly, and K = 4 with a gate has 13 outputs (``python -m
        bench.small_op_threads`` times both widths). The extra columns are 0."""
        total = self.total
        return total + (-total % 16 if total % 16 > 8 and device.type == "cpu" else 0)

    def block_index(self, device: torch.device) -> Tensor:
        """Where each element of ``V^T`` ``(Σ out, d)`` sits in the flattened block-diagonal
        ``(width, n·d)``."""
        if device not in self._index:
            row_block = torch.repeat_interleave(torch.arange(len(self.outs)),
                                                torch.tensor(self.outs))  # fmt: skip
            rows = torch.arange(self.total)[:, None] * (len(self.outs) * self.dim)
            cols = row_block[:, None] * self.dim + torch.arange(self.dim)[None, :]
            self._index[device] = (rows + cols).reshape(-1).to(device)
        return self._index[device]

    def output_predictors(self, device: torch.device) -> Tensor:
        """The predictor of each output column, int32 ``(Σ out,)`` (the C output layer's
        blocks)."""
        if device not in self._predictors:
            self._predictors[device] = torch.repeat_interleave(
                torch.arange(len(self.outs), dtype=torch.int32), torch.tensor(self.outs)
            ).to(device)
        return self._predictors[device]

    def output_bias(self, out_weight: Tensor, out_bias: Tensor) -> Tensor:
        """``b2 − V^T 1`` ``(width,)`` (zeros after Σ out), a new tensor with no autograd
        history."""
        with torch.no_grad():
            bias = out_weight.new_zeros(self.width(out_weight.device))
            torch.sub(out_bias, out_weight.sum(dim=1), out=bias[: self.total])
        return bias

    def fold_output_layer(self, out_weight: Tensor, out_bias: Tensor) -> tuple[Tensor, Tensor]:
        """The block-diagonal ``V^T`` ``(width, n·d)`` (without the factor 2) and ``b2 − V^T 1``
        ``(width,)``, as new tensors with no autograd history."""
        width = self.width(out_weight.device)
        with torch.no_grad():
            blocks = out_weight.new_zeros(width, len(self.outs) * self.dim)
            blocks.view(-1).index_copy_(0, self.block_index(out_weight.device),
                                        out_weight.reshape(-1))  # fmt: skip
        return blocks, self.output_bias(out_weight, out_bias)

    def folded(self, weights: BankWeights, scale: float) -> BankWeights:
        """``2·scale·W``, ``2·b1``, ``2·V`` (block-diagonal, ``(width, n·d)``) and ``b2 − V^T 1``
        as differentiable torch ops: ``F.linear(F.linear(q, W', b1').sigmoid(), V', b2')`` is
        the bank's output."""
        w1, b1, w2, b2 = weights
        blocks = torch.block_diag(*w2.split(self.outs))
        bias = b2 - w2.sum(dim=1)
        pad = self.width(w2.device) - self.total
        if pad:
            blocks = F.pad(blocks, (0, 0, 0, pad))
            bias = F.pad(bias, (0, pad))
        return w1 * (2 * scale), b1 * 2, blocks * 2, bias


def bank_outputs(q: Tensor, weights: BankWeights, shape: BankShape, scale: float) -> Tensor:
    """Every predictor's raw output ``V^T tanh(W^T (scale·q) + b1) + b2`` side by side,
    ``(…, width)``, for ``q`` ``(…, d)``: the hand-written backward where autograd records
    (plain tensors), differentiable torch ops otherwise (``torch.func``, no autograd)."""
    tensors = (q, *weights)
    recorded = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if not (ENABLED and recorded) or not all(map(has_memory, tensors)):
        w1, b1, w2, b2 = shape.folded(weights, scale)
        return F.linear(F.linear(q, w1, b1).sigmoid_(), w2, b2)
    return _BankGemms.apply(q, *weights, shape, scale)


class _BankGemms(torch.autograd.Function):
    """The hidden layer as ``addmm`` on ``(rows, d)``; the output layer (with the sigmoid
    before it) in C where :mod:`~localnmt.attention.fast.native.c_bank_head` takes the
    tensors, else as ``addmm`` with the block-diagonal ``V^T``. Keeps the input, the hidden
    layer, ``W`` and ``V^T`` (block-diagonal for the torch path)."""

    @staticmethod
    def forward(ctx: Any, q: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor,
                shape: BankShape, scale: float) -> Tensor:  # fmt: skip
        rows = q.reshape(-1, q.size(-1))
        pre = torch.addmm(b1, rows, w1.t(), beta=2.0, alpha=2.0 * scale)
        ctx.shape, ctx.scale = shape, scale
        if HEAD_IN_C and c_bank_head.takes(pre, w2, b2):
            bias = shape.output_bias(w2, b2)
            out = c_bank_head.head_forward(pre, w2.contiguous(), bias,
                                           shape.output_predictors(pre.device))  # fmt: skip
            ctx.save_for_backward(q, rows, pre, w1, b1, w2, b2, bias)
            ctx.head_in_c = True
            return out.view(*q.shape[:-1], out.size(1))
        hidden = pre.sigmoid_()
        blocks, bias = shape.fold_output_layer(w2, b2)
        ctx.save_for_backward(q, rows, hidden, w1, b1, w2, b2, blocks)
        ctx.head_in_c = False
        return torch.addmm(bias.to(hidden.dtype), hidden, blocks.t().to(hidden.dtype),
                           alpha=2.0).view(*q.shape[:-1], blocks.size(0))  # fmt: skip

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        q, rows, hidden, w1, b1, w2, b2, blocks = ctx.saved_tensors  # blocks: bias in C
        shape, scale = ctx.shape, ctx.scale
        if torch.is_grad_enabled():  # create_graph: the same gradients, differentiable
            inputs = (q, w1, b1, w2, b2)
            with torch.enable_grad():
                f1, fb1, f2, fb2 = shape.folded((w1, b1, w2, b2), scale)
                out = F.linear(torch.sigmoid(F.linear(q, f1, fb1)), f2, fb2)
                wanted = [t for t, w in zip(inputs, ctx.needs_input_grad) if w]
                found = iter(torch.autograd.grad(out, wanted, grad, create_graph=True))
            return (*(next(found) if w else None for w in ctx.needs_input_grad), None, None)
        # under autocast the forward's products ran in the hidden layer's dtype: so does this
        # backward (autograd casts each gradient back to its input's dtype)
        low = hidden.dtype
        rows, w1 = rows.to(low), w1.to(low)
        grad = grad.reshape(-1, grad.size(-1)).to(low)
        # out = 2·h·V'^T + b2', h = sigmoid(2s·rows·W^T + 2·b1): d_hidden holds half the
        # gradient of the sigmoid's input; the factors 2 and 2s go into the products
        head = None
        if ctx.head_in_c and c_bank_head.takes(grad):
            head = c_bank_head.head_backward(grad.contiguous(), hidden, w2.contiguous(), blocks,
                                             shape.output_predictors(grad.device))  # fmt: skip
            d_hidden = head[0]
        else:
            if ctx.head_in_c:  # a gradient C does not take: the block-diagonal V^T after all
                blocks = shape.fold_output_layer(w2, b2)[0]
            blocks = blocks.to(low)
            d_hidden = grad @ blocks
            torch.ops.aten.sigmoid_backward.grad_input(d_hidden, hidden, grad_input=d_hidden)
        need_q, need_w1, need_b1, need_w2, need_b2 = ctx.needs_input_grad[:5]
        d_q = (d_hidden @ w1).mul_(4.0 * scale).view(q.shape) if need_q else None
        d_w1 = (d_hidden.t() @ rows).mul_(4.0 * scale) if need_w1 else None
        d_b1 = d_hidden.sum(0).mul_(4.0) if need_b1 else None
        d_w2 = d_b2 = None
        if head is not None:
            _, sums, column_sums = head
            d_b2 = column_sums if need_b2 else None
            d_w2 = sums.mul_(2.0).sub_(column_sums[:, None]) if need_w2 else None
        elif need_w2 or need_b2:
            column_sums = grad.sum(0)[: shape.total]  # the gradient of b2 − V^T 1
            d_b2 = column_sums if need_b2 else None
            if need_w2:
                d_blocks = grad.t() @ hidden
                d_w2 = torch.take(d_blocks, shape.block_index(d_blocks.device)).view(w2.shape)
                d_w2 = d_w2.mul_(2.0).sub_(column_sums[:, None])
        return d_q, d_w1, d_b1, d_w2, d_b2, None, None
