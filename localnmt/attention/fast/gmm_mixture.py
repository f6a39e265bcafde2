"""Gaussian mixture attention fused with dot-product attention, forward and backward in C
(Zhang & Feng 2021, eq. 6 and 13).

After the predictors and the conversions of eq. 10-12, GMM cross-attention computes β of eq.
6 over ``(B, H, Tq, K, Tk)`` mixture terms and fuses it with the softmax α (eq. 13). As torch
ops that is a dozen passes over such tensors forward and again in backward (which recomputes
the terms, see ``_MixtureSum`` in ``methods/gmm.py``), each allocating a fresh
``(…, K, Tk)`` temporary: the largest part of GMM's own training cost at T = 64 in
``python -m bench.profile_step``. :func:`mixture_lerp` computes the same numbers in one pass
per row and direction (``localnmt/csrc/gmm_mixture.c``, built by ``setup.py`` as the optional
extension ``localnmt._gmm_mixture``), without any ``(…, K, Tk)`` tensor, on several threads.

It takes float32 CPU tensors with storage, any variant whose β is not renormalised (``approx``,
``synthesis``) and every fusion; it declines (returns None, and the torch ops run) anything
else, or when the extension was not built. A backward that must itself be differentiable
(``create_graph``) or that runs under ``torch.func`` takes the torch ops. It differs from them
by the rounding of exp (and, in the AVX builds, of fused multiply-adds): tests ask for 1e-5
relative on values and gradients.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from localnmt.attention.fast.band_cpu import has_memory, run_by_sentences

try:
    from localnmt import _gmm_mixture
except ImportError:  # no C compiler at install time: the torch ops run
    _gmm_mixture = None

#: Switch for tests and benchmarks (False: always the torch ops).
ENABLED = _gmm_mixture is not None



def takes(floats: tuple[Tensor | None, ...], real: Tensor | None) -> bool:
    """Built; every given tensor on the CPU with storage, float32 (``real``: bool)."""
    tensors = [(t, torch.float32) for t in floats if t is not None]
    if real is not None:
        tensors.append((real, torch.bool))
    return ENABLED and all(
        t.device.type == "cpu" and t.dtype == dtype and has_memory(t) for t, dtype in tensors
    )


def gated_mixture(log_scale: Tensor, mu: Tensor, sigma: Tensor, positions: Tensor,
                  real: Tensor | None, gate: Tensor | float,
                  alpha: Tensor | None = None, shape: tuple[int, ...] | None = None,
                  ) -> Tensor | None:  # fmt: skip
    """``g·β`` ``(B, H, Tq, Tk)``, or with ``alpha`` ``lerp(alpha, β, g)`` (γ of eq. 13), with
    β of eq. 6 from ``log ω − log Z``, ``μ``, ``σ`` (each broadcastable to ``(B, H, Tq, K)``)
    at key positions j ``positions`` ``(B, Tk)``, 0 at padded keys (``real`` ``(B, Tk)``
    bool, None: all real); ``gate`` g ``(B, H, Tq, 1)`` or a number; ``shape``: ``(B, H, Tq,
    Tk)``, required without ``alpha``. None where declined."""
    gate_tensor = gate if isinstance(gate, Tensor) else None
    if not takes((log_scale, mu, sigma, positions, alpha, gate_tensor), real):
        return None
    shape = tuple(alpha.shape) if alpha is not None else shape
    if shape is None or len(shape) != 4 or math.prod(shape) == 0:
        return None
    batch, heads, tq, tk = shape
    if positions.shape != (batch, tk) or (real is not None and real.shape != (batch, tk)):
        return None
    try:
        k = torch.broadcast_shapes(log_scale.shape, mu.shape, sigma.shape)[-1]
        params = tuple(p.expand(batch, heads, tq, k) for p in (log_scale, mu, sigma))
        if gate_tensor is not None:
            gate_tensor = gate_tensor.expand(batch, heads, tq, 1)
    except RuntimeError:  # shapes that do not broadcast to the attention map's
        return None
    fixed = 0.0 if gate_tensor is not None else float(gate)
    return _GatedMixture.apply(*params, positions, real, alpha, gate_tensor, fixed, shape)


class _GatedMixture(torch.autograd.Function):
    """Forward and backward of gmm_mixture.c; keeps only the inputs (the ``(…, K)``
    parameters, α and the gate), no ``(…, K, Tk)`` term."""

    @staticmethod
    def _args(out, c, mu, sigma, positions, real, alpha, gate, fixed, tk) -> tuple:
        batch, heads, tq, k = c.shape
        address = lambda t: 0 if t is None else t.data_ptr()  # noqa: E731
        return (address(out), c.data_ptr(), mu.data_ptr(), sigma.data_ptr(),
                positions.data_ptr(), address(real), address(alpha), address(gate),
                heads * tq, tk, k, 0 if gate is not None else 1, fixed)  # fmt: skip

    @staticmethod
    def _contiguous(c, mu, sigma, positions, real, alpha, gate) -> tuple:
        as_is = lambda t: None if t is None else t.contiguous()  # noqa: E731
        real = None if real is None else real.to(torch.uint8)
        return tuple(map(as_is, (c, mu, sigma, positions, real, alpha, gate)))

    @staticmethod
    def forward(ctx: Any, c: Tensor, mu: Tensor, sigma: Tensor, positions: Tensor,
                real: Tensor | None, alpha: Tensor | None, gate: Tensor | None, fixed: float,
                shape: tuple[int, ...]) -> Tensor:  # fmt: skip
        ctx.save_for_backward(c, mu, sigma, positions, real, alpha, gate)
        ctx.fixed = fixed
        inputs = _GatedMixture._contiguous(c, mu, sigma, positions, real, alpha, gate)
        out = torch.empty(shape, dtype=torch.float32)
        args = _GatedMixture._args(out, *inputs, fixed, shape[-1])
        run_by_sentences(_gmm_mixture.forward, args, shape[0], (0,) * 6)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        if torch.is_grad_enabled() or not has_memory(grad):  # create_graph or torch.func
            return _torch_backward(ctx, grad)
        inputs = _GatedMixture._contiguous(*ctx.saved_tensors)
        c, alpha = inputs[0], inputs[5]
        wanted = ctx.needs_input_grad
        grad = grad.contiguous()
        dc, dmu, dsigma = (torch.empty(c.shape, dtype=torch.float32) for _ in range(3))
        dalpha = torch.empty_like(alpha) if wanted[5] else None
        dgate = torch.empty(c.shape[:3], dtype=torch.float32) if wanted[6] else None
        grads = (grad.data_ptr(), dc.data_ptr(), dmu.data_ptr(), dsigma.data_ptr(),
                 0 if dalpha is None else dalpha.data_ptr(),
                 0 if dgate is None else dgate.data_ptr())  # fmt: skip
        args = _GatedMixture._args(None, *inputs, ctx.fixed, grad.size(-1))
        run_by_sentences(_gmm_mixture.backward, args, grad.size(0), grads)
        return (dc, dmu, dsigma, None, None, dalpha,
                None if dgate is None else dgate.unsqueeze(-1), None, None)  # fmt: skip


def _torch_backward(ctx: Any, grad: Tensor) -> tuple:
    """The same gradients through the torch ops of ``methods/gmm.py``; differentiable when
    the backward must be (``create_graph``), on fresh leaves otherwise (``torch.func``)."""
    from localnmt.attention.methods.gmm import MixtureParams, mixture_attention

    c, mu, sigma, positions, real, alpha, gate = ctx.saved_tensors
    create_graph = torch.is_grad_enabled()
    wanted = (*ctx.needs_input_grad[:3], *ctx.needs_input_grad[5:7])
    with torch.enable_grad():
        leaves = [c, mu, sigma, alpha, gate]
        if not create_graph:
            leaves = [None if t is None else t.detach().requires_grad_(w)
                      for t, w in zip(leaves, wanted)]  # fmt: skip
        c, mu, sigma, alpha, gate = leaves
        beta = mixture_attention(MixtureParams(c, mu, sigma, c), positions, real, False)
        weight = ctx.fixed if gate is None else gate
        out = beta * weight if alpha is None else torch.lerp(alpha, beta, weight)
        inputs = [t for t, w in zip(leaves, wanted) if w]
        found = iter(torch.autograd.grad(out, inputs, grad, create_graph=create_graph))
        got = [next(found) if w else None for w in wanted]
    return (*got[:3], None, None, got[3], got[4], None, None)
