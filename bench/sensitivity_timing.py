"""Sensitivity analysis (Pande et al. §3.1): time of one layer's β = ‖∂Y_i/∂X_j‖_F by method.

    python -m bench.sensitivity_timing [--lengths 10 25 40 60] [--dim 512] [--heads 8] [--spec SPEC]

Reference (whole Jacobian), chunked (batched vector–Jacobian products) and structured (closed
form, the default of ``localnmt.analysis.sensitivity``) are timed interleaved in one process on
random weights with non-zero biases; medians, the largest relative difference to chunked, and
the machine with its load. The reference runs only up to ``--reference-max`` (it holds the
whole T²C² Jacobian) and chunked up to ``--chunked-max``; structured runs at every length.
The peak RSS printed at the end is the process's, over every method and length: run one
method at one length (``--reference-max 0 --lengths 40``) to read one method's peak.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch

from bench.machine_info import describe, machine_info
from localnmt.analysis import sensitivity
from localnmt.attention import LocalAttention
from localnmt.attention.context import AttentionSite
from localnmt.attention.spec import build_modifiers, parse_spec
from localnmt.machine import load_average


def layer(dim: int, heads: int, spec: str) -> LocalAttention:
    """One encoder self-attention in eval mode, weights perturbed so biases are non-zero."""
    torch.manual_seed(0)
    site = AttentionSite("encoder_self", 0, 1, dim, heads)
    modifiers = build_modifiers(parse_spec(spec), site) if spec else None
    attn = LocalAttention(dim, heads, site=site, modifiers=modifiers, self_attention=True).eval()
    with torch.no_grad():
        for param in attn.parameters():
            param.add_(0.02 * torch.randn_like(param))
    return attn


def main(argv: list[str] | None = None) -> None:
    """Print one line per length: median seconds per method, speed-ups, agreement."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[10, 25, 40, 60, 100, 200, 398])
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--spec", default="", help="encoder attention spec, e.g. local_heads[...]")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reference-max", type=int, default=10)
    p.add_argument("--chunked-max", type=int, default=25)
    p.add_argument(
        "--memory-mb",
        type=int,
        default=sensitivity.MEMORY_MB,
        help="chunk budget of the chunked and structured methods (MiB)",
    )
    args = p.parse_args(argv)
    print(describe(machine_info(torch.device("cpu"))), flush=True)
    attn = layer(args.dim, args.heads, args.spec)
    for t in args.lengths:
        methods = [m for m, limit in (("reference", args.reference_max),
                                      ("chunked", args.chunked_max)) if t <= limit]  # fmt: skip
        x = torch.randn(t, 1, args.dim)
        times: dict[str, list[float]] = {m: [] for m in (*methods, "structured")}
        outs: dict[str, torch.Tensor] = {}
        for _ in range(args.repeats):
            for method in times:
                start = time.perf_counter()
                outs[method] = sensitivity.jacobian_norms(
                    attn, x, method=method, memory_mb=args.memory_mb
                ).detach()
                times[method].append(time.perf_counter() - start)
        med = {m: statistics.median(v) for m, v in times.items()}
        line = f"T={t} " + " ".join(f"{m} {s:.4f}s" for m, s in med.items())
        for m in methods:
            diff = ((outs[m] - outs["structured"]).abs() / outs[m].abs().clamp(min=1e-12)).max()
            line += f" | {m}/structured {med[m] / med['structured']:.0f}x (max rel diff {diff:.1e})"
        print(line, flush=True)
    print(
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB, "
        f"load {(load_average() or [float('nan')])[0]:.1f} at the end",
        flush=True,
    )


if __name__ == "__main__":
    main()
