"""The kernels: each module here registers one or more kernels (and nothing else lives here),
and the one table of the order in which each registry tries them.

Attention kernels (``problem.register_kernel``, problem ``problem.AttentionProblem``; the dense
reference after them) and mixture kernels (``mixture.register_kernel``, problem
``mixture.MixtureProblem``, in ``gmm_mixture.py``; the torch ops after them) and whole GMM
decoding steps (``mixture.register_step_kernel``, problem ``mixture.MixtureStepProblem``; the
dense path after) and the hard-coded Gaussian's decoding steps (``fixed_gaussian.register_kernel``,
problem ``fixed_gaussian.FixedGaussianProblem``; the torch ops after): see
:data:`ATTENTION_ORDER`, :data:`MIXTURE_ORDER`, :data:`STEP_ORDER` and
:data:`FIXED_GAUSSIAN_ORDER`. The first kernel whose check finds no reason
to decline runs; the order is set here, never by the order of imports.

Helpers, not kernels, in their own wings: ``native/`` (the C runtime: loading the optional
extensions, threads, and the torch wrappers of each C kernel; only kernels call it) and
``autograd/`` (hand-written backward passes in torch ops). No module under ``fast/`` imports a
method: what a kernel needs of a method is a typed field of its problem.

Every kernel must give the reference path's numbers (tests prove it) and decline, with its
reasons, any problem it cannot compute exactly (docs/design.md, "Kernels").
"""

from localnmt.attention import fixed_gaussian, mixture, problem
from localnmt.attention.fast import (  # noqa: F401  (each registers its kernels)
    band,
    fixed_gaussian_step,
    flex,
    gaussian_fold,
    gmm_mixture,
    relative,
    sdpa,
    shared_source_sdpa,
)

#: The attention kernels, first tried first (``AttentionProblem``; the dense reference after).
ATTENTION_ORDER = (
    "shared_source",  # beam search's grouped source keys (all others decline them)
    "flex",  # FlexAttention block masks for windows and Gaussians (CUDA)
    "band",  # windows in O(T·w): C on the CPU, query blocks elsewhere (no bias)
    "gaussian_fold",  # Gaussian biases as two extra q/k dimensions for SDPA (band takes none)
    "relative",  # relative position terms (Shaw et al.) inside the loops: C on the CPU
    "sdpa",  # fused SDPA with a materialised mask: takes almost anything
)
#: The mixture kernels of GMM cross-attention (``MixtureProblem``; the torch ops after).
MIXTURE_ORDER = (
    "gmm_c_step",  # a decoding step of variant approx in one C call
    "gmm_c_raw",  # eq. 6 and 10-14 of approx from the raw outputs, forward and backward in C
    "gmm_c_params",  # eq. 6 and 13 from the parameters in C
)
#: Whole decoding steps of GMM cross-attention (``MixtureStepProblem``; the dense path after).
STEP_ORDER = ("gmm_c_attention",)  # logits, softmax, eq. 6 and 10-13, γ @ V in one C call
#: Decoding steps of the hard-coded Gaussian (``FixedGaussianProblem``; the torch ops after).
FIXED_GAUSSIAN_ORDER = ("fixed_gaussian_c",)  # its distribution and p @ V in one C call
problem.REGISTRY.arrange(ATTENTION_ORDER)
mixture.REGISTRY.arrange(MIXTURE_ORDER)
mixture.STEP_REGISTRY.arrange(STEP_ORDER)
fixed_gaussian.REGISTRY.arrange(FIXED_GAUSSIAN_ORDER)

#: The kernel modules (tests check that each registers a kernel).
KERNEL_MODULES = (
    "shared_source_sdpa",
    "flex",
    "band",
    "gaussian_fold",
    "relative",
    "sdpa",
    "gmm_mixture",
    "fixed_gaussian_step",
)
