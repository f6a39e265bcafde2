"""Command line shared by the pipelines of corpora the user obtains by hand (ASPEC, LDC).

Same ``process`` options and error reporting as :mod:`localnmt.data.wmt_cli`, but the input is
a local directory and there is no download step.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from localnmt.data.bpe import BPE_KINDS
from localnmt.data.command import run_data_command
from localnmt.data.corpus_pipeline import ProcessConfig
from localnmt.data.fs_errors import writing_to
from localnmt.data.max_positions import MAX_POSITIONS_HELP
from localnmt.steps import Log


def main(
    argv: list[str] | None, *, name: str, config: ProcessConfig, inputs: dict[str, str],
    run: Callable[[argparse.Namespace, ProcessConfig, Log], Path],
) -> int:  # fmt: skip
    """``process --<input> DIR ... --workdir W [--bpe ..] [--bpe-merges N] [--separate]``.

    ``inputs`` maps each input-directory option name to its help text; ``run`` does the work
    and returns the data-bin directory. A :class:`DataError` ends in one ``PROG: error: ...``
    line, exit 2.
    """
    ap = argparse.ArgumentParser(prog=f"python -m localnmt.data.{name}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("process", help="local files → data-bin (never uses the network)")
    for opt, help_ in inputs.items():
        pr.add_argument(f"--{opt}", type=Path, required=True, help=help_)
    pr.add_argument("--workdir", type=Path, required=True)
    pr.add_argument("--bpe", choices=BPE_KINDS, default=config.bpe)
    pr.add_argument("--bpe-merges", type=int, default=config.bpe_size)
    pr.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    pr.add_argument("--no-target-normalize", action="store_true",
                    help="no Moses punctuation normalisation of the target side")  # fmt: skip
    pr.add_argument("--max-positions", type=int, default=config.max_positions, metavar="N",
                    help=MAX_POSITIONS_HELP)  # fmt: skip
    pr.add_argument("--separate", action="store_true",
                    help="separate BPE models and dictionaries per language (default: joint, "
                    "as the training recipes share all embeddings)")  # fmt: skip
    args = ap.parse_args(argv)
    log = lambda m: print(m, flush=True)  # noqa: E731
    cfg = replace(config, bpe=args.bpe, bpe_size=args.bpe_merges, workers=args.workers,
                  normalize_target=not args.no_target_normalize,
                  max_positions=args.max_positions)  # fmt: skip
    if args.separate:
        cfg = replace(cfg, joint_bpe=False, joined_dictionary=False)

    def build() -> Path:
        with writing_to(args.workdir):
            return run(args, cfg, log)

    return run_data_command(ap.prog, build)
