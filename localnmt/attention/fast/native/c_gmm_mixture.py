"""Gaussian mixture cross-attention after the predictors, forward and backward in C, for
training and full-sequence forwards (Zhang & Feng 2021, eq. 6 and 10-14).

As torch ops, GMM cross-attention after its predictors is two stages with autograd:

- eq. 10-12 and 14, the raw predictor outputs → ``log ω − log Z``, μ, σ and the gate g: some
  thirty small ops on ``(B, H, Tq, K)`` tensors, each paying dispatch and an autograd node;
- eq. 6 and 13, β over ``(B, H, Tq, K, Tk)`` mixture terms fused with the softmax α: a dozen
  passes over such tensors forward and again in backward (which recomputes the terms, see
  ``MixtureSum`` in ``attention/mixture.py``), each allocating a fresh ``(…, K, Tk)`` temporary.

Both were about as costly as the paper's predictor FFNs themselves in a training step
(``python -m bench.profile_step``). Here each stage is one autograd Function over C loops
(``localnmt/csrc/gmm_mixture.c`` and ``gmm_params.h``, built by ``setup.py`` as the optional
extension ``localnmt._gmm_mixture``), on several threads, without any ``(…, K, Tk)`` tensor:

- :func:`gated_mixture`: ``g·β`` or ``lerp(α, β, g)`` from the mixture's parameters (any
  variant whose β is not renormalised: ``approx``, ``synthesis``);
- :func:`approx_gated_mixture`: the same from the raw predictor outputs, variant ``approx``
  (the paper's method) with any ``share`` / ``fusion``.

They take float32 CPU tensors with storage and decline (return None, and the torch ops run)
anything else, or when the extension was not built. A backward that must itself be
differentiable (``create_graph``) or that runs under ``torch.func`` takes the torch ops. They
differ from the torch ops by the rounding of exp and log (and, in the AVX builds, of fused
multiply-adds): tests ask for 1e-5 relative on values and gradients.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from localnmt.attention.fast.native import (
    cpu_float32,
    has_memory,
    load,
    run_by_sentences,
    use_torchs_threads,
)
from localnmt.attention.mixture import MixtureParams, PredictorLayout, mixture_attention

# None without a C compiler at install time, or when built from other sources
# (localnmt/cbuild.py): the torch ops run
_gmm_mixture = load("_gmm_mixture", "gmm_mixture.c")

#: Switch for tests and benchmarks (False: always the torch ops).
ENABLED = _gmm_mixture is not None
#: Built with OpenMP: each call splits its sentences among torch's threads itself.
TEAM = use_torchs_threads(_gmm_mixture)


def takes(floats: tuple[Tensor | None, ...], real: Tensor | None) -> bool:
    """Built; every given tensor on the CPU with storage, float32 (``real``: bool)."""
    if real is not None and (real.device.type != "cpu" or real.dtype != torch.bool
                             or not has_memory(real)):  # fmt: skip
        return False
    return ENABLED and cpu_float32(*floats)


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
    params = (log_scale, mu, sigma)
    full = (batch, heads, tq)
    exact = log_scale.shape[:3] == full and log_scale.shape == mu.shape == sigma.shape
    if not exact or (gate_tensor is not None and gate_tensor.shape != (*full, 1)):
        try:  # (the C parameters of approx_gated_mixture come shaped exactly: no check)
            k = torch.broadcast_shapes(log_scale.shape, mu.shape, sigma.shape)[-1]
            params = tuple(p.expand(*full, k) for p in params)
            if gate_tensor is not None:
                gate_tensor = gate_tensor.expand(*full, 1)
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
        real = None if real is None else real.view(torch.uint8)  # bool: one byte, 0 or 1
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
        run_by_sentences(_gmm_mixture.forward, args, shape[0], (0,) * 6, TEAM)
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
        run_by_sentences(_gmm_mixture.backward, args, grad.size(0), grads, TEAM)
        return (dc, dmu, dsigma, None, None, dalpha,
                None if dgate is None else dgate.unsqueeze(-1), None, None)  # fmt: skip


def _torch_backward(ctx: Any, grad: Tensor) -> tuple:
    """The same gradients through the torch ops of :mod:`localnmt.attention.mixture`;
    differentiable when the backward must be (``create_graph``), on fresh leaves otherwise
    (``torch.func``)."""
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


#: ``(raw outputs) -> (log ω − log Z, μ, σ, g)`` in torch ops: the reference of eq. 10-12 and
#: 14 that a differentiable backward (``create_graph``, ``torch.func``) goes through.
ParamsReference = Callable[[Tensor], tuple[Tensor, Tensor, Tensor, Tensor | float]]


def approx_gated_mixture(layout: PredictorLayout, outputs: Tensor, length: Tensor,
                         positions: Tensor, real: Tensor | None, shape: tuple[int, ...],
                         reference: ParamsReference,
                         alpha: Tensor | None = None) -> Tensor | None:  # fmt: skip
    """:func:`gated_mixture` from the raw predictor ``outputs`` ``(B, H, Tq, C)`` of variant
    ``approx`` (columns as in ``layout``), J ``length`` broadcastable to ``(B, 1, Tq, 1)``:
    ``g·β`` (``alpha`` None) or ``lerp(alpha, β, g)``, ``(B, H, Tq, Tk)`` = ``shape``.
    ``reference``: eq. 10-12 and 14 in torch ops, for a differentiable backward."""
    if layout.k > MAX_K or not takes((outputs, length), None):
        return None
    batch, heads, tq, _ = shape
    if outputs.dim() != 4 or outputs.shape[:3] != (batch, heads, tq):
        return None
    try:
        lengths = length.expand(batch, 1, tq, 1).reshape(batch, 1, tq).expand(batch, heads, tq)
    except RuntimeError:
        return None
    c, mu, sigma, gate = _ApproxParams.apply(outputs, lengths, layout, reference)
    learned = layout.gate_col >= 0
    return gated_mixture(c, mu, sigma, positions, real, gate if learned else layout.fixed_gate,
                         alpha, shape)  # fmt: skip


#: The C code keeps K parameters per row on the stack (gmm_params.h).
MAX_K = 64


class _ApproxParams(torch.autograd.Function):
    """Eq. 10-12 and 14 of variant ``approx`` in C: raw predictor outputs ``(B, H, Tq, C)``
    → ``log ω − log Z``, μ, σ ``(B, H, Tq, K)`` and g ``(B, H, Tq, 1)`` (the fixed gate where
    it is not learned)."""

    @staticmethod
    def _args(raw, lengths, out: tuple, layout) -> tuple:
        batch, heads, tq, width = raw.shape
        return (raw.data_ptr(), lengths.data_ptr(), *out, heads * tq, width, layout.k,
                layout.mu_col, layout.mu_n, layout.sigma_col, layout.sigma_n, layout.omega_col,
                layout.gate_col, layout.fusion, layout.sigma_min, layout.fixed_gate)  # fmt: skip

    @staticmethod
    def forward(ctx: Any, raw: Tensor, lengths: Tensor, layout: PredictorLayout,
                reference: ParamsReference) -> tuple[Tensor, ...]:  # fmt: skip
        raw, lengths = raw.contiguous(), lengths.contiguous()
        ctx.save_for_backward(raw, lengths)
        ctx.layout, ctx.reference = layout, reference
        shape = (*raw.shape[:3], layout.k)
        c, mu, sigma = (raw.new_empty(shape) for _ in range(3))
        gate = raw.new_full((*raw.shape[:3], 1), layout.fixed_gate)
        learned = layout.gate_col >= 0
        out = (c.data_ptr(), mu.data_ptr(), sigma.data_ptr(), gate.data_ptr() if learned else 0)
        args = _ApproxParams._args(raw, lengths, out, layout)
        run_by_sentences(_gmm_mixture.params_forward, args, raw.size(0), (0,) * 5, TEAM)
        if not learned:
            ctx.mark_non_differentiable(gate)
        return c, mu, sigma, gate

    @staticmethod
    def backward(ctx: Any, dc: Tensor, dmu: Tensor, dsigma: Tensor, dgate: Tensor):
        raw, lengths = ctx.saved_tensors
        grads = (dc, dmu, dsigma, dgate)
        if torch.is_grad_enabled() or not all(map(has_memory, grads)):  # create_graph, torch.func
            return _reference_backward(ctx, raw, grads), None, None, None
        layout = ctx.layout
        dc, dmu, dsigma, dgate = (g.contiguous() for g in grads)
        draw = torch.empty_like(raw)
        learned = layout.gate_col >= 0
        args = _ApproxParams._args(raw, lengths, (0, 0, 0, 0), layout)
        addresses = (dc.data_ptr(), dmu.data_ptr(), dsigma.data_ptr(),
                     dgate.data_ptr() if learned else 0, draw.data_ptr())  # fmt: skip
        run_by_sentences(_gmm_mixture.params_backward, args, raw.size(0), addresses, TEAM)
        return draw, None, None, None


def _reference_backward(ctx: Any, raw: Tensor, grads: tuple[Tensor, ...]) -> Tensor:
    """The gradient of ``raw`` through the torch ops of ``ctx.reference``."""
    create_graph = torch.is_grad_enabled()
    with torch.enable_grad():
        leaf = raw if create_graph and raw.requires_grad else raw.detach().requires_grad_()
        outs = ctx.reference(leaf)
        pairs = [(o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad]
        (draw,) = torch.autograd.grad([o for o, _ in pairs], [leaf],
                                      [g.expand_as(o) for o, g in pairs],
                                      create_graph=create_graph)  # fmt: skip
    return draw
