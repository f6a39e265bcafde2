"""Fine-tune a (local-attention) BERT on one GLUE task (Pande et al. 2021, Table 4).

    python -m localnmt.runs.glue_finetune --data BIN --save-dir DIR [--arch ARCH]
        [--restore-file CKPT] [--lr LR] [--batch-size N] [--warmup N]
        [--max-epoch N] [--gpus N] [--optimizer lamb|adam] [--cpu] [--user-dir DIR|auto|none]
        [--dry-run] [-- EXTRA fairseq-train ARGS]

BIN comes from data_prep/prepare_glue.sh (its localnmt_glue.json gives --num-classes).
ARCH: pande2021_bert_{band2_untied,band6_untied,band6_alltied,band6_132tied,band6_120tied}
or localnmt_roberta_base (default). Paper: Devlin et al.'s recipe, a warm-up then polynomial
decay, LAMB (fairseq's lamb needs apex; without apex Adam, said on stderr). Every number (lr,
batch size, warm-up, epochs, weight decay, dropout, optimizer betas; the grid the paper
searches) is the ``glue_finetune`` recipe of configs/recipes.yaml
(:func:`localnmt.runs.recipes.glue_finetune_recipe`); the options override some of them. The
polynomial schedule runs epochs x (train rows / (batch x gpus) + 1) updates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from localnmt.errors import UsageError, entry_point
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
from localnmt.runs.recipes import glue_finetune_recipe, lr_text


def glue_info(data: Path) -> dict:
    """``localnmt_glue.json`` of a prepared task (stops with exit 2 when it is missing)."""
    info = Path(data) / "localnmt_glue.json"
    if not info.is_file():
        raise UsageError(f"{info} missing (run data_prep/prepare_glue.sh)")
    return json.loads(info.read_text(encoding="utf-8"))


def train_rows(data: Path) -> int:
    """Training examples of a prepared task (``work/train.label`` lines; 0 when absent)."""
    labels = Path(data) / "work" / "train.label"
    if not labels.is_file():
        return 0
    with open(labels, encoding="utf-8") as f:
        return sum(1 for _ in f)


def command(args: argparse.Namespace) -> list[str]:
    """The fairseq-train command of one fine-tuning run."""
    recipe = glue_finetune_recipe()
    total = (train_rows(args.data) // (args.batch_size * args.gpus) + 1) * args.max_epoch
    cmd = [sys.executable, *ENTRY, str(args.data), *user_dir_args(args)]
    cmd += [
        "--task", "sentence_prediction", "--num-classes", str(glue_info(args.data)["num_classes"]),
        "--arch", args.arch, "--criterion", "sentence_prediction", "--init-token", "0",
        "--separator-token", "2", "--max-positions", "512", "--shorten-method", "truncate",
        "--batch-size", str(args.batch_size), "--required-batch-size-multiple", "1",
        *optimizer_args(args.optimizer, recipe), "--lr", args.lr,
        "--weight-decay", str(recipe.weight_decay), "--clip-norm", str(recipe.clip_norm),
        "--lr-scheduler", "polynomial_decay",
        "--warmup-updates", str(args.warmup), "--total-num-update", str(total),
        "--max-epoch", str(args.max_epoch), "--dropout", str(recipe.dropout),
        "--attention-dropout", str(recipe.attention_dropout),
        "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric",
        "--save-dir", str(args.save_dir), "--no-epoch-checkpoints", "--find-unused-parameters",
    ]  # fmt: skip
    if args.restore_file:
        cmd += ["--restore-file", str(args.restore_file), "--reset-optimizer",
                "--reset-dataloader", "--reset-meters"]  # fmt: skip
    return cmd + device_args(args) + args.extra


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options; fairseq-train arguments after ``--`` land in ``extra``."""
    recipe = glue_finetune_recipe()
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    p = argparse.ArgumentParser(prog="glue_finetune", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--data", required=True, type=Path, help="prepare_glue.sh output of a task")
    p.add_argument("--save-dir", required=True)
    p.add_argument("--arch", default="localnmt_roberta_base")
    p.add_argument("--restore-file", help="pre-trained checkpoint")
    default = " (default %(default)s, configs/recipes.yaml)"
    p.add_argument("--lr", default=lr_text(recipe.lr), help="peak learning rate" + default)
    p.add_argument(
        "--batch-size", type=int, default=recipe.batch_size, help="examples per GPU batch" + default
    )
    p.add_argument("--warmup", type=int, default=recipe.warmup, help="warm-up updates" + default)
    p.add_argument("--max-epoch", type=int, default=recipe.max_epoch, help="epochs" + default)
    p.add_argument("--gpus", type=int, default=1)
    add_run_options(p)
    return parse_with_extra(p, own, extra)


@entry_point("glue_finetune")
def main(argv: list[str] | None = None) -> int:
    """Run (or print) the fine-tuning command."""
    args = parse_args(argv)
    return run_commands([command(args)], args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
