"""What the CPU band kernel's chunk size rests on (``localnmt/attention/fast/band.py``).

    python -m bench.band_chunks [--length 512] [--chunk-mib 8 16 32 48] [--repeats 7]

1. Fresh against reused memory: zero-filling a newly allocated tensor of ``--alloc-mb`` MB
   against zero-filling one that is kept (glibc maps allocations over 32 MiB anew, so a fresh
   one is new pages on every call).
2. For each ``CHUNK_BYTES`` of ``--chunk-mib``, interleaved in one process, with the C path
   (``fast/native/c_band.py``) switched off, since the chunks are the blocked kernels': the band
   kernel alone (1D window 11, 2D 3 heads × 11; fwd+bwd ÷ dense SDPA without mask) and a whole
   csan_1d / csan_2d ``LocalAttention`` layer (fwd+bwd ÷ the plain layer, and peak memory),
   B = ``--batch``, 8 heads, d = 64, left padding for the layers.

Median of ``--repeats``; the machine and its load. Run as a module (``bench`` sets
``OMP_WAIT_POLICY=PASSIVE`` before torch loads).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from bench import band_attention
from bench.attention_layer import MethodEntry, build_layer, fwd_bwd, make_inputs
from bench.machine_info import describe, machine_info
from bench.measure import peak_memory
from localnmt.attention.fast.autograd import band_windows
from localnmt.attention.fast.native import c_band as band_cpu
from localnmt.machine import load_average


def fresh_and_reused_ms(megabytes: int, repeats: int) -> tuple[float, float]:
    """Median ms to zero-fill a new ``megabytes`` tensor, and one that is kept."""
    n = megabytes * 2**20 // 4
    kept = torch.zeros(n)
    fresh, reused = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.zeros(n)
        fresh.append(time.perf_counter() - start)
        start = time.perf_counter()
        kept.zero_()
        reused.append(time.perf_counter() - start)
    return statistics.median(fresh) * 1e3, statistics.median(reused) * 1e3


def chunk_sweep(length: int, batch: int, sizes: list[int], repeats: int) -> list[dict]:
    """Per chunk size (MiB): kernel and layer time ratios and layer peak memory."""
    heads, dim, window = 8, 64, 11
    q, k, v = band_attention.inputs(length, batch, heads, dim)
    layers = {
        name: fwd_bwd(
            build_layer(MethodEntry("encoder_self", name), heads * dim, heads, 2 * length),
            make_inputs("encoder_self", batch, length, heads * dim, "cpu", torch.float32),
        )
        for name in ("plain", "csan_1d", "csan_2d")
    }
    steps: dict[str, Callable[[], None]] = {
        "dense": lambda: band_attention.dense_step(q, k, v, window),
        "plain": layers["plain"],
    }

    def sized(mib: int, step: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            band_windows.CHUNK_BYTES = mib << 20
            step()

        return run

    for mib in sizes:
        steps[f"band_1d/{mib}"] = sized(mib, lambda: band_attention.band_step(q, k, v, window))
        steps[f"band_2d/{mib}"] = sized(mib, lambda: band_attention.band2d_step(q, k, v, window))
        steps[f"csan_1d/{mib}"] = sized(mib, layers["csan_1d"])
        steps[f"csan_2d/{mib}"] = sized(mib, layers["csan_2d"])
    default, c_path = band_windows.CHUNK_BYTES, band_cpu.ENABLED
    band_cpu.ENABLED = False  # the chunks are the blocked kernels' (native/c_band.py runs first)
    times: dict[str, list[float]] = {name: [] for name in steps}
    try:
        for step in steps.values():  # warm-up
            step()
        for _ in range(repeats):
            for name, step in steps.items():
                for x in (q, k, v):
                    x.grad = None
                start = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - start)
        med = {name: statistics.median(t) for name, t in times.items()}
        rows = []
        for mib in sizes:
            band_windows.CHUNK_BYTES = mib << 20
            rows.append({
                "chunk_mib": mib,
                "band_1d_ratio": med[f"band_1d/{mib}"] / med["dense"],
                "band_2d_ratio": med[f"band_2d/{mib}"] / med["dense"],
                "csan_1d_ratio": med[f"csan_1d/{mib}"] / med["plain"],
                "csan_2d_ratio": med[f"csan_2d/{mib}"] / med["plain"],
                "csan_1d_peak_mib": peak_memory(layers["csan_1d"], torch.device("cpu")) / 2**20,
                "csan_2d_peak_mib": peak_memory(layers["csan_2d"], torch.device("cpu")) / 2**20,
            })  # fmt: skip
        plain_peak = peak_memory(layers["plain"], torch.device("cpu")) / 2**20
    finally:
        band_windows.CHUNK_BYTES, band_cpu.ENABLED = default, c_path
    for row in rows:
        row.update(dense_ms=med["dense"] * 1e3, plain_ms=med["plain"] * 1e3,
                   plain_peak_mib=plain_peak)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--chunk-mib", type=int, nargs="+", default=[8, 16, 32, 48])
    p.add_argument("--alloc-mb", type=int, default=128)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    print(describe(machine_info(torch.device("cpu"))), flush=True)
    fresh, reused = fresh_and_reused_ms(args.alloc_mb, args.repeats)
    print(f"\nzero-fill {args.alloc_mb} MiB: fresh tensor {fresh:.1f} ms, "
          f"kept tensor {reused:.1f} ms")  # fmt: skip
    rows = chunk_sweep(args.length, args.batch, args.chunk_mib, args.repeats)
    first = rows[0]
    print(f"\nT = {args.length}, B = {args.batch}: dense SDPA {first['dense_ms']:.0f} ms, plain "
          f"layer {first['plain_ms']:.0f} ms, peak {first['plain_peak_mib']:.0f} MiB")  # fmt: skip
    print("\n| chunk MiB | band 1D ÷ dense | band 2D ÷ dense | csan_1d layer ÷ plain "
          "| csan_2d layer ÷ plain | csan_1d peak MiB | csan_2d peak MiB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['chunk_mib']} | {r['band_1d_ratio']:.2f} | {r['band_2d_ratio']:.2f} "
              f"| {r['csan_1d_ratio']:.2f} | {r['csan_2d_ratio']:.2f} "
              f"| {r['csan_1d_peak_mib']:.0f} | {r['csan_2d_peak_mib']:.0f} |")  # fmt: skip
    load = load_average()
    print(f"\nload {load[0]:.1f} at the end" if load else "\nload unknown")


if __name__ == "__main__":
    main()
