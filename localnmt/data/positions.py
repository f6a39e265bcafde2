"""Sentences longer than a model's positions, found before training or decoding and named by
line (fairseq would otherwise stop mid-run on them, or skip them and lose test sentences)."""

from __future__ import annotations

from collections.abc import Iterable

#: fairseq's default ``--max-source-positions`` / ``--max-target-positions`` (translation task
#: and every Transformer architecture), in subword tokens with the end-of-sentence token.
DEFAULT_MAX_POSITIONS = 1024


def first_too_long(lengths: Iterable[int], limit: int) -> tuple[int, int] | None:
    """``(index, length)`` of the first length above ``limit``, or None."""
    for index, length in enumerate(lengths):
        if length > limit:
            return index, int(length)
    return None


def too_long_message(where: str, line: int, tokens: int, limit: int, side: str = "source") -> str:
    """``where line N: T subword tokens, more than the model's L source positions; ...``"""
    return (
        f"{where} line {line}: {tokens} subword tokens, more than the model's {limit} {side} "
        "positions; split the line"
    )
