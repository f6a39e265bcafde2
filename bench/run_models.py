"""The ``train`` and ``generate`` sections of ``python -m bench.run``: each catalog row against
fairseq's Transformer of the same size (training throughput, peak memory, beam-search speed)."""

from __future__ import annotations

import argparse
import gc
from typing import Any

import torch

from bench.generation import Generator, compare_generation
from bench.models import (
    build_baseline,
    build_candidate,
    count_parameters,
    parse_model_args,
    size_key,
    size_overrides,
)
from bench.run_log import error_entry, log
from bench.run_options import DTYPES, select_rows
from bench.synthetic import batch_size_for, make_batch, make_dictionary
from bench.training_throughput import Trainer, compare_training


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
            result["errors"].append(error_entry("build", row.name, err))
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
                    result["errors"].append(error_entry("train", f"{row.name} T={length}", err))
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
                    result["errors"].append(error_entry("generate", f"{row.name} T={length}", err))
                    log(f"{row.name} T={length}: beam search failed: {err}")
                    continue
                result["generate"].append({**info, "length": length, **rec})
                log(f"generate {row.name} T={length}: ratio {rec['speed_ratio']:.3f}")
            del base_gen, cand_gen
        del candidate
        gc.collect()
