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
import fnmatch
import gc
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from bench import attention_layer as attn
from bench.generation import Generator, compare_generation
from bench.machine import describe, machine_info, pick_device
from bench.measure import use_clock
from bench.models import (
    build_baseline,
    build_candidate,
    count_parameters,
    parse_model_args,
    size_key,
    size_overrides,
)
from bench.outputs import write_all
from bench.synthetic import batch_size_for, make_batch, make_dictionary
from bench.training import Trainer, compare_training
from localnmt.runs.spec import DEFAULT_DECODING

SECTIONS = ("train", "generate", "attention", "band")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
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


def resolve(args: argparse.Namespace, device: torch.device) -> argparse.Namespace:
    """Fill the defaults that depend on --quick and the device."""
    quick = args.quick

    def default(name: str, full: Any, short: Any) -> None:
        if getattr(args, name) is None:
            setattr(args, name, short if quick else full)

    default("repeats", 5, 3)
    default("warmup", 2, 1)
    default("lengths", [16, 32, 64, 128], [16, 32])
    default("max_tokens", 4096 if device.type == "cuda" else 1024, 256)
    default("gen_batch", 8, 2)
    default("attn_lengths", [64, 128, 256, 512, 1024, 2048], [64, 128, 256, 512])
    default("attn_batch", 32, 4)
    if args.native_size:
        args.embed_dim = args.ffn_dim = None
    args.section_list = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in args.section_list if s not in SECTIONS]
    if bad:
        raise SystemExit(f"unknown section(s) {bad} (valid: {', '.join(SECTIONS)})")
    return args


def select_rows(args: argparse.Namespace) -> list:
    """Translation catalog rows after --paper / --rows (--quick without them:
    :func:`quick_rows`), one per distinct model: a configuration that several tables or tasks
    share is measured once, under its first name."""
    from localnmt.catalog import all_rows
    from localnmt.catalog.tasks import get_task

    rows = [r for r in all_rows() if get_task(r.task).is_translation]
    if args.paper:
        rows = [r for r in rows if r.paper in args.paper]
    if args.rows:
        rows = [
            r
            for r in rows
            if any(fnmatch.fnmatch(r.name, pat) or r.name == pat for pat in args.rows)
        ]
    elif args.quick and not args.paper:
        rows = quick_rows(rows)
    distinct: dict[tuple, object] = {}
    for r in rows:
        distinct.setdefault((r.arch, tuple(r.args), r.size), r)
    return list(distinct.values())


def quick_rows(rows: list) -> list:
    """The plain base row (pipeline overhead) and, per paper, its first base row that
    configures an attention method (a paper's own baseline rows are plain)."""
    picked, seen = [], set()
    for r in sorted(rows, key=lambda r: r.paper != "vaswani2017"):  # stable: its base first
        if r.size != "base" or r.paper in seen:
            continue
        try:
            ns = parse_model_args(r.arch, r.args, [], quiet=True)
        except (Exception, SystemExit):
            continue
        flags = ("encoder_attn_modifiers", "decoder_attn_modifiers", "cross_attn_modifiers")
        plain = not any(getattr(ns, flag, None) for flag in flags)
        if plain and picked:
            continue  # the first plain row stands for every paper's baseline
        if not plain:
            seen.add(r.paper)
        picked.append(r)
    return picked


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def memory_budget(args: argparse.Namespace, device: torch.device) -> float:
    if args.memory_budget is not None:
        return args.memory_budget * 2**30
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return 0.8 * free
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable"):
                return 0.5 * int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 * 2**30


