"""``python -m bench.run``: every catalog architecture side by side with fairseq's Transformer.

In one process, on one device: training throughput and peak memory per catalog row and
sentence length, beam-search speed, and forward + backward of one attention layer per method
vs a plain layer over T. Writes ``bench.json``, ``bench.md`` and ``bench.png`` to ``--out``
(default ``bench/results/<time>``). ``--quick`` finishes in a few minutes on 2 CPU cores.

Examples::

    python -m bench.run --quick
    python -m bench.run --paper yang2018 --sections train,generate
    python -m bench.run --sections attention --methods localness 'cross:gmm' --kernels all
    python -m bench.run --device cuda --dtype bfloat16

Run as a module: importing the ``bench`` package first sets ``OMP_WAIT_POLICY=PASSIVE``
before torch is imported.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch

from bench.machine_info import describe, machine_info, pick_device
from bench.measure import use_clock
from bench.outputs import write_all
from bench.run_attention import run_attention
from bench.run_band import run_band
from bench.run_log import log
from bench.run_models import run_models
from bench.run_options import DTYPES, SECTIONS, plan, resolve
from localnmt.runs.run_specs import DEFAULT_DECODING

RESULTS = Path(__file__).resolve().parent / "results"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a few rows (one per paper), short lengths, small batches, 3 repeats",
    )
    p.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    p.add_argument("--out", type=Path, help="output folder (default bench/results/<time>)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument(
        "--dtype",
        choices=sorted(DTYPES),
        default="float32",
        help="float16/bfloat16: autocast for models, cast for single layers",
    )
    p.add_argument("--threads", type=int, help="torch.set_num_threads (CPU)")
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="CPU timings by wall time (default) or by the process's CPU time, which does not "
        "count what other processes take from a shared machine (bench/measure.py)",
    )
    p.add_argument("--repeats", type=int, help="timed A/B rounds (default 5, quick 3)")
    p.add_argument("--warmup", type=int, help="untimed rounds first (default 2, quick 1)")
    p.add_argument("--no-memory", action="store_true", help="skip peak-memory measurements")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the options and print what would run (rows, lengths, methods, kernels) "
        "without building or timing anything (any machine, also for --device cuda)",
    )
    g = p.add_argument_group("models (training and beam search)")
    g.add_argument("--paper", action="append", help="only rows of this paper (repeatable)")
    g.add_argument("--rows", nargs="+", help="row names or shell patterns, e.g. 'yang2018/*/base'")
    g.add_argument("--lengths", type=int, nargs="+", help="default 16 32 64 128 (quick 16 32)")
    g.add_argument(
        "--max-tokens",
        type=int,
        help="target tokens per training batch (default 4096 GPU, 1024 CPU, quick 256)",
    )
    g.add_argument("--embed-dim", type=int, default=512, help="every model's embedding dim")
    g.add_argument("--ffn-dim", type=int, default=2048, help="every model's FFN dim")
    g.add_argument(
        "--native-size", action="store_true", help="keep each row's own dims (big rows at big size)"
    )
    g.add_argument("--vocab", type=int, default=32000, help="joined vocabulary size")
    g.add_argument("--beam", type=int, default=DEFAULT_DECODING.beam)
    g.add_argument("--gen-batch", type=int, help="sentences per beam search (default 8, quick 2)")
    g.add_argument(
        "--jitter",
        type=float,
        default=0.1,
        help="sentence lengths vary in [(1-jitter)·T, T] (padding)",
    )
    a = p.add_argument_group("single attention layers")
    a.add_argument(
        "--methods",
        nargs="+",
        help="'[site:]spec' entries (default: every registered method, defaults)",
    )
    a.add_argument(
        "--attn-lengths",
        type=int,
        nargs="+",
        help="default 64 128 256 512 1024 2048 (quick 64 128 256 512)",
    )
    a.add_argument("--attn-batch", type=int, help="default 32 (quick 4)")
    a.add_argument("--attn-heads", type=int, default=8)
    a.add_argument("--attn-head-dim", type=int, default=64)
    a.add_argument(
        "--kernels",
        default="auto",
        help="auto (the pipeline's choice), all (each registered kernel, forced), "
        "or one kernel name (forced, via localnmt.attention.dispatch.forced_kernel)",
    )
    a.add_argument(
        "--memory-budget",
        type=float,
        help="GiB a dense T×T layer may use before it is skipped (default: half of "
        "the free memory)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    use_clock(args.clock)
    device = pick_device(args.device)
    args = resolve(args, device)

    if args.dry_run:
        print(plan(args, device))
        return 0

    machine = machine_info(device)
    log(describe(machine))
    result: dict[str, Any] = {
        "machine": machine,
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "memory_method": (
            "torch.cuda.max_memory_allocated above the memory live before the step"
            if device.type == "cuda"
            else "peak of the torch profiler's allocation events (profile_memory) during one "
            "step, above the memory live before it"
        ),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "train": [],
        "generate": [],
        "attention": [],
        "errors": [],
    }
    begin = time.perf_counter()
    if {"train", "generate"} & set(args.section_list):
        run_models(args, device, result)
    if "attention" in args.section_list:
        run_attention(args, device, result)
    if "band" in args.section_list:
        run_band(args, device, result)
    result["seconds"] = time.perf_counter() - begin
    if hasattr(os, "getloadavg"):
        result["machine"]["load_average_end"] = list(os.getloadavg())
    out = args.out or RESULTS / time.strftime("%Y%m%d-%H%M%S")
    paths = write_all(result, out)
    print(paths["markdown"].read_text())
    log("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
