"""The kernels: each module here registers one or more kernels (and nothing else lives here).

Attention kernels (``kernels.register_kernel``, problem ``kernels.AttentionProblem``; the
dense reference after them), tried from the highest priority down:

- ``shared_source`` (40): beam search's cross-attention with one key row per sentence;
- ``flex`` (30): FlexAttention block masks for windows and Gaussian biases (CUDA);
- ``band`` (20): windows in O(T·w), in C on the CPU or in query blocks;
- ``gaussian_fold`` (20): Gaussian biases folded into two extra q/k dimensions for SDPA;
- ``sdpa`` (0): fused SDPA with a materialised mask.

Mixture kernels (``mixture.register_kernel``, problem ``mixture.MixtureProblem``; the torch
ops after them): ``gmm_c_step`` (30), ``gmm_c_raw`` (20), ``gmm_c_params`` (10), in
``gmm_mixture.py``.

Helpers, not kernels, in their own wings: ``native/`` (the C runtime: loading the optional
extensions, threads, and the torch wrappers of each C kernel; only kernels call it) and
``autograd/`` (hand-written backward passes in torch ops). No module under ``fast/`` imports a
method: what a kernel needs of a method is a typed field of its problem.

Every kernel must give the reference path's numbers (tests prove it) and decline, with a
reason, any problem it cannot compute exactly (docs/design.md, "Kernels").
"""

from localnmt.attention.fast import (  # noqa: F401  (registration side effects)
    band,
    flex,
    gaussian_fold,
    gmm_mixture,
    sdpa,
    shared_source,
)

#: The kernel modules, in the order above (tests check that each registers a kernel).
KERNEL_MODULES = ("shared_source", "flex", "band", "gaussian_fold", "sdpa", "gmm_mixture")