def run_models(args: argparse.Namespace, device: torch.device, result: dict[str, Any]) -> None:
    """Training and beam-search sections, row by row (baselines cached by size)."""
    dtype = DTYPES[args.dtype]
    dictionary = make_dictionary(args.vocab)
    overrides = size_overrides(args.embed_dim, args.ffn_dim)
    baselines: dict[tuple, dict[str, Any]] = {}
    rows = select_rows(args)
    log(f"{len(rows)} catalog rows: {', '.join(r.name for r in rows)}")
    for row in rows:
        try:
            ns = parse_model_args(row.arch, row.args, overrides)
            key = size_key(ns)
            if key not in baselines:
                baselines.clear()  # one baseline alive at a time
                gc.collect()
                torch.manual_seed(args.seed)
                model = build_baseline(ns, dictionary)
                baselines[key] = {"model": model, "params": count_parameters(model)}
            base = baselines[key]
            torch.manual_seed(args.seed)
            candidate = build_candidate(ns, dictionary)
        except (Exception, SystemExit) as err:  # a broken row must not stop the others
            result["errors"].append(_error("build", row.name, err))
            log(f"{row.name}: build failed: {err}")
            continue
        info = {
            "row": row.name,
            "arch": row.arch,
            "args": list(row.args),
            "params": count_parameters(candidate),
            "paper_params_m": row.paper_params,
            "baseline_params": base["params"],
        }
        info["params_delta"] = info["params"] - info["baseline_params"]
        if "train" in args.section_list:
            if "trainer" not in base:
                base["trainer"] = Trainer(base["model"], device, dtype)
            trainer = Trainer(candidate, device, dtype)
            for length in args.lengths:
                batch = make_batch(
                    dictionary,
                    batch_size_for(args.max_tokens, length),
                    length,
                    jitter=args.jitter,
                    seed=args.seed + length,
                ).to(device)
                try:
                    rec = compare_training(
                        base["trainer"],
                        trainer,
                        batch,
                        warmup=args.warmup,
                        repeats=args.repeats,
                        memory=not args.no_memory,
                    )
                except Exception as err:
                    result["errors"].append(_error("train", f"{row.name} T={length}", err))
                    log(f"{row.name} T={length}: training failed: {err}")
                    continue
                result["train"].append({**info, "length": length, **rec})
                log(
                    f"train {row.name} T={length}: ratio {rec['throughput_ratio']:.3f} "
                    f"({rec['candidate_tokens_per_s']:.0f} vs "
                    f"{rec['baseline_tokens_per_s']:.0f} tok/s)"
                )
            del trainer
        if "generate" in args.section_list:
            base_gen = Generator(base["model"], dictionary, device, dtype, beam=args.beam, steps=1)
            cand_gen = Generator(candidate, dictionary, device, dtype, beam=args.beam, steps=1)
            for length in args.lengths:
                for gen in (base_gen, cand_gen):
                    gen.generator.max_len_b = gen.generator.min_len = length
                batch = make_batch(
                    dictionary, args.gen_batch, length, jitter=args.jitter, seed=args.seed + length
                ).to(device)
                try:
                    rec = compare_generation(
                        base_gen, cand_gen, batch, warmup=args.warmup, repeats=args.repeats
                    )
                except Exception as err:
                    result["errors"].append(_error("generate", f"{row.name} T={length}", err))
                    log(f"{row.name} T={length}: beam search failed: {err}")
                    continue
                result["generate"].append({**info, "length": length, **rec})
                log(f"generate {row.name} T={length}: ratio {rec['speed_ratio']:.3f}")
            del base_gen, cand_gen
        del candidate
        gc.collect()


