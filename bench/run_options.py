"""What ``python -m bench.run`` measures: defaults that depend on ``--quick`` and the device,
the catalog rows after ``--paper`` / ``--rows``, and the ``--dry-run`` plan."""

from __future__ import annotations

import argparse
import fnmatch
from typing import Any

import torch

from bench import attention_layer as attn
from bench.models import parse_model_args

SECTIONS = ("train", "generate", "attention", "band")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


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
