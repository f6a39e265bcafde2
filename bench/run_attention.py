"""The ``attention`` section of ``python -m bench.run``: forward + backward of one attention
layer per method (× kernel) against a plain layer, over T."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import Any

import torch

from bench import attention_layer as attn
from bench.run_log import error_entry, log
from bench.run_options import DTYPES


def memory_budget(args: argparse.Namespace, device: torch.device) -> float:
    """Bytes a dense T×T layer may use: ``--memory-budget`` GiB, else 80% of the free GPU
    memory or half of the available RAM (4 GiB when unknown)."""
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
            result["errors"].append(error_entry("attention", entry.label, err))
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
