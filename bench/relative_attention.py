"""The C kernel of relative positions against the dense path, one attention call: what
``MAX_KEYS`` in ``localnmt/attention/fast/relative.py`` rests on.

    python -m bench.relative_attention [--shapes 32x8x16x64 32x8x64x64] [--repeats 9]

For each shape ``BxHxTxd`` (sentences, heads, length, head size; the second and fourth
sentences end in 3 tokens of padding, clipping distance 16) it times, A/B interleaved in one
process, the forward and backward of Shaw et al.'s attention (eqs. 3-5) on the head-split
views a layer hands over: the C kernel (``relative``, forced, so above ``MAX_KEYS`` too)
and the dense reference path (logits, bias, softmax, ``p @ v`` and the value term in torch
ops). Prints the median of the paired ratios dense time / C time (> 1: C is faster), with the
machine and its load. Run as a module (``bench`` sets ``OMP_WAIT_POLICY=PASSIVE`` before
torch loads; ``LOCALNMT_BENCH_OMP=torch`` keeps torch's own policy).
"""

from __future__ import annotations

import argparse

import torch

from bench.machine_info import describe, machine_info
from bench.measure import interleaved, median_ratio
from localnmt.attention import dispatch
from localnmt.attention.context import AttentionSite, RelativeTerms
from localnmt.attention.fast.relative import MAX_KEYS
from localnmt.attention.problem import AttentionProblem, fast_attention
from localnmt.machine import load_average

SHAPES = ["16x4x30x32", "16x4x30x128", "32x8x16x64", "32x8x32x64", "32x8x64x64", "16x8x128x64"]


def attention_call(bsz: int, heads: int, length: int, dim: int, kernel: str):
    """A function running one forward and backward of the call with ``kernel`` forced."""
    gen = torch.Generator().manual_seed(0)

    def split(t: torch.Tensor) -> torch.Tensor:  # (B, T, H·d) projections as (B, H, T, d)
        return t.view(bsz, length, heads, dim).transpose(1, 2).requires_grad_()

    q, k, v = (split(torch.randn(bsz, length, heads * dim, generator=gen)) for _ in range(3))
    tables = [torch.randn(33, dim, generator=gen).requires_grad_() for _ in range(2)]
    pos = torch.arange(length)
    buckets = (pos[None, :] - pos[:, None]).clamp(-16, 16) + 16
    padding = torch.zeros(bsz, length, dtype=torch.bool)
    padding[1::2, -3:] = True
    terms = RelativeTerms(*tables, buckets.expand(bsz, 1, length, length))
    site = AttentionSite("encoder_self", 0, 1, heads * dim, heads)

    def run() -> None:
        problem = AttentionProblem(site=site, q=q, k=k, v=v, key_padding_mask=padding,
                                   relative=terms, relative_values=True)  # fmt: skip
        with dispatch.forced_kernel(kernel):
            out = fast_attention(problem)
        out.sum().backward()

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    print(describe(machine_info(torch.device("cpu"))))
    print(f"MAX_KEYS = {MAX_KEYS}; dense time / C time, forward and backward of one call:")
    for shape in args.shapes:
        bsz, heads, length, dim = (int(x) for x in shape.split("x"))
        kernels = ("relative", "dense")
        fns = {name: attention_call(bsz, heads, length, dim, name) for name in kernels}
        times = interleaved(fns, torch.device("cpu"), warmup=2, repeats=args.repeats)
        ms = {name: 1e3 * sorted(t)[len(t) // 2] for name, t in times.items()}
        ratio = median_ratio(times["dense"], times["relative"])
        print(f"B={bsz} H={heads} T={length} d={dim}: {ratio:.2f}  "
              f"(C {ms['relative']:.2f} ms, dense {ms['dense']:.2f} ms)")  # fmt: skip
    load = load_average()
    print(f"load {load[0]:.2f}" if load else "")


if __name__ == "__main__":
    main()
