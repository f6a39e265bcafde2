"""Blocked band attention vs dense ``scaled_dot_product_attention``: one layer, fwd+bwd.

Both run interleaved in one process (docs/design.md: separate processes differ by 50 % on shared
CPUs), per length T: batch 32, 8 heads, head dim 64, window 11 (1D) and 3 heads × 11 (2D).
Reports median time ratios (band / dense; < 1 = band faster) and peak memory of one fwd+bwd
(tracemalloc does not see torch's allocator on CPU, so we use the torch profiler's memory
accounting). Writes JSON and markdown.

    OMP_WAIT_POLICY=PASSIVE python bench/band_attention.py [--quick] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from localnmt.attention.fast.band import band_attention  # noqa: E402
from localnmt.attention.fast.native import c_band as band_cpu  # noqa: E402
from localnmt.attention.methods.csan import expand_heads  # noqa: E402


def dense_step(q, k, v, window: int) -> None:
    """Dense SDPA, no mask (the baseline a windowed layer must beat)."""
    F.scaled_dot_product_attention(q, k, v).sum().backward()


def dense_band_step(q, k, v, window: int) -> None:
    """Dense SDPA with a boolean band mask (what the pipeline runs below the threshold)."""
    t = q.size(2)
    idx = torch.arange(t)
    rel = idx[None, :] - idx[:, None]
    mask = rel.abs() <= window // 2
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()


def dense_band2d_step(q, k, v, window: int) -> None:
    """Dense SDPA over the 3 heads' stacked keys with a band mask (2D-CSAN's fallback)."""
    t = q.size(2)
    idx = torch.arange(t)
    mask = ((idx[None, :] - idx[:, None]).abs() <= window // 2).repeat(1, 3)
    k3, v3 = expand_heads(k, 3), expand_heads(v, 3)
    F.scaled_dot_product_attention(q, k3, v3, attn_mask=mask).sum().backward()


def band_step(q, k, v, window: int) -> None:
    heads = q.size(1)
    half = torch.full((heads,), window // 2, dtype=torch.long)
    band_attention(q, k, v, half, half).sum().backward()


def band2d_step(q, k, v, window: int) -> None:
    """2D-CSAN as the pipeline runs it: neighbouring heads read in place (head-area layout)."""
    heads = q.size(1)
    half = torch.full((heads,), window // 2, dtype=torch.long)
    band_attention(q, k, v, half, half, area=1).sum().backward()


def blocked(step):
    """``step`` through the blocked kernels of fast/band.py (the C path switched off)."""

    def run(q, k, v, window: int) -> None:
        enabled = band_cpu.ENABLED
        band_cpu.ENABLED = False
        try:
            step(q, k, v, window)
        finally:
            band_cpu.ENABLED = enabled

    return run


#: band_1d / band_2d run as the pipeline runs them: the C kernel (fast/native/c_band.py) where it
#: is built, else the blocked kernels; the *_blocked steps always take the blocked kernels.
STEPS = {
    "dense": dense_step,
    "dense_band_mask": dense_band_step,
    "band_1d": band_step,
    "band_1d_blocked": blocked(band_step),
    "dense_band2d_mask": dense_band2d_step,
    "band_2d": band2d_step,
    "band_2d_blocked": blocked(band2d_step),
}


def inputs(t: int, batch: int, heads: int, dim: int):
    g = torch.Generator().manual_seed(t)
    return [
        (torch.randn(batch, heads, t, dim, generator=g) / dim**0.25).requires_grad_()
        for _ in range(3)
    ]


def peak_memory_mb(step, args, window: int) -> float:
    """Peak of torch's CPU allocations during one fwd+bwd, from the profiler's memory events."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(*args, window)
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    current = peak = 0
    for e in events:  # self usage: each (de)allocation counted once, at the op that made it
        current += e.self_cpu_memory_usage
        peak = max(peak, current)
    for a in args:
        a.grad = None
    return peak / 2**20


def run(lengths, batch, heads, dim, window, repeats) -> list[dict]:
    rows = []
    for t in lengths:
        b = batch if t <= 1024 else max(1, batch * 1024 // t)
        args = inputs(t, b, heads, dim)
        times: dict[str, list[float]] = {name: [] for name in STEPS}
        for step in STEPS.values():  # warm-up
            step(*args, window)
        for _ in range(repeats):
            for name, step in STEPS.items():  # interleaved
                for a in args:
                    a.grad = None
                start = time.perf_counter()
                step(*args, window)
                times[name].append(time.perf_counter() - start)
        med = {name: statistics.median(v) for name, v in times.items()}
        row = {"T": t, "batch": b, "dense_ms": med["dense"] * 1e3}
        for name in STEPS:
            if name != "dense":
                row[f"{name}_ratio"] = med[name] / med["dense"]
        for name in ("dense", "band_1d", "band_2d"):
            row[f"{name}_peak_mb"] = peak_memory_mb(STEPS[name], args, window)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def run_meta(machine: str, heads: int, dim: int, window: int, repeats: int) -> dict:
    """What :func:`markdown` states about a run besides its rows."""
    return {
        "machine": machine,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "heads": heads,
        "dim": dim,
        "window": window,
        "repeats": repeats,
        "band_path": "C kernel (fast/native/c_band.py)"
        if band_cpu.ENABLED
        else "blocked kernels (the C extension is not built)",
    }


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"Band attention vs dense SDPA, fwd+bwd, {meta['machine']}, torch {meta['torch']}, "
        f"{meta['threads']} threads, heads {meta['heads']}, head dim {meta['dim']}, "
        f"window {meta['window']}; time ratio = method / dense (median of {meta['repeats']}, "
        f"interleaved; < 1 is faster). Band 1D / 2D: {meta['band_path']}; blocked: the blocked "
        "kernels.",
        "",
        "| T | batch | dense ms | SDPA+band mask | band 1D | blocked | SDPA 3T+2D mask "
        "| band 2D (3×11) | blocked | peak MB dense | band 1D | band 2D |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['T']} | {r['batch']} | {r['dense_ms']:.1f} | {r['dense_band_mask_ratio']:.2f} "
            f"| {r['band_1d_ratio']:.2f} | {r['band_1d_blocked_ratio']:.2f} "
            f"| {r['dense_band2d_mask_ratio']:.2f} | {r['band_2d_ratio']:.2f} "
            f"| {r['band_2d_blocked_ratio']:.2f} | {r['dense_peak_mb']:.0f} "
            f"| {r['band_1d_peak_mb']:.0f} | {r['band_2d_peak_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="T ≤ 512, batch 4, 3 repeats")
    parser.add_argument("--lengths", type=int, nargs="*")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=11)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--machine", default="2-core CPU, shared with other jobs (noisy)")
    args = parser.parse_args()
    full = [64, 128, 256, 512, 1024, 2048]
    lengths = args.lengths or (full[:4] if args.quick else full)
    batch, repeats = (4, 3) if args.quick else (args.batch, args.repeats)
    rows = run(lengths, batch, args.heads, args.dim, args.window, repeats)
    meta = run_meta(args.machine, args.heads, args.dim, args.window, repeats)
    meta["note"] = "T=2048 uses batch 16 (32·1024/T) to fit the dense baseline in memory"
    args.out.mkdir(parents=True, exist_ok=True)
    result = json.dumps({"meta": meta, "rows": rows}, indent=1)
    (args.out / "band_attention.json").write_text(result)
    (args.out / "band_attention.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
