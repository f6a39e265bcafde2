"""Pre-train a (local-attention) BERT with fairseq's masked_lm task (Pande et al. 2021, 5.1).

    python -m localnmt.runs.roberta_pretrain --data BIN --save-dir DIR [--arch ARCH]
        [--gpus N] [--batch-per-gpu N] [--lr LR] [--phase1-updates N] [--phase2-updates N]
        [--optimizer lamb|adam] [--sequences-per-update N] [--cpu] [--user-dir DIR|auto|none]
        [--dry-run] [-- EXTRA fairseq-train ARGS]

About 300K updates at 128 tokens per sample (DIR/seq128), then 1K updates at 512 from the
first phase (DIR/seq512), batch 2K sequences (gradient accumulation:
update_freq = ceil(sequences / (gpus x batch per gpu))), LAMB (needs apex; Adam without it).
BIN: data_prep/prepare_pretrain_text.sh OUT TEXT... writes it to OUT/bin. Left open by the
paper and chosen here: lr 5e-4, 10K warm-up (a tenth of shorter runs) then polynomial decay,
weight decay 0.01, mask probability 0.15 (fairseq default).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys

from localnmt.paths import resolve_user_dir
from localnmt.runs.errors import cli
from localnmt.runs.train import ENTRY, split_extra


def default_optimizer(log=print) -> str:
    """``lamb`` when apex imports (fairseq's LAMB needs it), else ``adam`` (said once)."""
    try:
        import apex  # noqa: F401
    except ImportError:
        log("note: apex not installed, so no LAMB: using Adam (paper: LAMB)")
        return "adam"
    return "lamb"


def optimizer_args(name: str) -> list[str]:
    """fairseq optimizer flags (betas, eps 1e-6) of ``lamb`` or ``adam``."""
    if name == "lamb":
        return ["--optimizer", "lamb", "--lamb-betas", "(0.9,0.999)", "--lamb-eps", "1e-06"]
    return ["--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-06"]


def phase_command(args: argparse.Namespace, tokens: int, updates: int, save_dir: str,
                  more: list[str]) -> list[str]:  # fmt: skip
    """One phase's fairseq-train command."""
    freq = math.ceil(args.sequences_per_update / (args.gpus * args.batch_per_gpu))
    cmd = [sys.executable, *ENTRY, args.data]
    user_dir = resolve_user_dir(args.user_dir)
    cmd += ["--user-dir", user_dir] if user_dir else []
    cmd += [
        "--task", "masked_lm", "--criterion", "masked_lm", "--arch", args.arch,
        "--sample-break-mode", "complete", "--tokens-per-sample", str(tokens),
        "--max-positions", "512", "--batch-size", str(args.batch_per_gpu),
        "--update-freq", str(freq), "--required-batch-size-multiple", "1",
        *optimizer_args(args.optimizer), "--lr", args.lr, "--weight-decay", "0.01",
        "--clip-norm", "0.0", "--lr-scheduler", "polynomial_decay",
        "--warmup-updates", str(updates // 10 if updates < 10000 else 10000),
        "--total-num-update", str(updates), "--max-update", str(updates),
        "--dropout", "0.1", "--attention-dropout", "0.1", "--save-dir", save_dir,
        "--no-epoch-checkpoints", "--skip-invalid-size-inputs-valid-test", *more,
    ]  # fmt: skip
    if args.cpu:
        cmd.append("--cpu")
    elif args.gpus > 1:
        cmd += ["--distributed-world-size", str(args.gpus)]
    return cmd + args.extra


def commands(args: argparse.Namespace) -> list[list[str]]:
    """The two phases: 128-token samples, then 512 from the first phase's last checkpoint."""
    first = f"{args.save_dir}/seq128"
    return [
        phase_command(args, 128, args.phase1_updates, first, []),
        phase_command(args, 512, args.phase2_updates, f"{args.save_dir}/seq512",
                      ["--restore-file", f"{first}/checkpoint_last.pt", "--reset-optimizer",
                       "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler"]),
    ]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options; fairseq-train arguments after ``--`` land in ``extra``."""
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    p = argparse.ArgumentParser(prog="roberta_pretrain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--data", required=True, help="pre-training data-bin")
    p.add_argument("--save-dir", required=True)
    p.add_argument("--arch", default="localnmt_roberta_base")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--batch-per-gpu", type=int, default=64)
    p.add_argument("--lr", default="5e-4")
    p.add_argument("--phase1-updates", type=int, default=300_000)
    p.add_argument("--phase2-updates", type=int, default=1000)
    p.add_argument("--optimizer", choices=["lamb", "adam"], help="default: lamb if apex imports")
    p.add_argument("--sequences-per-update", type=int, default=2048)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--user-dir", default="auto", help="plugin directory; auto or none")
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = p.parse_args(own)
    args.extra = extra
    args.optimizer = args.optimizer or default_optimizer(lambda m: print(m, file=sys.stderr))
    return args


@cli("roberta_pretrain")
def main(argv: list[str] | None = None) -> int:
    """Run (or print) both phases; stops at the first that fails."""
    import subprocess

    args = parse_args(argv)
    for cmd in commands(args):
        if args.dry_run:
            print(shlex.join(cmd))
            continue
        status = subprocess.run(cmd).returncode
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
