"""The ``band`` section of ``python -m bench.run``: ``bench/band_attention.py`` with the run's
lengths, batch, heads and repeats."""

from __future__ import annotations

import argparse
from typing import Any

import torch

from bench.machine_info import describe
from bench.run_log import error_entry, log


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
        result["errors"].append(error_entry("band", "bench/band_attention.py", err))
        log(f"band section failed: {err}")
