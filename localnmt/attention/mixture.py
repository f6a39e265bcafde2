"""Gaussian mixture attention (Zhang & Feng 2021, eq. 6 and 13) as a typed problem for kernels.

GMM cross-attention (``methods/gmm.py``) predicts, per head, target token and component, a
mixture ``log ω − log Z``, ``μ``, ``σ`` (eq. 10-12) and a gate g (eq. 14) from its predictor
FFNs' raw outputs, then mixes ``β`` (eq. 6) into the softmax α (eq. 13)::

    β_ij = Σ_k ω_ik / Z_ik · exp(−(j − μ_ik)² / (2σ_ik²))        γ = (1 − g)·α + g·β

This module is what the method and its kernels share, so that neither imports the other: the
torch reference of eq. 6 (:func:`mixture_attention`), the columns of the raw outputs
(:class:`PredictorLayout`, which the C kernels read), and :class:`MixtureProblem`, the typed
question "γ (or g·β) for these outputs" that :func:`gated_mixture` hands to the registered
kernels (``fast/gmm_mixture.py``: C decoding step, C from the raw outputs, C from the
parameters), the torch ops being the reference path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from localnmt.attention.context import AttentionSite
from localnmt.attention.deferred import TensorSlot, stored
from localnmt.attention.dispatch import KernelRegistry
from localnmt.attention.problem import AttentionProblem, dense_probabilities, dropped_product

#: Lower clamp of the exponent of each mixture term (eq. 6): e^-87 ≈ 1.6e-38 is float32's
#: smallest normal number. torch's vectorised CPU exp takes a slow path below it: 115 µs for a
#: (32, 8, 1, 4, 32) decoding-step tensor with a third of its exponents there, 33 µs clamped
#: (one thread of the 2-core CPU, ``python -m bench.small_op_threads``). Such terms come with
#: concentrated components (small σ, long sources). A clamped term is e^-87 instead of
#: smaller: β moves by at most K·1.6e-38, and the backward (which recomputes the terms)
#: gives such a term a gradient of e^-87·z/σ instead of about 0.
EXP_FLOOR = -87.0

FUSIONS = ("gate", "average", "gmm")


@dataclass
class MixtureParams:
    """Per head, target token and component, ``(B, H, Tq, K)``: ``log ω − log Z``, ``μ``,
    ``σ``, and ``log ω`` (ω itself only for the analyses)."""

    log_scale: Tensor
    mu: Tensor
    sigma: Tensor
    log_omega: Tensor

    @property
    def omega(self) -> Tensor:
        return self.log_omega.exp()


class MixtureSum(torch.autograd.Function):
    """``Σ_k exp(s_k − z_k²/2)``, ``z_k = (j − μ_k)/σ_k``, that keeps only the ``(…, K)``
    parameters for backward and recomputes the ``(…, K, Tk)`` terms there (the plain autograd
    graph saves several of them: K times the attention map, per layer, for the whole step).

    Gradients, with ``t_kj`` the terms and ``g_j`` the incoming gradient::

        ∂/∂s_k = Σ_j g_j t_kj,   ∂/∂μ_k = Σ_j g_j t_kj z_kj / σ_k,
        ∂/∂σ_k = Σ_j g_j t_kj z_kj² / σ_k
    """

    @staticmethod
    def _terms(log_scale: Tensor, mu: Tensor, sigma: Tensor, j: Tensor) -> tuple[Tensor, Tensor]:
        z = (j - mu.unsqueeze(-1)).div_(sigma.unsqueeze(-1))  # (B, H, Tq, K, Tk)
        terms = torch.addcmul(log_scale.unsqueeze(-1), z, z, value=-0.5)
        return z, terms.clamp_(min=EXP_FLOOR).exp_()

    @staticmethod
    def sum_terms(log_scale: Tensor, mu: Tensor, sigma: Tensor, j: Tensor) -> Tensor:
        """The forward sum with one ``(…, K, Tk)`` temporary, overwritten in place."""
        z = (j - mu.unsqueeze(-1)).div_(sigma.unsqueeze(-1))
        terms = torch.addcmul(log_scale.unsqueeze(-1), z, z, value=-0.5, out=z)
        return terms.clamp_(min=EXP_FLOOR).exp_().sum(-2)

    @staticmethod
    def forward(ctx, log_scale: Tensor, mu: Tensor, sigma: Tensor, j: Tensor) -> Tensor:
        ctx.save_for_backward(log_scale, mu, sigma, j)
        return MixtureSum.sum_terms(log_scale, mu, sigma, j)

    @staticmethod
    def backward(ctx, grad: Tensor):
        log_scale, mu, sigma, j = ctx.saved_tensors
        z, t = MixtureSum._terms(log_scale, mu, sigma, j)
        t.mul_(grad.unsqueeze(-2))  # g_j t_kj; the Σ_j below as sums over the last axis
        d_scale = t.sum(dim=-1)  # (faster on CPU than K×Tk matrix-vector products)
        t.mul_(z)
        d_mu = t.sum(dim=-1).div_(sigma)
        t.mul_(z)
        d_sigma = t.sum(dim=-1).div_(sigma)
        return d_scale, d_mu, d_sigma, None


def mixture_attention(
    params: MixtureParams, positions: Tensor, real: Tensor | None, normalise: bool,
    length: Tensor | None = None, blocked: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """β of eq. 6 for all heads and components at once, ``(B, H, Tq, Tk)`` float32:
    ``Σ_k exp(log ω_k − log Z_k − z²/2)`` with ``z = (j − μ_k)/σ_k``.

    ``positions`` ``(B, Tk)``: j of each key, the real ones ``p, p+1, …, p+J−1``; ``real``
    ``(B, Tk)`` True at real keys (None: all real); ``blocked``: ``~real`` as ``(B, 1, 1,
    Tk)`` when the caller has it. Padded keys get β = 0. With ``normalise`` (``length`` =
    J, ``(B, 1, Tq, 1)``, required) each row is divided by its sum after a shift by its
    largest term (found in closed form: the real position nearest each μ_k), so the sum is
    at least 1 and cannot underflow to 0, as a softmax of log β."""
    j = positions[:, None, None, None, :].float()  # (B, 1, 1, 1, Tk)
    if blocked is None and real is not None:
        blocked = ~real[:, None, None, :]
    log_scale = params.log_scale
    if normalise:
        assert length is not None, "normalise needs the source length J"
        log_scale = log_scale - _largest_term(params, positions, real, length)
    args = (log_scale, params.mu, params.sigma, j)
    if torch.is_grad_enabled() and any(a.requires_grad for a in args[:3]):
        beta = MixtureSum.apply(*args)
    else:  # inference: the same sum, without the autograd Function's call overhead
        beta = MixtureSum.sum_terms(*args)
    if blocked is not None:  # β is a fresh tensor, and no backward reads it
        beta = beta.masked_fill_(blocked, 0.0)
    if normalise:
        beta = beta / beta.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(beta.dtype).tiny)
    return beta


def _largest_term(params: MixtureParams, positions: Tensor, real: Tensor | None,
                  length: Tensor) -> Tensor:  # fmt: skip
    """``max_kj (log ω_k − log Z_k − z_kj²/2)`` over the real keys, ``(B, H, Tq, 1)``, no
    gradient (a shift of a whole row cancels in the normalisation); 0 for a source with
    no real key."""
    with torch.no_grad():
        pos = positions.float()
        first = pos if real is None else pos.masked_fill(~real, math.inf)
        lo = first.amin(dim=-1)[:, None, None, None]  # j of the first real key
        hi = lo + length - 1
        nearest = torch.minimum(torch.maximum(torch.round(params.mu - lo) + lo, lo), hi)
        z = (nearest - params.mu) / params.sigma
        top = torch.addcmul(params.log_scale, z, z, value=-0.5).amax(dim=-1, keepdim=True)
        return torch.where(torch.isfinite(top), top, torch.zeros_like(top))


@dataclass(frozen=True)
class PredictorLayout:
    """Where each predictor's columns sit in the raw outputs (``PredictorBank.outputs``;
    -1: absent), with what the C kernels need of the options (variant ``approx``)."""

    k: int
    mu_col: int
    mu_n: int
    sigma_col: int
    sigma_n: int
    omega_col: int
    gate_col: int
    fusion: int  # index in FUSIONS
    sigma_min: float

    @classmethod
    def of(cls, names: tuple[str, ...], outs: tuple[int, ...], k: int, fusion: str,
           sigma_min: float) -> PredictorLayout:  # fmt: skip
        starts = dict(zip(names, (sum(outs[:i]) for i in range(len(outs)))))
        widths = dict(zip(names, outs))
        return cls(
            k=k,
            mu_col=starts["mu"],
            mu_n=widths["mu"],
            sigma_col=starts["sigma"],
            sigma_n=widths["sigma"],
            omega_col=starts.get("omega", -1),
            gate_col=starts.get("gate", -1),
            fusion=FUSIONS.index(fusion),
            sigma_min=sigma_min,
        )

    @property
    def fixed_gate(self) -> float:
        return 0.5 if FUSIONS[self.fusion] == "average" else 1.0


@dataclass(frozen=True)
class StepWeights:
    """The predictor bank's folded weights as :func:`attention_step` reads them (``hidden =
    sigmoid(q W1t + b1)``, ``raw = hidden W2^T + b2``; ``PredictorBank.step_weights``):
    ``w1t`` ``(d, n·d)``, ``b1`` ``(n·d,)``, ``w2`` ``(width, n·d)``, ``b2`` ``(width,)``, all
    contiguous."""

    w1t: Tensor
    b1: Tensor
    w2: Tensor
    b2: Tensor

    @property
    def hidden(self) -> int:
        return self.w1t.size(1)

    @property
    def width(self) -> int:
        return self.w2.size(0)

    def tensors(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return self.w1t, self.b1, self.w2, self.b2

    def fits(self, dim: int) -> bool:
        """Whether the weights take queries of ``dim`` features and are laid out as read."""
        n = self.hidden
        shapes = ((dim, n), (n,), (self.width, n), (self.width,))
        return all(t.shape == s and t.is_contiguous() for t, s in zip(self.tensors(), shapes))


#: ``raw outputs -> (mixture, gate)``: eq. 10-12 and 14 in torch ops (the method's own code).
ParametersFn = Callable[[Tensor], tuple[MixtureParams, "Tensor | float"]]


@dataclass
class MixtureProblem:
    """γ of eq. 13 ``(B, H, Tq, Tk)`` float32 from the raw predictor outputs, or ``g·β`` alone
    where ``probs`` is None (the term an affine post stage adds).

    ``outputs`` ``(B, H, Tq, C)``; ``positions`` j ``(B, Tk)``; ``real`` ``(B, Tk)`` True at
    real keys and ``blocked`` its complement ``(B, 1, 1, Tk)`` (None without padding);
    ``length`` J ``(B, 1, Tq or 1, 1)``; ``probs`` the softmax α; ``layout`` the columns of
    ``outputs`` for the C kernels (variant ``approx`` only, else None); ``parameters_fn`` eq.
    10-12 and 14 in torch ops, run at most once per problem (:meth:`parameters`)."""

    site: AttentionSite
    outputs: Tensor = TensorSlot()  # may hold a Deferred (a decoding step: the predictors in C)
    shape: tuple[int, ...]
    positions: Tensor
    real: Tensor | None
    blocked: Tensor | None
    length: Tensor
    parameters_fn: ParametersFn
    probs: Tensor | None = None
    fusion: str = "gate"
    normalise: bool = False
    layout: PredictorLayout | None = None
    decoding_step: bool = False
    _parameters: tuple[MixtureParams, Tensor | float] | None = field(default=None, repr=False)

    @property
    def alpha(self) -> Tensor | None:
        """α as eq. 13 mixes it (None for ``fusion=gmm``, γ = β, or without ``probs``)."""
        return None if self.fusion == "gmm" else self.probs

    def parameters(self) -> tuple[MixtureParams, Tensor | float]:
        """The mixture (eq. 10-12) and the gate (eq. 14), computed once."""
        if self._parameters is None:
            self._parameters = self.parameters_fn(self.outputs)
        return self._parameters

    def describe(self) -> str:
        batch, heads, tq, tk = self.shape
        step = ", decoding step" if self.decoding_step else ""
        given = stored(self, "outputs")  # a deferred one is not built for this
        dtype = str(given.dtype).removeprefix("torch.")
        return (
            f"{self.site.kind} layer {self.site.layer + 1}, B={batch} H={heads} Tq={tq} "
            f"Tk={tk}{step}, {dtype} on {self.positions.device.type}"
        )


def combine(beta: Tensor, gate: Tensor | float, alpha: Tensor | None) -> Tensor:
    """γ = lerp(α, β, g) of eq. 13, or g·β without α."""
    if alpha is None:
        return beta if isinstance(gate, float) and gate == 1.0 else beta * gate
    return torch.lerp(alpha, beta, gate)


def reference_mixture(problem: MixtureProblem) -> Tensor:
    """The reference path: eq. 10-12 and 14, then eq. 6 and 13, in torch ops."""
    params, gate = problem.parameters()
    beta = mixture_attention(
        params, problem.positions, problem.real, normalise=problem.normalise,
        length=problem.length, blocked=problem.blocked,
    )  # fmt: skip
    return combine(beta, gate, problem.alpha)


#: The kernels of eq. 6 and 13 (``fast/gmm_mixture.py``), the torch ops as the reference.
REGISTRY: KernelRegistry[MixtureProblem] = KernelRegistry(
    "gmm mixture",
    reference_name="gmm_torch",
    reference=reference_mixture,
    describe=MixtureProblem.describe,
)
register_kernel = REGISTRY.register


def gated_mixture(problem: MixtureProblem) -> Tensor:
    """γ (or g·β) from the first kernel that takes the problem, else the torch ops."""
    return REGISTRY.run(problem)


@dataclass
class MixtureStepProblem:
    """A decoding step of GMM cross-attention to the layer's output, where nothing needs the
    probabilities: ``attention`` (q, k, v, padding: the softmax α) and ``mixture`` (γ of eq.
    13 from the raw predictor outputs, without ``probs``). ``predictors``: the bank's folded
    weights, where ``mixture.outputs`` is a :class:`~localnmt.attention.deferred.Deferred` of
    the predictors on ``attention.q``: a kernel may compute them itself instead of building
    it."""

    attention: AttentionProblem
    mixture: MixtureProblem
    predictors: StepWeights | None = None

    def describe(self) -> str:
        return self.mixture.describe()


def reference_step(problem: MixtureStepProblem) -> Tensor:
    """The dense path: logits, softmax α, γ from the mixture kernels, ``γ @ V``."""

    def gamma(probs: Tensor) -> Tensor:
        return gated_mixture(replace(problem.mixture, probs=probs))

    probs, _ = dense_probabilities(problem.attention, gamma)
    return dropped_product(problem.attention, probs)[0]


#: Whole decoding steps (``fast/gmm_mixture.py``), the dense path as the reference.
STEP_REGISTRY: KernelRegistry[MixtureStepProblem] = KernelRegistry(
    "gmm step",
    reference_name="gmm_dense_step",
    reference=reference_step,
    describe=MixtureStepProblem.describe,
)
register_step_kernel = STEP_REGISTRY.register


def gmm_step_output(problem: MixtureStepProblem) -> Tensor:
    """A decoding step's output from the first kernel that takes it, else the dense path."""
    return STEP_REGISTRY.run(problem)
