"""Effective batch size: how many gradient-accumulation steps match the papers' batch."""

from __future__ import annotations

import argparse
import math

from localnmt.errors import entry_point

#: The papers (Yang et al. 2018, 2019; Vaswani et al. 2017 as re-run by them) train on
#: 8 GPUs with 4096 tokens each, i.e. about 32k tokens per update.
PAPER_GPUS = 8
PAPER_MAX_TOKENS = 4096
PAPER_TOKENS_PER_UPDATE = PAPER_GPUS * PAPER_MAX_TOKENS


def update_freq(
    world_size: int, max_tokens: int, target_tokens: int = PAPER_TOKENS_PER_UPDATE
) -> int:
    """Return ``--update-freq`` so that ``world_size * max_tokens * freq >= target_tokens``.

    ``update_freq = ceil(target_tokens / (world_size * max_tokens))``, at least 1. With the
    papers' own setting (8 GPUs x 4096 tokens) it is 1; one GPU with 4096 tokens gives 8;
    one GPU with 3584 tokens gives ceil(32768 / 3584) = 10.
    """
    if world_size < 1 or max_tokens < 1 or target_tokens < 1:
        raise ValueError("world_size, max_tokens and target_tokens must be positive")
    return max(1, math.ceil(target_tokens / (world_size * max_tokens)))


@entry_point("python -m localnmt.batching")
def main(argv: list[str] | None = None) -> None:
    """CLI: print the update frequency for a world size and per-GPU max tokens."""
    parser = argparse.ArgumentParser(prog="python -m localnmt.batching",
                                     description=update_freq.__doc__)  # fmt: skip
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--max-tokens", type=int, required=True)
    parser.add_argument("--target-tokens", type=int, default=PAPER_TOKENS_PER_UPDATE)
    args = parser.parse_args(argv)
    print(update_freq(args.world_size, args.max_tokens, args.target_tokens))


if __name__ == "__main__":
    main()
