"""Training hyper-parameters of the papers as fairseq-train arguments.

All papers follow Vaswani et al. (2017): Adam with beta=(0.9, 0.98), eps=1e-9, the
inverse-square-root schedule with 4000 warm-up steps, label smoothing 0.1, and a batch of
8 GPUs x 4096 tokens (Yang et al. 2018/2019) reached here with ``--update-freq``.

Peak learning rate: Vaswani's schedule ``d_model^-0.5 * min(step^-0.5, step * 4000^-1.5)``
peaks at step 4000 at ``512^-0.5 * 4000^-0.5 = 7.0e-4`` (base) and
``1024^-0.5 * 4000^-0.5 = 4.9e-4`` (big). fairseq's ``inverse_sqrt`` with ``--lr`` as the peak
reproduces it, so base uses 7e-4 and big 5e-4 (fairseq's scaling-NMT recipe also uses 5e-4
for big at this batch size; it uses 1e-3 only with a 4x larger batch). Dropout 0.1 (base) and
0.3 (big, En-De), no weight decay, no gradient clipping, embeddings shared (joined dictionary;
``separate_vocab``: separate source/target dictionaries, e.g. WMT17 Zh-En, share only the
decoder's input and output embeddings). Vaswani average the last 5 (base) / 20 (big)
checkpoints; we save every 1000 updates. ``tokens_per_update`` sets another batch than
8 x 4096 tokens (Pande et al.'s En-Ru: 25K).

``tiny`` and ``cpu`` shrink the model through CLI overrides of the arch's dimensions, so any
``--arch`` (plain fairseq or a localnmt preset) can be smoke-tested on a laptop.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

if __package__:
    from localnmt.runs.batching import PAPER_TOKENS_PER_UPDATE, update_freq
else:  # run as a file by train.sh: skip importing the plugin (fairseq start-up takes seconds)
    from batching import PAPER_TOKENS_PER_UPDATE, update_freq  # type: ignore[no-redef]


@dataclass(frozen=True)
class Recipe:
    """One training setting; ``dims`` are (embed, ffn, heads, layers) or None for the arch's."""

    lr: float
    dropout: float
    warmup: int
    max_update: int
    max_tokens: int
    average_last: int
    save_interval_updates: int = 0
    keep_last: int = 5
    scale_batch: bool = True
    dims: tuple[int, int, int, int] | None = None
    extra: tuple[str, ...] = field(default_factory=tuple)


RECIPES: dict[str, Recipe] = {
    "base": Recipe(
        lr=7e-4,
        dropout=0.1,
        warmup=4000,
        max_update=100_000,
        max_tokens=4096,
        average_last=5,
        save_interval_updates=1000,
        keep_last=20,
    ),
    "big": Recipe(
        lr=5e-4,
        dropout=0.3,
        warmup=4000,
        max_update=300_000,
        max_tokens=4096,
        average_last=20,
        save_interval_updates=1000,
        keep_last=20,
    ),
    # CPU quickstart: a shrunk base model, bounded by wall clock (--stop-time-hours).
    "cpu": Recipe(
        lr=1e-3,
        dropout=0.1,
        warmup=100,  # quickstart budgets give a few hundred updates per system on 2 cores
        max_update=20_000,
        max_tokens=4096,
        average_last=0,
        keep_last=2,
        scale_batch=False,
        dims=(256, 1024, 4, 3),
    ),
    # Smoke tests: seconds per row.
    "tiny": Recipe(
        lr=1e-3,
        dropout=0.1,
        warmup=50,
        max_update=200,
        max_tokens=1024,
        average_last=2,
        keep_last=3,
        scale_batch=False,
        dims=(64, 128, 4, 6),
    ),
}


def dim_overrides(embed: int, ffn: int, heads: int, layers: int) -> list[str]:
    """fairseq CLI overrides shrinking encoder and decoder to the given dimensions."""
    args: list[str] = []
    for side in ("encoder", "decoder"):
        args += [
            f"--{side}-embed-dim",
            str(embed),
            f"--{side}-ffn-embed-dim",
            str(ffn),
            f"--{side}-attention-heads",
            str(heads),
            f"--{side}-layers",
            str(layers),
        ]
    return args


def train_args(
    size: str,
    world_size: int = 1,
    max_tokens: int | None = None,
    max_update: int | None = None,
    layers: int | None = None,
    tokens_per_update: int | None = None,
    separate_vocab: bool = False,
) -> list[str]:
    """fairseq-train arguments (without data, arch, save dir) for one recipe."""
    recipe = RECIPES[size]
    tokens = max_tokens or recipe.max_tokens
    target = tokens_per_update or PAPER_TOKENS_PER_UPDATE
    freq = update_freq(world_size, tokens, target) if recipe.scale_batch else 1
    args = [
        "--share-decoder-input-output-embed" if separate_vocab else "--share-all-embeddings",
        "--optimizer",
        "adam",
        "--adam-betas",
        "(0.9, 0.98)",
        "--adam-eps",
        "1e-09",
        "--clip-norm",
        "0.0",
        "--weight-decay",
        "0.0",
        "--lr",
        str(recipe.lr),
        "--lr-scheduler",
        "inverse_sqrt",
        "--warmup-updates",
        str(recipe.warmup),
        "--warmup-init-lr",
        "1e-07",
        "--dropout",
        str(recipe.dropout),
        "--criterion",
        "label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
        "--max-tokens",
        str(tokens),
        "--update-freq",
        str(freq),
        "--max-update",
        str(max_update or recipe.max_update),
        "--log-format",
        "simple",
        "--log-interval",
        "100" if size in ("base", "big") else "10",
        "--no-progress-bar",
    ]
    if recipe.save_interval_updates:
        args += [
            "--save-interval-updates",
            str(recipe.save_interval_updates),
            "--keep-interval-updates",
            str(recipe.keep_last),
            "--no-epoch-checkpoints",
        ]
    else:
        args += ["--keep-last-epochs", str(recipe.keep_last)]
    if recipe.dims is not None:
        embed, ffn, heads, n_layers = recipe.dims
        args += dim_overrides(embed, ffn, heads, layers or n_layers)
    elif layers:
        args += ["--encoder-layers", str(layers), "--decoder-layers", str(layers)]
    return args + list(recipe.extra)


def main(argv: list[str] | None = None) -> None:
    """CLI: print fairseq-train arguments one per line (for ``mapfile`` in train.sh)."""
    parser = argparse.ArgumentParser(description="Print fairseq-train args of a recipe.")
    parser.add_argument("--size", choices=sorted(RECIPES), default="base")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--max-update", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument(
        "--tokens-per-update",
        type=int,
        help=f"batch in tokens reached with --update-freq (default {PAPER_TOKENS_PER_UPDATE})",
    )
    parser.add_argument(
        "--separate-vocab",
        action="store_true",
        help="separate source/target dictionaries: share decoder embeddings only",
    )
    parser.add_argument(
        "--average-last",
        action="store_true",
        help="print how many checkpoints the recipe averages, and exit",
    )
    args = parser.parse_args(argv)
    if args.average_last:
        print(RECIPES[args.size].average_last)
        return
    for arg in train_args(
        args.size,
        args.world_size,
        args.max_tokens,
        args.max_update,
        args.layers,
        args.tokens_per_update,
        args.separate_vocab,
    ):
        print(arg)


if __name__ == "__main__":
    main()
