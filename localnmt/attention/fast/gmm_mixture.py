"""Kernels of GMM cross-attention's mixture (Zhang & Feng 2021, eq. 6 and 10-14) in C.

Each takes a :class:`~localnmt.attention.mixture.MixtureProblem` and gives γ of eq. 13 (or
``g·β``), registered with the mixture registry (the torch ops of ``attention/mixture.py`` are
its reference path, ``gmm_torch``):

- ``gmm_c_step`` (30): a decoding step of variant ``approx`` without autograd: eq. 6 and 10-13
  in one C call (``fast/native/gmm_step.py``);
- ``gmm_c_raw`` (20): eq. 6 and 10-14 of variant ``approx`` from the raw predictor outputs,
  forward and backward in C (``fast/native/c_gmm_mixture.py``);
- ``gmm_c_params`` (10): eq. 6 and 13 from the mixture's parameters (computed by the torch
  ops), forward and backward in C: any variant whose β is not renormalised.

And in the step registry (``MixtureStepProblem``, the dense path as its reference),
``gmm_c_attention``: a whole decoding step (the logits, softmax, eq. 6 and 10-13 and ``γ @ V``)
in one C call, which :meth:`GaussianMixture.fused_output` offers the pipeline where nothing
needs the probabilities; where the problem brings the predictors' folded weights and its raw
outputs are not yet built, the same call computes them too (eq. 7-9 and 14, trace detail
"predictors in C").

All need the optional C extensions (built by ``setup.py``) and float32 CPU tensors.
"""

from __future__ import annotations

import torch
from torch import Tensor

from localnmt.attention.deferred import Deferred, stored
from localnmt.attention.dispatch import Declined, PreparedCall, note
from localnmt.attention.fast.native import c_gmm_mixture as c_mixture
from localnmt.attention.fast.native import gmm_step as c_step
from localnmt.attention.mixture import REGISTRY as MIXTURE_REGISTRY
from localnmt.attention.mixture import (
    MixtureProblem,
    MixtureStepProblem,
    register_kernel,
    register_step_kernel,
)

#: Switch for tests and benchmarks (False: ``gmm_c_attention`` reads the predictors' outputs
#: from torch's ``F.linear`` even where the problem brings their weights).
PREDICTORS_IN_C = True


def _float32_cpu(*tensors: Tensor | None) -> str | None:
    for t in tensors:
        if t is not None and (t.device.type != "cpu" or t.dtype != torch.float32):
            return f"{t.dtype} on {t.device.type} (C kernels: float32 on the CPU)"
    return None


def _step_check(problem: MixtureProblem) -> str | None:
    if not problem.decoding_step:
        return "not a decoding step"
    if problem.layout is None:
        return "variant is not approx (the C step computes eq. 10-12 of approx)"
    if problem.probs is None:
        return "no softmax α (an affine post stage's term)"
    if not c_step.ENABLED:
        return "localnmt._gmm_step is not built (or stale)"
    if problem.layout.k > c_step.MAX_K:
        return f"K = {problem.layout.k} > {c_step.MAX_K} components"
    needs_grad = problem.outputs.requires_grad or problem.probs.requires_grad
    if torch.is_grad_enabled() and needs_grad:
        return "needs gradients (the C step has no backward)"
    if problem.shape[2] != 1:
        return f"{problem.shape[2]} queries (the C step takes one)"
    return _float32_cpu(problem.outputs, problem.probs, problem.positions, problem.length)


@register_kernel("gmm_c_step", check=_step_check)
def gmm_c_step(problem: MixtureProblem) -> Tensor | Declined:
    """γ of one decoding step, eq. 6 and 10-13 in one C call."""
    assert problem.layout is not None and problem.probs is not None
    out = c_step.mixture_post(
        problem.layout, problem.outputs, problem.probs, problem.positions, problem.length,
        problem.real,
    )  # fmt: skip
    return Declined("inputs the C step does not take (shapes or memory)") if out is None else out


def _whole_step_check(problem: MixtureStepProblem) -> str | None:
    attention, mixture = problem.attention, problem.mixture
    if MIXTURE_REGISTRY.forced() is not None:
        return "a mixture kernel is forced (the dense path runs it)"
    if not mixture.decoding_step:
        return "not a decoding step"
    if mixture.layout is None:
        return "variant is not approx (the C step computes eq. 10-12 of approx)"
    if not c_step.ENABLED:
        return "localnmt._gmm_step is not built (or stale)"
    if attention.has_bias or attention.causal or attention.allowed is not None:
        return "a bias or a restriction beside padding"
    if attention.bands or attention.relative_values:
        return "a band or a relative value term"
    return None