def run_attention(args: argparse.Namespace, device: torch.device, result: dict[str, Any]) -> None:
    """Single-layer section: each method (× kernel) vs a plain layer, over T."""
    from localnmt.attention.problem import kernel_names

    dtype = DTYPES[args.dtype]
    entries = (
        [attn.parse_entry(m) for m in args.methods]
        if args.methods
        else attn.default_entries(args.attn_heads)
    )
    if args.kernels == "auto":
        kernels: list[str | None] = [None]
    elif args.kernels == "all":
        kernels = [None, *kernel_names()]
    else:
        kernels = [args.kernels]
    heads, dim = args.attn_heads, args.attn_heads * args.attn_head_dim
    batch = args.attn_batch
    max_pos = max(1024, *args.attn_lengths)
    budget = memory_budget(args, device)
    plains: dict[str, torch.nn.Module] = {}
    for entry in entries:
        try:
            torch.manual_seed(args.seed)
            layer = attn.build_layer(entry, dim, heads, max_pos).to(device, dtype).train()
            if entry.site not in plains:
                plain_entry = attn.MethodEntry(entry.site, attn.PLAIN)
                plains[entry.site] = attn.build_layer(plain_entry, dim, heads, max_pos)
                plains[entry.site].to(device, dtype).train()
        except Exception as err:
            result["errors"].append(_error("attention", entry.label, err))
            log(f"{entry.label}: build failed: {err}")
            continue
        plain = plains[entry.site]
        delta = attn.param_delta(layer, plain)
        for kernel in kernels:
            if kernel is not None and entry.spec == attn.FAIRSEQ:
                continue
            for length in args.attn_lengths:
                rec: dict[str, Any] = {
                    "method": entry.label,
                    "site": entry.site,
                    "spec": entry.spec,
                    "kernel": kernel or "auto",
                    "length": length,
                    "batch": batch,
                    "heads": heads,
                    "head_dim": args.attn_head_dim,
                    "params_delta": delta,
                }
                inputs = attn.make_inputs(
                    entry.site, batch, length, dim, device, dtype, seed=args.seed + length
                )
                try:
                    path = attn.chosen_path(layer, inputs, kernel)
                    rec["path"] = path
                    dense_bytes = batch * heads * length * length * 4
                    if path == "dense" and 4 * dense_bytes > budget:
                        rec["status"] = "skipped: dense T×T over memory budget"
                    else:
                        rec.update(
                            attn.compare_layers(
                                plain,
                                layer,
                                inputs,
                                device,
                                kernel=kernel,
                                warmup=args.warmup,
                                repeats=args.repeats,
                                memory=not args.no_memory,
                            )
                        )
                        rec["status"] = "ok"
                except RuntimeError as err:
                    text = str(err)
                    rec["status"] = "declined" if "declined" in text else f"error: {text[:200]}"
                except MemoryError:
                    rec["status"] = "error: out of memory"
                result["attention"].append(rec)
                ratio = rec.get("time_ratio")
                log(
                    f"attention {entry.label} [{rec['kernel']}] T={length}: "
                    + (f"{ratio:.3f} × plain via {rec.get('path')}" if ratio else rec["status"])
                )
                del inputs
        del layer
        gc.collect()


def run_band(args: argparse.Namespace, device: torch.device, result: dict[str, Any]) -> None:
    """Kernel-level section: ``bench/band_attention.py`` (blocked band kernel vs dense SDPA,
    window 11), called with this run's lengths, batch, heads and repeats (CPU only)."""
    if device.type != "cpu":
        log("band section: bench/band_attention.py runs on CPU only; skipped")
        return
    try:
        from bench import band_attention

        rows = band_attention.run(
            args.attn_lengths,
            args.attn_batch,
            args.attn_heads,
            args.attn_head_dim,
            11,
            args.repeats,
        )
        meta = band_attention.run_meta(
            describe(result["machine"]), args.attn_heads, args.attn_head_dim, 11, args.repeats
        )
        result["band"] = {
            "meta": meta,
            "rows": rows,
            "markdown": band_attention.markdown(rows, meta),
        }
    except Exception as err:
        result["errors"].append(_error("band", "bench/band_attention.py", err))
        log(f"band section failed: {err}")


def plan(args: argparse.Namespace, device: torch.device) -> str:
    """What a run with these options would measure, checked as far as it can be without
    building anything: the catalog rows, the attention entries (specs parsed) and the kernel
    names."""
    from localnmt.attention.problem import kernel_names

    lines = [f"device {device}, dtype {args.dtype}, sections {','.join(args.section_list)}"]
    if {"train", "generate"} & set(args.section_list):
        rows = select_rows(args)
        if not rows:
            raise SystemExit("error: no catalog row matches --paper / --rows")
        lines.append(f"{len(rows)} rows: {', '.join(r.name for r in rows)}")
        lines.append(f"lengths {args.lengths}, {args.max_tokens} target tokens per batch, "
                     f"beam {args.beam} over {args.gen_batch} sentences")  # fmt: skip
    if "attention" in args.section_list:
        entries = (
            [attn.parse_entry(m) for m in args.methods]
            if args.methods
            else attn.default_entries(args.attn_heads)
        )
        if args.kernels not in ("auto", "all") and args.kernels not in kernel_names():
            raise SystemExit(
                f"error: unknown kernel '{args.kernels}' (valid: auto, all, "
                f"{', '.join(kernel_names())})"
            )
        lines.append(f"{len(entries)} attention layers: {', '.join(e.label for e in entries)}")
        lines.append(f"attention lengths {args.attn_lengths}, batch {args.attn_batch}, "
                     f"kernels {args.kernels}")  # fmt: skip
    return "\n".join(lines)


def _error(section: str, what: str, err: BaseException) -> dict[str, str]:
    return {
        "section": section,
        "what": what,
        "error": f"{type(err).__name__}: {err}",
        "traceback": traceback.format_exc(limit=6),
    }


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
