"""The output layer of GMM cross-attention's predictor FFNs, with the sigmoid before it, in C
(``localnmt/csrc/gmm_bank_head.h``, in the extension ``localnmt._gmm_mixture``): forward and
backward of what follows the hidden layer's GEMMs in training (Zhang & Feng 2021, eq. 7-9 and
14; ``fast/autograd/predictor_gemms.py`` calls it).

Each output column reads only its own predictor's ``d`` hidden units, so the block-diagonal
product torch runs as one ``(rows, n·d) × (n·d, width)`` GEMM (and two more in backward, with a
sigmoid and its backward around them) is a pass per row here with ``1/n`` of the
multiply-adds. Float32 CPU tensors with storage; :func:`takes` says whether a call can run.
"""

from __future__ import annotations

from torch import Tensor

from localnmt.attention.fast.native import cpu_float32, run_by_sentences
from localnmt.attention.fast.native.c_gmm_mixture import TEAM, _gmm_mixture

#: Switch for tests and benchmarks (False: torch's GEMMs and sigmoid).
ENABLED = _gmm_mixture is not None and hasattr(_gmm_mixture, "head_forward")


def takes(*tensors: Tensor) -> bool:
    """Built, and every tensor float32 on the CPU with storage."""
    return ENABLED and cpu_float32(*tensors)


def head_forward(pre: Tensor, out_weight: Tensor, bias: Tensor, block: Tensor) -> Tensor:
    """``(rows, width)`` outputs ``bias + 2·sigmoid(pre)·V'`` (``V'`` block-diagonal from
    ``out_weight`` ``(total, d)``, its rows' predictors in ``block``, int32 ``(total,)``);
    ``pre`` ``(rows, n·d)`` contiguous is overwritten with ``sigmoid(pre)``."""
    rows, hidden = pre.shape
    total, dim = out_weight.shape
    width = bias.size(0)
    out = pre.new_empty(rows, width)
    if rows == 0:  # an empty batch (no buffer to point at)
        return out
    args = (pre.data_ptr(), out.data_ptr(), 0, out_weight.data_ptr(), bias.data_ptr(),
            block.data_ptr(), hidden, dim, total, width)  # fmt: skip
    run_by_sentences(_gmm_mixture.head_forward, args, rows, (0, 0, 0), TEAM)
    return out


def head_backward(grad: Tensor, hidden: Tensor, out_weight: Tensor, bias: Tensor,
                  block: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """From the output gradient ``grad`` ``(rows, width)`` and the kept ``hidden``: half the
    gradient of the hidden layer's pre-activation ``(rows, n·d)`` (``(V'^T g) ⊙ h(1 − h)``),
    ``G = Σ_rows g_o·h`` per stored ``V^T`` entry ``(total, d)`` and ``S = Σ_rows g``
    ``(total,)``."""
    rows, n_hidden = hidden.shape
    total, dim = out_weight.shape
    d_pre = hidden.new_empty(rows, n_hidden)
    sums = out_weight.new_zeros(total, dim)
    column_sums = out_weight.new_zeros(total)
    if rows == 0:
        return d_pre, sums, column_sums
    args = (hidden.data_ptr(), grad.data_ptr(), d_pre.data_ptr(), out_weight.data_ptr(),
            bias.data_ptr(), block.data_ptr(), n_hidden, dim, total, grad.size(1))  # fmt: skip
    run_by_sentences(_gmm_mixture.head_backward, args, rows,
                     (sums.data_ptr(), column_sums.data_ptr(), 0), TEAM)  # fmt: skip
    return d_pre, sums, column_sums
