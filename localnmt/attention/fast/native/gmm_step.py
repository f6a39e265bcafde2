"""GMM cross-attention's decoding step after the predictors, fused in C (eq. 6, 10-13), and the
hard-coded Gaussian's (:func:`fixed_gaussian_step`).

In beam search a step of Gaussian mixture cross-attention works on ``(B·beam, H, 1, ·)``
tensors: the ~25 torch ops of :meth:`GaussianMixture.post` after the predictors (sigmoids,
log-softmax, eq. 11-12 on ``(…, K)`` values, the ``(…, K, Tk)`` terms of eq. 6, the gate)
each cost more in dispatch than in arithmetic. :func:`mixture_post` computes the same
numbers in one pass per row (``localnmt/csrc/gmm_step.c``, built by ``setup.py`` as the
optional extension ``localnmt._gmm_step``), for the ``approx`` variant (the paper's method)
with any ``share``/``fusion``, float32 on the CPU, without autograd.

It declines (returns None, and the torch ops run) anything else, or when the extension was
not built. It differs from the torch ops by the rounding of exp and log (and, in the AVX
builds, of multiply-adds the compiler fuses), which μ = J·s
and z = (j − μ)/σ amplify by up to J/σ: tests ask for 1e-5 relative on the attention weights,
exp itself within 2 ulp, and the same beam-search hypotheses.

:func:`attention_step` goes one step further, to the layer's output: the logits ``q·k_j``,
their softmax α over the real keys, γ as above and ``γ @ V`` in one call, the sentences split
among torch's threads. It stands for the dense path of a decoding step (logits, softmax, the
post stage, the product with the values: about ten torch ops and their Python around them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from localnmt.attention.fast.native import (
    cpu_float32,
    has_memory,
    load,
    run_by_sentences,
    use_torchs_threads,
    view_of,
)
from localnmt.attention.mixture import PredictorLayout, StepWeights

# None without a C compiler at install time, or when built from other sources
# (localnmt/cbuild.py): the torch ops run
_gmm_step = load("_gmm_step", "gmm_step.c")

#: Switch for tests and benchmarks (False: always the torch ops).
ENABLED = _gmm_step is not None
#: The C code keeps K parameters per row on the stack.
MAX_K = 64
#: Built with OpenMP: :func:`attention_step` splits its sentences among torch's threads itself.
TEAM = use_torchs_threads(_gmm_step)


def _readable(mask: Tensor | None) -> bool:
    """A padding mask the C code can read by address (None: no mask)."""
    return mask is None or (mask.device.type == "cpu" and has_memory(mask))


def mixture_post(layout: PredictorLayout, outputs: Tensor, probs: Tensor, positions: Tensor,
                 length: Tensor, real: Tensor | None) -> Tensor | None:  # fmt: skip
    """γ of eq. 13 ``(B, H, 1, Tk)`` from the raw predictor ``outputs`` ``(B, H, 1, C)`` and
    the softmax ``probs`` ``(B, H, 1, Tk)`` of one decoding step; ``positions`` j ``(B, Tk)``,
    ``length`` J ``(B, 1, 1, 1)``, ``real`` ``(B, Tk)`` bool or None. None where declined."""
    if not ENABLED or layout.k > MAX_K:
        return None
    if torch.is_grad_enabled() and (outputs.requires_grad or probs.requires_grad):
        return None
    if not cpu_float32(outputs, probs, positions, length) or not _readable(real):
        return None  # another device or dtype, torch.func transforms, tracing subclasses
    batch, heads, tq, tk = probs.shape
    if tq != 1 or length.numel() != batch or positions.shape != (batch, tk):
        return None
    if outputs.shape[:3] != (batch, heads, 1):
        return None
    if real is not None and (real.dtype != torch.bool or real.shape != (batch, tk)):
        return None
    outputs, probs = outputs.contiguous(), probs.contiguous()
    positions, length = positions.contiguous(), length.contiguous()
    if real is not None:
        real = real.contiguous()
    out = torch.empty_like(probs)
    _gmm_step.mixture_post(
        out.data_ptr(), outputs.data_ptr(), probs.data_ptr(), positions.data_ptr(),
        length.data_ptr(), 0 if real is None else real.data_ptr(),
        batch, heads, tk, outputs.size(-1), layout.k, layout.mu_col, layout.mu_n,
        layout.sigma_col, layout.sigma_n, layout.omega_col, layout.gate_col, layout.fusion,
        layout.sigma_min, layout.fixed_gate,
    )  # fmt: skip
    return out


def attention_step(layout: PredictorLayout, q: Tensor, k: Tensor, v: Tensor, key_group: int,
                   outputs: Tensor | None, positions: Tensor, length: Tensor, real: Tensor | None,
                   predictors: StepWeights | None = None) -> Tensor | None:  # fmt: skip
    """The output ``(B, H, 1, d)`` of one decoding step of GMM cross-attention: α = softmax of
    ``q·k_j`` over the real keys (``q`` pre-scaled ``(B, H, 1, d)``), γ of eq. 13 from the raw
    predictor ``outputs`` ``(B, H, 1, C)``, and ``γ @ v``; ``k``, ``v`` ``(B / key_group, H, Tk,
    d)``, ``positions`` j ``(B, Tk)``, ``length`` J ``(B, 1, 1, 1)``, ``real`` ``(B, Tk)`` bool
    or None. With ``predictors`` (and ``outputs`` None) the raw outputs are computed in the
    same call from ``q`` (``csrc/gmm_predict.h``). None where declined (the dense path runs)."""
    if (outputs is None) == (predictors is None):
        return None
    step = prepare_step(layout, q, k, key_group, positions, length, real, predictors)
    return None if step is None else step(q, k, v, outputs)


@dataclass(frozen=True)
class PreparedStep:
    """:func:`attention_step` with everything but ``q``, ``k``, ``v`` and the raw outputs
    checked once (:func:`prepare_step`): the steps of one decoding run differ only in those.
    Holds the source's positions, lengths and padding and the predictors' weights, not the
    keys and values."""

    query_shape: torch.Size
    key_shape: torch.Size
    #: the C call's arguments of the source: positions, lengths, padding, sizes
    source: tuple
    #: the predictors' output width (0: raw outputs given, their width with each step)
    width: int
    #: the C call's arguments of the layout (eq. 10-14)
    layout: tuple
    #: the predictors' weights' addresses and hidden size, or zeros (raw outputs given)
    fused: tuple
    #: the tensors behind the addresses (kept alive), and whether any asks for gradients
    kept: tuple[Tensor, ...]
    kept_need_grad: bool

    def __call__(self, q: Tensor, k: Tensor, v: Tensor, outputs: Tensor | None = None
                 ) -> Tensor | None:  # fmt: skip
        """The step's output, or None where declined (the dense path runs)."""
        if not ENABLED or (outputs is None) != (self.fused[0] != 0):
            return None
        tensors = (q, k, v) if outputs is None else (q, k, v, outputs)
        if torch.is_grad_enabled() and (
            self.kept_need_grad or any(t.requires_grad for t in tensors)
        ):
            return None
        if not cpu_float32(*tensors):
            return None  # another device or dtype, torch.func transforms, tracing subclasses
        if q.shape != self.query_shape or k.shape != self.key_shape or v.shape != k.shape:
            return None
        if outputs is not None:
            if outputs.shape[:3] != q.shape[:3]:
                return None
            outputs = outputs.contiguous()
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        batch, heads, _, dim = q.shape
        out = q.new_empty(batch, heads, 1, dim)
        raw, width = (0, self.width) if outputs is None else (outputs.data_ptr(), outputs.size(-1))
        args = (view_of(out), view_of(q), view_of(k), view_of(v), raw, *self.source, width,
                *self.layout, *self.fused)  # fmt: skip
        run_by_sentences(_gmm_step.attention_step, args, batch, None, TEAM)
        return out


