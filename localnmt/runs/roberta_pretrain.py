"""Pre-train a (local-attention) BERT with fairseq's masked_lm task (Pande et al. 2021, 5.1).

    python -m localnmt.runs.roberta_pretrain --data BIN --save-dir DIR [--arch ARCH]
        [--gpus N] [--batch-per-gpu N] [--lr LR] [--phase1-updates N] [--phase2-updates N]
        [--optimizer lamb|adam] [--sequences-per-update N] [--cpu] [--user-dir DIR|auto|none]
        [--dry-run] [-- EXTRA fairseq-train ARGS]

Two phases, each in DIR/seqT (T: its tokens per sample): short samples, then long ones from
the first phase's last checkpoint; a batch of many sequences per update by gradient accumulation
(update_freq = ceil(sequences / (gpus x batch per gpu))), LAMB (needs apex; Adam without it),
polynomial decay after the warm-up. BIN: data_prep/prepare_pretrain_text.sh OUT TEXT... writes
it to OUT/bin. Every number (lr, batch, updates and tokens per sample of each phase, warm-up,
weight decay, dropout, optimizer betas) is the ``roberta_pretrain`` recipe of
configs/recipes.yaml (:func:`localnmt.runs.recipes.roberta_pretrain_recipe`; its comments say which
the paper gives and which are chosen here); the options override some of them.
"""

from __future__ import annotations

import argparse
import math
import sys

from localnmt.errors import entry_point
from localnmt.runs.bert_commands import (
    add_run_options,
    device_args,
    optimizer_args,
    parse_with_extra,
    run_commands,
    user_dir_args,
)
from localnmt.runs.launch import ENTRY
from localnmt.runs.options import split_extra
from localnmt.runs.recipes import PretrainRecipe, lr_text, roberta_pretrain_recipe


def warmup_updates(updates: int, max_warmup: int) -> int:
    """A phase's warm-up: ``max_warmup`` updates, a tenth of ``updates`` when they are fewer."""
    return updates // 10 if updates < max_warmup else max_warmup


def phase_command(
    args: argparse.Namespace,
    recipe: PretrainRecipe,
    tokens: int,
    updates: int,
    save_dir: str,
    more: list[str],
) -> list[str]:
    """One phase's fairseq-train command."""
    freq = math.ceil(args.sequences_per_update / (args.gpus * args.batch_per_gpu))
    cmd = [sys.executable, *ENTRY, args.data, *user_dir_args(args)]
    cmd += [
        "--task", "masked_lm", "--criterion", "masked_lm", "--arch", args.arch,
        "--sample-break-mode", "complete", "--tokens-per-sample", str(tokens),
        "--max-positions", "512", "--batch-size", str(args.batch_per_gpu),
        "--update-freq", str(freq), "--required-batch-size-multiple", "1",
        *optimizer_args(args.optimizer, recipe), "--lr", args.lr,
        "--weight-decay", str(recipe.weight_decay), "--clip-norm", str(recipe.clip_norm),
        "--lr-scheduler", "polynomial_decay",
        "--warmup-updates", str(warmup_updates(updates, recipe.max_warmup)),
        "--total-num-update", str(updates), "--max-update", str(updates),
        "--dropout", str(recipe.dropout), "--attention-dropout", str(recipe.attention_dropout),
        "--save-dir", save_dir,
        "--no-epoch-checkpoints", "--skip-invalid-size-inputs-valid-test", *more,
    ]  # fmt: skip
    return cmd + device_args(args) + args.extra


def commands(args: argparse.Namespace) -> list[list[str]]:
    """The two phases: short samples, then long ones from the first phase's last checkpoint."""
    recipe = roberta_pretrain_recipe()
    short, long = recipe.phase1_tokens_per_sample, recipe.phase2_tokens_per_sample
    first, second = f"{args.save_dir}/seq{short}", f"{args.save_dir}/seq{long}"
    return [
        phase_command(args, recipe, short, args.phase1_updates, first, []),
        phase_command(args, recipe, long, args.phase2_updates, second,
                      ["--restore-file", f"{first}/checkpoint_last.pt", "--reset-optimizer",
                       "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler"]),
    ]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options; fairseq-train arguments after ``--`` land in ``extra``."""
    recipe = roberta_pretrain_recipe()
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    p = argparse.ArgumentParser(prog="roberta_pretrain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--data", required=True, help="pre-training data-bin")
    p.add_argument("--save-dir", required=True)
    p.add_argument("--arch", default="localnmt_roberta_base")
    p.add_argument("--gpus", type=int, default=1)
    default = " (default %(default)s, configs/recipes.yaml)"
    p.add_argument(
        "--batch-per-gpu",
        type=int,
        default=recipe.batch_per_gpu,
        help="sequences per GPU batch" + default,
    )
    p.add_argument("--lr", default=lr_text(recipe.lr), help="peak learning rate" + default)
    p.add_argument(
        "--phase1-updates",
        type=int,
        default=recipe.phase1_updates,
        help=f"updates at {recipe.phase1_tokens_per_sample} tokens" + default,
    )
    p.add_argument(
        "--phase2-updates",
        type=int,
        default=recipe.phase2_updates,
        help=f"updates at {recipe.phase2_tokens_per_sample} tokens" + default,
    )
    p.add_argument(
        "--sequences-per-update",
        type=int,
        default=recipe.sequences_per_update,
        help="batch reached by gradient accumulation" + default,
    )
    add_run_options(p)
    return parse_with_extra(p, own, extra)


@entry_point("roberta_pretrain")
def main(argv: list[str] | None = None) -> int:
    """Run (or print) both phases; stops at the first that fails."""
    args = parse_args(argv)
    return run_commands(commands(args), args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
