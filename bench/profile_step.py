"""Where the time goes: torch.profiler on one training step (or beam search) of a catalog
row's model and of fairseq's Transformer, ops side by side (self CPU/CUDA time).

    python -m bench.profile_step --row 'yang2018/table-1/fixed/base' --length 32
    python -m bench.profile_step --row ... --generate --length 16

Use it where ``bench.run`` reports a missed target: the ops whose time grows most in the
candidate name the cost (extra bias tensors, a dense T×T path, Python overhead per call).
"""

from __future__ import annotations

import argparse
import fnmatch
from collections import defaultdict

import torch

from bench.generation import Generator
from bench.machine_info import describe, machine_info, pick_device
from bench.models import build_baseline, build_candidate, parse_model_args, size_overrides
from bench.synthetic import batch_size_for, make_batch, make_dictionary
from bench.training_throughput import Trainer
from localnmt.runs.run_specs import DEFAULT_DECODING


def op_times(fn, device: torch.device, steps: int = 2) -> dict[str, float]:
    """Self time (ms per step) of each op name over ``steps`` profiled calls."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    fn()  # warm-up
    with profile(activities=activities) as prof:
        for _ in range(steps):
            fn()
    out: dict[str, float] = defaultdict(float)
    for avg in prof.key_averages():
        if device.type == "cuda":  # self_cuda_time_total before torch 2.4
            new = hasattr(avg, "self_device_time_total")
            self_us = avg.self_device_time_total if new else avg.self_cuda_time_total
        else:
            self_us = avg.self_cpu_time_total
        out[avg.key] += self_us / 1000.0 / steps
    return dict(out)


def compare(base: dict[str, float], cand: dict[str, float], top: int) -> str:
    """A markdown table of the ops whose time differs most (candidate − baseline)."""
    names = sorted(set(base) | set(cand), key=lambda n: -abs(cand.get(n, 0) - base.get(n, 0)))
    lines = [
        f"total self time: baseline {sum(base.values()):.1f} ms, "
        f"candidate {sum(cand.values()):.1f} ms",
        "",
        "| op | baseline ms | candidate ms | Δ ms |",
        "|---|---|---|---|",
    ]
    for name in names[:top]:
        b, c = base.get(name, 0.0), cand.get(name, 0.0)
        lines.append(f"| {name} | {b:.2f} | {c:.2f} | {c - b:+.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.profile_step",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--row", required=True, help="catalog row name or shell pattern (first match)")
    p.add_argument("--length", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--generate", action="store_true", help="profile beam search instead")
    p.add_argument("--beam", type=int, default=DEFAULT_DECODING.beam)
    p.add_argument("--gen-batch", type=int, default=2)
    p.add_argument("--embed-dim", type=int, default=512)
    p.add_argument("--ffn-dim", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--device")
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)

    from localnmt.catalog import all_rows

    row = next(r for r in all_rows() if r.name == args.row or fnmatch.fnmatch(r.name, args.row))
    device = pick_device(args.device)
    dictionary = make_dictionary(args.vocab)
    ns = parse_model_args(row.arch, row.args, size_overrides(args.embed_dim, args.ffn_dim))
    models = {
        "baseline": build_baseline(ns, dictionary),
        "candidate": build_candidate(ns, dictionary),
    }
    if args.generate:
        batch = make_batch(dictionary, args.gen_batch, args.length).to(device)
        fns = {}
        for name, model in models.items():
            gen = Generator(
                model, dictionary, device, torch.float32, beam=args.beam, steps=args.length
            )
            fns[name] = lambda gen=gen: gen.run(batch)
    else:
        batch = make_batch(
            dictionary, batch_size_for(args.max_tokens, args.length), args.length
        ).to(device)
        fns = {
            name: Trainer(model, device, torch.float32).stepper(batch)
            for name, model in models.items()
        }
    times = {name: op_times(fn, device) for name, fn in fns.items()}
    print(
        f"{row.name} ({'beam search' if args.generate else 'training step'}, "
        f"T={args.length}) on {describe(machine_info(device))}\n"
    )
    print(compare(times["baseline"], times["candidate"], args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
