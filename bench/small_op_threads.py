"""Small CPU ops on one thread vs all: what ``localnmt/attention/threads.py`` rests on.

    python -m bench.small_op_threads [--batch 32] [--keys 32] [--repeats 5]

Times, interleaved in one process, the ops of a decoding step (B·beam = ``--batch``
hypotheses, 8 heads, ``--keys`` source tokens, K = 4 GMM components) with torch's thread
count as it is and with one thread: softmax, the mixture's ``exp`` (and with a third of its
exponents below -87, raw and clamped as gmm.py does), the GMM predictors'
hidden GEMM and output GEMM (13 columns and padded to 16), and a projection and an FFN layer
(512×512, 512×2048). Then tanh against sigmoid on the GMM predictors' hidden layer of a
training batch, and one incremental GMM cross-attention step (512-dim, 8 heads) with the
one-thread rule on and off.
Median µs per call; the machine and its load. Run as a module (``bench`` sets
``OMP_WAIT_POLICY=PASSIVE`` before torch loads).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from bench.machine_info import describe, machine_info
from localnmt.attention import threads
from localnmt.machine import load_average


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    for _ in range(10):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def op_table(batch: int, keys: int, repeats: int, calls: int) -> list[tuple[str, float, float]]:
    """``(op, µs on all threads, µs on one)`` per op."""
    torch.manual_seed(0)
    heads, dim = 8, 64
    rows = batch * heads
    logits, terms = torch.randn(batch, heads, 1, keys), torch.randn(batch, heads, 1, 4, keys)
    far = terms.clone()
    far[..., : keys // 3] = -200.0  # terms of a concentrated component far from its mean
    q, hidden, x = torch.randn(rows, dim), torch.randn(rows, 4 * dim), torch.randn(batch, 512)
    w_hidden, w_proj = torch.randn(4 * dim, dim), torch.randn(512, 512)
    w_ffn = torch.randn(2048, 512)
    w13, w16 = torch.randn(13, 4 * dim), torch.randn(16, 4 * dim)
    ops: dict[str, Callable[[], object]] = {
        f"softmax ({batch}, {heads}, 1, {keys})": lambda: logits.softmax(-1),
        f"exp ({batch}, {heads}, 1, 4, {keys})": lambda: terms.exp(),
        f"exp, a third of the exponents < -87 ({batch}, {heads}, 1, 4, {keys})": far.exp,
        "  the same clamped at -87 first (gmm.EXP_FLOOR)": lambda: far.clamp(min=-87.0).exp_(),
        f"GEMM ({rows}, {dim})·({dim}, {4 * dim})": lambda: F.linear(q, w_hidden),
        f"GEMM ({rows}, {4 * dim})·({4 * dim}, 13)": lambda: F.linear(hidden, w13),
        f"GEMM ({rows}, {4 * dim})·({4 * dim}, 16)": lambda: F.linear(hidden, w16),
        f"GEMM ({batch}, 512)·(512, 512)": lambda: F.linear(x, w_proj),
        f"GEMM ({batch}, 512)·(512, 2048)": lambda: F.linear(x, w_ffn),
    }
    threads_all = torch.get_num_threads()
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in ops}
    for _ in range(repeats):
        for name, fn in ops.items():
            for slot, count in ((0, threads_all), (1, 1)):
                torch.set_num_threads(count)
                times[name][slot].append(per_call_us(fn, calls))
    torch.set_num_threads(threads_all)
    return [(n, statistics.median(a), statistics.median(b)) for n, (a, b) in times.items()]


def gmm_step(batch: int, keys: int, repeats: int, calls: int) -> tuple[float, float]:
    """µs per incremental GMM cross-attention step with the one-thread rule on and off."""
    from localnmt.attention import AttentionSite, LocalAttention
    from localnmt.attention.spec import build_modifiers, parse_spec

    torch.manual_seed(0)
    site = AttentionSite("cross", 0, 1, 512, 8)
    attn = LocalAttention(512, 8, site=site, modifiers=build_modifiers(parse_spec("gmm"), site),
                          encoder_decoder_attention=True).eval()  # fmt: skip
    src, query = torch.randn(keys, batch, 512), torch.randn(1, batch, 512)
    pad = torch.zeros(batch, keys, dtype=torch.bool)
    pad[::3, :3] = True  # left padding in every third sentence
    state: dict = {}
    enabled, before = threads.OPENMP, threads.ENABLED  # the rule itself, whatever the policy

    def step() -> None:
        attn(query, src, src, key_padding_mask=pad, incremental_state=state, static_kv=True)

    on, off = [], []
    with torch.no_grad():
        for _ in range(repeats):
            for switch, out in ((True, on), (False, off)):
                threads.ENABLED = enabled and switch
                out.append(per_call_us(step, calls))
    threads.ENABLED = before
    return statistics.median(on), statistics.median(off)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--batch", type=int, default=32, help="hypotheses (sentences × beam)")
    p.add_argument("--keys", type=int, default=32, help="source tokens")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--calls", type=int, default=200, help="calls per timing")
    args = p.parse_args(argv)
    print(describe(machine_info(torch.device("cpu"))), flush=True)
    if not threads.OPENMP:
        print("note: torch's CPU backend is not OpenMP: the one-thread rule is off", flush=True)
    elif not threads.ENABLED:
        print("note: OpenMP's idle threads spin here (torch's policy): localnmt leaves the "
              "one-thread rule off; the GMM step below times it anyway", flush=True)  # fmt: skip
    print(f"\n| op | µs, {torch.get_num_threads()} threads | µs, 1 thread |\n|---|---|---|")
    for name, all_threads, one in op_table(args.batch, args.keys, args.repeats, args.calls):
        print(f"| {name} | {all_threads:.1f} | {one:.1f} |", flush=True)
    hidden = torch.randn(8192, 256)  # the predictors' hidden layer of a 1024-token batch
    tanh, sigmoid = (
        statistics.median(per_call_us(fn, 20) for _ in range(args.repeats))
        for fn in (hidden.tanh, hidden.sigmoid)
    )
    print(f"\nGMM predictors' activation on (8192, 256): tanh {tanh:.0f} µs, "
          f"sigmoid {sigmoid:.0f} µs (gmm.py folds tanh into a sigmoid)")  # fmt: skip
    on, off = gmm_step(args.batch, args.keys, args.repeats, args.calls)
    print(f"\nGMM cross-attention decoding step: {on:.0f} µs with the one-thread rule, "
          f"{off:.0f} µs without ({off / on:.2f}×)")  # fmt: skip
    load = load_average()
    print(f"load {load[0]:.1f} at the end" if load else "load unknown")


if __name__ == "__main__":
    main()
