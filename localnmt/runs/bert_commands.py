"""What BERT pre-training and GLUE fine-tuning commands share (``roberta_pretrain``,
``glue_finetune``): optimizer choice and flags, the run options, the device flags, running or
printing the commands."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING

from localnmt import processes
from localnmt.paths import resolve_user_dir

if TYPE_CHECKING:  # the recipes are read when a command is built (a config error: exit 2)
    from localnmt.runs.recipes import FinetuneRecipe, PretrainRecipe


def default_optimizer(log=print) -> str:
    """``lamb`` when apex imports (fairseq's LAMB needs it), else ``adam`` (said once)."""
    try:
        import apex  # noqa: F401
    except ImportError:
        log("note: apex not installed, so no LAMB: using Adam (paper: LAMB)")
        return "adam"
    return "lamb"


def optimizer_args(name: str, recipe: FinetuneRecipe | PretrainRecipe) -> list[str]:
    """fairseq optimizer flags of ``lamb`` or ``adam``: the recipe's betas and eps."""
    if name == "lamb":
        return ["--optimizer", "lamb", "--lamb-betas", recipe.lamb_betas,
                "--lamb-eps", str(recipe.lamb_eps)]  # fmt: skip
    return ["--optimizer", "adam", "--adam-betas", recipe.adam_betas,
            "--adam-eps", str(recipe.adam_eps)]  # fmt: skip


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``--optimizer``, ``--cpu``, ``--user-dir``, ``--dry-run``."""
    p.add_argument("--optimizer", choices=["lamb", "adam"], help="default: lamb if apex imports")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--user-dir", default="auto", help="plugin directory; auto or none")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")


def parse_with_extra(p: argparse.ArgumentParser, own: list[str], extra: list[str]):
    """Parse ``own``; keep the fairseq-train arguments ``extra``; pick the optimizer."""
    args = p.parse_args(own)
    args.extra = extra
    args.optimizer = args.optimizer or default_optimizer(lambda m: print(m, file=sys.stderr))
    return args


def user_dir_args(args: argparse.Namespace) -> list[str]:
    """``--user-dir DIR`` (nothing for ``none``)."""
    user_dir = resolve_user_dir(args.user_dir)
    return ["--user-dir", user_dir] if user_dir else []


def device_args(args: argparse.Namespace) -> list[str]:
    """``--cpu``, or the world size for several GPUs."""
    if args.cpu:
        return ["--cpu"]
    return ["--distributed-world-size", str(args.gpus)] if args.gpus > 1 else []


def run_commands(commands: list[list[str]], dry_run: bool) -> int:
    """Print them (``dry_run``) or run them in order, stopping at the first that fails."""
    for cmd in commands:
        if dry_run:
            print(shlex.join(cmd))
            continue
        status = processes.run(cmd).returncode
        if status:
            return status
    return 0
