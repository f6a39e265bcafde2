"""Kernel ``relative``: attention with Shaw et al.'s relative position terms on the CPU, in C
(``native/c_relative.py``): the bias ``q_i·a^K_ij`` and the value term ``Σ_j α_ij a^V_ij``
are added inside the kernel's loops, so neither the ``(Tq, Tk)`` logits nor the
probabilities are materialised, and one call replaces the dense path's dozen small ops
forward and backward.

It takes only problems with relative value terms (``AttentionProblem.relative_values``): the
call's one value term is the relative one, and every other restriction is padding or the
causal triangle. Elsewhere the dense reference runs, as before.

It takes up to :data:`MAX_KEYS` keys per query: its loops visit each (query, key) pair with
vector code of its own, where the dense path runs matrix products whose cost per pair is
lower once there are enough pairs to amortise its dozen calls. ``python -m
bench.relative_attention`` measures both (bench/README.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from localnmt.attention import dispatch
from localnmt.attention.deferred import stored_shape
from localnmt.attention.fast.native import c_relative
from localnmt.attention.problem import AttentionProblem, Declined, is_forced, register_kernel
from localnmt.attention.threads import threads_sleep

#: Most keys per query the kernel takes unless forced. One call forward and backward (B = 32,
#: H = 8, d = 64; 2-core CPU, torch's OpenMP policy, ``python -m bench.relative_attention``):
#: dense time / C time 2.20 at Tk = 16, 1.11 at 32, 0.72 at 64 (0.55 at 128 with B = 16).
#: Where OpenMP's idle threads sleep (``OMP_WAIT_POLICY=PASSIVE``) each of the dense path's
#: ops wakes them, and the same shapes gave 16.1, 5.8, 1.9 and 0.82: 64 keys there.
MAX_KEYS = 64 if threads_sleep() else 32


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason the C kernel cannot take ``problem``."""
    if not c_relative.ENABLED:
        yield "the C extension localnmt._relative is not built"
    if problem.q.device.type != "cpu":
        yield "CPU only"
    if problem.q.dtype != torch.float32:
        yield f"{str(problem.q.dtype).removeprefix('torch.')} inputs (C runs float32)"
    if problem.dropout_p > 0:
        yield "attention dropout"
    if problem.allowed is not None or problem.bands:
        yield "restrictions other than padding and the causal triangle"
    if problem.dense_bias is not None or problem.quadratic:
        yield "another bias beside the relative one"
    if problem.stacked_groups != 1 or problem.head_area is not None:
        yield "stacked key groups"
    tk = stored_shape(problem, "k")[2]
    if problem.causal and problem.q.size(2) > tk:
        yield "more queries than keys under the causal triangle"
    if tk > MAX_KEYS and not is_forced("relative"):
        yield f"Tk = {tk} > {MAX_KEYS}, where the dense path's matrix products are faster"


def requires(problem: AttentionProblem) -> str | None:
    if problem.relative_values and problem.relative is not None:
        return None
    return "no relative value term (the other kernels take the problem)"


@register_kernel("relative", check=check, relative_values=True, requires=requires)
def relative_kernel(problem: AttentionProblem) -> Tensor | Declined:
    """Shaw et al.'s eqs. 3-5 in one C call forward and one backward."""
    terms = problem.relative
    assert terms is not None
    out = c_relative.c_relative_attention(
        problem.q, problem.k, problem.v, terms.key_table, terms.value_table, terms.buckets,
        problem.key_padding_mask, problem.causal,
    )  # fmt: skip
    if out is None:
        return Declined("tensors the C kernel does not take (torch.func, a subclass)")
    dispatch.note("C")
    return out
