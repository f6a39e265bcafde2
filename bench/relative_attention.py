"""The C kernel of relative positions against the dense path, one attention call: what
``MAX_KEYS`` in ``localnmt/attention/fast/relative.py`` rests on.

    python -m bench.relative_attention [--shapes 32x8x16x64 32x8x64x64] [--repeats 9]
    python -m bench.relative_attention --row yang2018/table-4/rel-pos/base [--lengths 16 32]

For each shape ``BxHxTxd`` (sentences, heads, length, head size; the second and fourth
sentences end in 3 tokens of padding, clipping distance 16) it times, A/B interleaved in one
process, the forward and backward of Shaw et al.'s attention (eqs. 3-5) on the head-split
views a layer hands over: the C kernel (``relative``, forced, so above ``MAX_KEYS`` too)
and the dense reference path (logits, bias, softmax, ``p @ v`` and the value term in torch
ops). Prints the median of the paired ratios dense time / C time (> 1: C is faster), with the
machine and its load. Run as a module (``bench`` sets ``OMP_WAIT_POLICY=PASSIVE`` before
torch loads; ``LOCALNMT_BENCH_OMP=torch`` keeps torch's own policy).

With ``--row``, a catalog row's whole training step instead (``bench.training_throughput``:
forward, label-smoothed cross-entropy, backward, Adam; ``--max-tokens`` tokens of sentences
of each length, base size), A/B interleaved with the fairseq baseline: the row with the C
kernel where it takes the call ("C") and with it switched off ("dense"), each as speed ÷
baseline (median of paired ratios).
"""

from __future__ import annotations

import argparse

import torch

from bench.machine_info import describe, machine_info
from bench.measure import interleaved, median_ratio, switched
from localnmt.attention import dispatch
from localnmt.attention.context import AttentionSite, RelativeTerms
from localnmt.attention.fast.native import c_relative
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


def row_steps(row_name: str, length: int, max_tokens: int, repeats: int) -> dict:
    """Seconds per training step of the baseline and of the row with the C kernel on and off."""
    from bench.gmm_training import model_size
    from bench.models import build_baseline, build_candidate, parse_model_args
    from bench.synthetic import batch_size_for, make_batch, make_dictionary
    from bench.training_throughput import Trainer
    from localnmt.catalog import all_rows

    row = next(r for r in all_rows() if r.name == row_name)
    dictionary = make_dictionary(32000)
    ns = parse_model_args(row.arch, row.args, model_size("base"))
    batch = make_batch(dictionary, batch_size_for(max_tokens, length), length)
    device = torch.device("cpu")
    torch.manual_seed(0)
    base = Trainer(build_baseline(ns, dictionary), device, torch.float32)
    cand = Trainer(build_candidate(ns, dictionary), device, torch.float32)

    def form(enabled: bool):
        def run() -> object:
            with switched([(c_relative, "ENABLED", c_relative.ENABLED and enabled)]):
                return cand.step(batch)

        return run

    fns = {"baseline": lambda: base.step(batch), "C": form(True), "dense": form(False)}
    return interleaved(fns, device, warmup=2, repeats=repeats)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--row", help="a catalog row: its training step, C kernel on and off")
    parser.add_argument("--lengths", nargs="+", type=int, default=[16, 32, 64])
    parser.add_argument("--max-tokens", type=int, default=1024)
    args = parser.parse_args(argv)
    print(describe(machine_info(torch.device("cpu"))))
    if args.row:
        print(f"{args.row}, base size, training step, {args.max_tokens} tokens; speed ÷ baseline:")
        for length in args.lengths:
            times = row_steps(args.row, length, args.max_tokens, args.repeats)
            base = times["baseline"]
            ratios = {name: median_ratio(base, times[name]) for name in ("C", "dense")}
            print(f"T={length}: C {ratios['C']:.3f}  dense {ratios['dense']:.3f}")
        load = load_average()
        print(f"load {load[0]:.2f}" if load else "")
        return
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