def _prepared_whole_step(problem: MixtureStepProblem) -> PreparedCall | None:
    """:func:`gmm_c_attention` with the predictors in C, prepared for the later steps of the
    decoding run (``fast/native/gmm_step.py``: the source's and the weights' checks done once);
    None where the predictors' outputs are given or already built."""
    attention, mixture = problem.attention, problem.mixture
    given = stored(mixture, "outputs")
    if not (PREDICTORS_IN_C and problem.predictors is not None):
        return None
    if not isinstance(given, Deferred) or given.built:
        return None
    assert mixture.layout is not None
    step = c_step.prepare_step(
        mixture.layout, attention.q, attention.k, attention.key_group, mixture.positions,
        mixture.length, mixture.real, problem.predictors,
    )  # fmt: skip
    if step is None:
        return None

    def run(q: Tensor, k: Tensor, v: Tensor) -> Tensor | None:
        return step(q, k, v) if PREDICTORS_IN_C else None

    return run


@register_step_kernel("gmm_c_attention", check=_whole_step_check, prepare=_prepared_whole_step)
def gmm_c_attention(problem: MixtureStepProblem) -> Tensor | Declined:
    """The output of a decoding step: α from the logits, γ of eq. 13 and ``γ @ V`` in one C
    call (``fast/native/gmm_step.py``)."""
    attention, mixture = problem.attention, problem.mixture
    assert mixture.layout is not None
    given = stored(mixture, "outputs")
    fused = PREDICTORS_IN_C and problem.predictors is not None
    if fused and isinstance(given, Deferred) and not given.built:
        out = c_step.attention_step(
            mixture.layout, attention.q, attention.k, attention.v, attention.key_group, None,
            mixture.positions, mixture.length, mixture.real, problem.predictors,
        )  # fmt: skip
        if out is not None:
            note("predictors in C")
            return out
    out = c_step.attention_step(
        mixture.layout, attention.q, attention.k, attention.v, attention.key_group,
        mixture.outputs, mixture.positions, mixture.length, mixture.real,
    )  # fmt: skip
    if out is None:
        return Declined("inputs the C step does not take (dtype, shapes, memory or autograd)")
    return out


def _raw_check(problem: MixtureProblem) -> str | None:
    if problem.layout is None:
        return "variant is not approx (C computes eq. 10-12 of approx only)"
    if not c_mixture.ENABLED:
        return "localnmt._gmm_mixture is not built (or stale)"
    if problem.layout.k > c_mixture.MAX_K:
        return f"K = {problem.layout.k} > {c_mixture.MAX_K} components"
    return _float32_cpu(problem.outputs, problem.length, problem.positions, problem.alpha)


def _reference(problem: MixtureProblem):
    """Eq. 10-12 and 14 in torch ops for a differentiable backward (``create_graph``)."""

    def parameters(raw: Tensor) -> tuple:
        params, gate = problem.parameters_fn(raw)
        return params.log_scale, params.mu, params.sigma, gate

    return parameters


@register_kernel("gmm_c_raw", check=_raw_check)
def gmm_c_raw(problem: MixtureProblem) -> Tensor | Declined:
    """γ (or g·β) from the raw predictor outputs, eq. 6 and 10-14 in C."""
    assert problem.layout is not None
    out = c_mixture.approx_gated_mixture(
        problem.layout, problem.outputs, problem.length, problem.positions, problem.real,
        problem.shape, _reference(problem), problem.alpha,
    )  # fmt: skip
    return Declined("inputs the C mixture does not take (shapes or memory)") if out is None else out


def _params_check(problem: MixtureProblem) -> str | None:
    if problem.normalise:
        return "variant norm renormalises β (torch ops)"
    if not c_mixture.ENABLED:
        return "localnmt._gmm_mixture is not built (or stale)"
    # the parameters are float32 whatever the outputs' dtype (MixtureProblem.parameters)
    return _float32_cpu(problem.positions, problem.alpha)


@register_kernel("gmm_c_params", check=_params_check)
def gmm_c_params(problem: MixtureProblem) -> Tensor | Declined:
    """γ (or g·β) from the mixture's parameters (torch ops), eq. 6 and 13 in C."""
    params, gate = problem.parameters()
    out = c_mixture.gated_mixture(
        params.log_scale, params.mu, params.sigma, problem.positions, problem.real, gate,
        problem.alpha, problem.shape,
    )  # fmt: skip
    return Declined("inputs the C mixture does not take (dtype, shapes)") if out is None else out
