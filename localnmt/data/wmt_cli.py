"""Shared command line of the WMT pipelines: ``download`` and ``process`` subcommands."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from localnmt.data.bpe import BPE_KINDS
from localnmt.data.command import run_data_command
from localnmt.data.corpus_pipeline import ProcessConfig, process_corpus
from localnmt.data.download import Source, download_all
from localnmt.data.fs_errors import writing_to
from localnmt.data.max_positions import MAX_POSITIONS_HELP
from localnmt.data.wmt_extract import Corpus, assemble
from localnmt.steps import Log, StepRunner


def process_wmt(
    corpora: dict[str, list[Corpus]], raw_root: Path, workdir: Path, cfg: ProcessConfig, *,
    allow_missing_optional: bool = False, log: Log = print,
) -> Path:  # fmt: skip
    """Assemble raw splits from local files, then run the shared processing."""
    workdir = Path(workdir)
    raw_root = Path(raw_root)
    t0 = time.monotonic()
    runner = StepRunner(workdir, log)
    langs = (cfg.src, cfg.tgt)
    raw_dir = workdir / "raw"
    sizes = sorted(
        [str(p.relative_to(raw_root)), p.stat().st_size]
        for p in raw_root.rglob("*") if p.is_file() and not p.name.endswith(".part")
    ) if raw_root.is_dir() else []  # fmt: skip
    runner.run(
        "raw",
        lambda: assemble(
            corpora,
            raw_root,
            raw_dir,
            langs,
            allow_missing_optional=allow_missing_optional,
            log=log,
        ),  # fmt: skip
        outputs=[raw_dir / f"{s}.{lang}" for s in corpora for lang in langs],
        params={"root": str(raw_root), "files": sizes, "allow_missing": allow_missing_optional},
    )
    data_bin = process_corpus(raw_dir, workdir, cfg, runner, raw_step="raw", log=log)
    log(f"data-bin at {data_bin} ({time.monotonic() - t0:.1f}s)")
    return data_bin


def main(
    argv: list[str] | None, *, name: str, sources: list[Source],
    corpora: dict[str, list[Corpus]], config: ProcessConfig,
    extra_args: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:  # fmt: skip
    """``download --dir D`` or ``process --raw-dir D --workdir W [--bpe ..] [--bpe-merges N]``."""
    ap = argparse.ArgumentParser(prog=f"python -m localnmt.data.{name}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    dl = sub.add_parser("download", help="fetch the archives (resumable, sha256 manifest)")
    dl.add_argument("--dir", type=Path, required=True)
    pr = sub.add_parser("process", help="local files → data-bin (never uses the network)")
    pr.add_argument("--raw-dir", type=Path, required=True)
    pr.add_argument("--workdir", type=Path, required=True)
    pr.add_argument("--bpe", choices=BPE_KINDS, default=config.bpe)
    pr.add_argument("--bpe-merges", type=int, default=config.bpe_size)
    pr.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    pr.add_argument("--no-target-normalize", action="store_true",
                    help="no Moses punctuation normalisation of the target side")  # fmt: skip
    pr.add_argument("--max-positions", type=int, default=config.max_positions, metavar="N",
                    help=MAX_POSITIONS_HELP)  # fmt: skip
    pr.add_argument("--allow-missing-manual", action="store_true",
                    help="proceed without corpora that need a manual download")  # fmt: skip
    if extra_args:
        extra_args(pr)
    args = ap.parse_args(argv)
    log = lambda m: print(m, flush=True)  # noqa: E731

    def build() -> Path | None:
        if args.cmd == "download":
            with writing_to(args.dir, "--dir") as out_dir:
                download_all(sources, out_dir, log=log)
            return None
        cfg = replace(config, bpe=args.bpe, bpe_size=args.bpe_merges, workers=args.workers,
                      normalize_target=not args.no_target_normalize,
                      max_positions=args.max_positions)  # fmt: skip
        if getattr(args, "joint", False):
            cfg = replace(cfg, joint_bpe=True, joined_dictionary=True)
        allow = args.allow_missing_manual
        with writing_to(args.workdir) as workdir:
            return process_wmt(
                corpora, args.raw_dir, workdir, cfg, allow_missing_optional=allow, log=log
            )

    return run_data_command(ap.prog, build)