def prepare_step(layout: PredictorLayout, q: Tensor, k: Tensor, key_group: int,
                 positions: Tensor, length: Tensor, real: Tensor | None,
                 predictors: StepWeights | None = None) -> PreparedStep | None:  # fmt: skip
    """:func:`attention_step` prepared for steps with queries and keys of the shapes of ``q``
    and ``k`` (raw outputs given with each step where ``predictors`` is None), or None where
    it would decline any."""
    if not ENABLED or layout.k > MAX_K:
        return None
    weights = () if predictors is None else predictors.tensors()
    if not cpu_float32(positions, length, *weights) or not _readable(real):
        return None  # another device or dtype, torch.func transforms, tracing subclasses
    batch, heads, tq, dim = q.shape
    tk = k.size(2)
    if tq != 1 or k.shape != (batch // key_group, heads, tk, dim) or batch % key_group:
        return None
    if length.numel() != batch or positions.shape != (batch, tk):
        return None
    if predictors is not None and not predictors.fits(dim):
        return None
    if real is not None and (real.dtype != torch.bool or real.shape != (batch, tk)):
        return None
    positions, length = positions.contiguous(), length.contiguous()
    if real is not None:
        real = real.contiguous()
    if predictors is None:
        width, fused = 0, (0, 0, 0, 0, 0)
    else:
        width = predictors.width
        fused = (*(t.data_ptr() for t in weights), predictors.hidden)
    source = (positions.data_ptr(), length.data_ptr(), 0 if real is None else real.data_ptr(),
              heads, tk, dim, key_group)  # fmt: skip
    constants = (layout.k, layout.mu_col, layout.mu_n, layout.sigma_col, layout.sigma_n,
                 layout.omega_col, layout.gate_col, layout.fusion, layout.sigma_min,
                 layout.fixed_gate)  # fmt: skip
    kept = tuple(t for t in (positions, length, real, *weights) if t is not None)
    return PreparedStep(q.shape, k.shape, source, width, constants, fused, kept,
                        any(t.requires_grad for t in kept))  # fmt: skip


def fixed_gaussian_step(v: Tensor, key_group: int, key_positions: Tensor, query_positions: Tensor,
                        key_lengths: Tensor, padding: Tensor | None, ratio: float,
                        std: float) -> Tensor | None:  # fmt: skip
    """``p @ V`` ``(B, H, Tq, d)`` of the hard-coded Gaussian (``attention/fixed_gaussian.py``)
    in one C call: ``v`` ``(B / key_group, H, Tk, d)``, key positions ``(B, Tk)``, query
    positions and real lengths ``(B, Tq)``, ``padding`` ``(B, Tk)`` True at padding or None.
    None where declined (the torch ops run)."""
    if not ENABLED:
        return None
    tensors = (v, key_positions, query_positions, key_lengths)
    if torch.is_grad_enabled() and v.requires_grad:
        return None
    if not cpu_float32(*tensors) or not _readable(padding):
        return None  # another device or dtype, torch.func transforms, tracing subclasses
    rows, heads, tk, dim = v.shape
    batch, tq = query_positions.shape
    if batch != rows * key_group or key_positions.shape != (batch, tk):
        return None
    if key_lengths.shape != (batch, tq):
        return None
    if padding is not None and (padding.dtype != torch.bool or padding.shape != (batch, tk)):
        return None
    if v.stride(-1) != 1:
        v = v.contiguous()
    real = None if padding is None else (~padding).contiguous()
    key_positions, query_positions = key_positions.contiguous(), query_positions.contiguous()
    key_lengths = key_lengths.contiguous()
    out = v.new_empty(batch, heads, tq, dim)
    args = (
        view_of(out), view_of(v), key_positions.data_ptr(), query_positions.data_ptr(),
        key_lengths.data_ptr(), 0 if real is None else real.data_ptr(), heads, tq, tk, dim,
        key_group, ratio, -0.5 / std**2,
    )  # fmt: skip
    run_by_sentences(_gmm_step.fixed_gaussian_step, args, batch, None, TEAM)
    return out
