"""Gaussian localness bias folded into two extra query/key dimensions (docs/design.md,
"Kernels"), so fused ``scaled_dot_product_attention`` runs without a float T×T bias.

Yang et al. (2018) eq. 5 expands to ``−(j−P)²/(2σ²) = a·j² + b·j + const`` (a = −1/(2σ²),
b = P/σ²); the constant cancels in softmax. With each sentence's key positions centred on
``c = max(j)/2`` (``j' = j − c``, ``b' = b + 2ac``)::

    q' = [q, a, b']        k' = [k, j'², j']        softmax(q'·k'ᵀ) = softmax(q·kᵀ + G)

Accuracy: float32 rounds the dot product with an absolute error of about ``ε·Σ|terms|``, here
``ε·(|a|·j'² + |b'|·|j'| + |q·k|)``. The kernel declines (returns None, the next kernel or the
dense reference runs) when ``|a|·max j'² + |b'|·max|j'|`` exceeds :data:`MAX_FOLD_MAGNITUDE`
(4096 ≈ 2¹²), which bounds the extra logit error near 2¹²·2⁻²⁴·(a few) ≈ 10⁻³ (relative
probability error ≤ 0.1 %); σ is never clamped, so an accepted problem has the reference's
numbers. That excludes only very narrow windows on long sentences (σ < ~0.4 at 50 tokens; the
paper's learned windows are several tokens wide). Float32 only: fp16/bf16 would lose the
quadratic terms entirely, so other dtypes decline.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from localnmt.attention.dispatch import Declined
from localnmt.attention.problem import AttentionProblem, masked_sdpa, register_kernel

#: Largest folded-term magnitude accepted (see the module docstring).
MAX_FOLD_MAGNITUDE = 4096.0


def fold(problem: AttentionProblem) -> tuple[Tensor, Tensor] | None:
    """``(q', k')`` with the quadratic biases folded in, or None when float32 would not be
    accurate enough."""
    a = sum(quad.a.float() for quad in problem.quadratic)
    b = sum(quad.b.float() for quad in problem.quadratic)
    j = problem.key_positions.float()  # (B, Tk)
    center = j.amax(dim=1, keepdim=True) / 2  # (B, 1)
    jc = j - center
    b = b + 2 * a * center[:, :, None]  # (B, H|1, Tq)
    reach = jc.abs().amax(dim=1)[:, None, None]  # (B, 1, 1)
    magnitude = (a.abs() * reach * reach + b.abs() * reach).amax()
    if float(magnitude.detach()) > MAX_FOLD_MAGNITUDE:
        return None
    bsz, heads, tq, _ = problem.q.shape
    tk = problem.k.size(2)
    a = a.expand(bsz, heads, tq).unsqueeze(-1)
    b = b.expand(bsz, heads, tq).unsqueeze(-1)
    q = torch.cat([problem.q, a, b], dim=-1)
    extra = torch.stack([jc * jc, jc], dim=-1)[:, None].expand(bsz, heads, tk, 2)
    k = torch.cat([problem.k, extra], dim=-1)
    return q, k


def check(problem: AttentionProblem) -> Iterator[str]:
    """Every reason the fold cannot take ``problem``."""
    if problem.dense_bias is not None or problem.relative is not None:
        yield "a dense bias"
    if problem.q.dtype != torch.float32:
        dtype = str(problem.q.dtype).removeprefix("torch.")
        yield f"{dtype} inputs (the folded terms need float32)"


def requires(problem: AttentionProblem) -> str | None:
    return None if problem.quadratic else "no Gaussian (quadratic) bias to fold"


@register_kernel("gaussian_fold", check=check, requires=requires)
def gaussian_fold_kernel(problem: AttentionProblem) -> Tensor | Declined:
    """SDPA on ``[q, a, b']·[k, j'², j']`` with the boolean restrictions as a mask."""
    folded = fold(problem)
    if folded is None:
        reason = f"folded terms larger than {MAX_FOLD_MAGNITUDE:g} (float32 would lose accuracy)"
        return Declined(reason)
    q, k = folded
    # fused SDPA kernels want one head size for q, k and v (torch's CPU flash kernel declines
    # 34 / 34 / 32 and the math fallback runs): v gets the two zero columns q' and k' got
    v = F.pad(problem.v, (0, q.size(-1) - problem.v.size(-1)))
    d = problem.v.size(-1)
    only_causal = (
        problem.causal
        and problem.key_padding_mask is None
        and problem.allowed is None
        and not problem.bands
        and q.size(2) == k.size(2)
    )
    if only_causal:
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=problem.dropout_p, is_causal=True, scale=1.0
        )
    else:
        out = masked_sdpa(q, k, v, problem.dense_allowed(), None, problem.dropout_p)
    return out[..., :d]


def benchmark(
    lengths: tuple[int, ...] = (64, 128, 256, 512), batch: int = 32, repeats: int = 7
) -> list[tuple[int, float]]:
    """Median time ratio fold / dense-bias SDPA, forward + backward of one localness attention
    layer (B=batch, H=8, d=64), A and B interleaved in one process. Prints and returns
    ``[(T, ratio)]``. Run with ``OMP_WAIT_POLICY=PASSIVE python -c "from
    localnmt.attention.fast.gaussian_fold import benchmark; benchmark()"``."""
    import statistics
    import time

    from localnmt.attention import AttentionSite, LocalAttention, dispatch
    from localnmt.attention.spec import build_modifiers, parse_spec

    site = AttentionSite("encoder_self", 0, num_layers=1, embed_dim=512, num_heads=8)
    torch.manual_seed(0)
    att = LocalAttention(
        512,
        8,
        site=site,
        modifiers=build_modifiers(parse_spec("localness"), site),
        self_attention=True,
    )

    def step(kernel: str, x: Tensor, mask: Tensor) -> float:
        with dispatch.forced_kernel(kernel):
            start = time.perf_counter()
            out, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
            out.sum().backward()
            return time.perf_counter() - start

    results = []
    for length in lengths:
        x = torch.randn(length, batch, 512, requires_grad=True)
        mask = torch.zeros(batch, length, dtype=torch.bool)
        mask[::2, : length // 4] = True  # half the batch left-padded

        step("gaussian_fold", x, mask)
        step("sdpa", x, mask)
        ratios = [step("gaussian_fold", x, mask) / step("sdpa", x, mask) for _ in range(repeats)]
        results.append((length, statistics.median(ratios)))
        print(f"T={length}: fold / dense-bias SDPA = {results[-1][1]:.2f}")
    return results
