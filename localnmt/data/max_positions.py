"""Sentences longer than a model's positions, found before training or decoding and named by
line (fairseq would otherwise stop mid-run on them, or skip them and lose test sentences)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from localnmt.data.validate import iter_lines_checked
from localnmt.steps import Log

#: fairseq's default ``--max-source-positions`` / ``--max-target-positions`` (translation task
#: and every Transformer architecture), in subword tokens with the end-of-sentence token.
DEFAULT_MAX_POSITIONS = 1024

#: ``--max-positions`` of the data-preparation commands.
MAX_POSITIONS_HELP = (
    "flag validation and test lines longer than N subword tokens (with </s>), which a model "
    "with N positions cannot translate (default 1024, fairseq's; 0: no check)"
)


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


def long_lines(path: Path, limit: int) -> list[tuple[int, int]]:
    """``(line number, tokens)`` of the lines of a subword file longer than ``limit``
    positions, counting the end-of-sentence token fairseq appends."""
    found = []
    for number, line in enumerate(iter_lines_checked(path), start=1):
        tokens = len(line.split()) + 1
        if tokens > limit:
            found.append((number, tokens))
    return found


def flag_long_lines(paths: Iterable[Path], limit: int, log: Log = print) -> int:
    """Log a warning per file with lines longer than ``limit`` positions (0: no check), naming
    the first such line; returns how many lines were flagged. Test and validation sentences
    are never dropped, so a model with ``limit`` positions cannot translate these."""
    if limit <= 0:
        return 0
    total = 0
    for path in paths:
        found = long_lines(path, limit)
        if found:
            number, tokens = found[0]
            others = len(found) - 1
            more = f" ({others} more such line{'s' * (others > 1)} in it)" if others else ""
            log(f"warning: {path} line {number}: {tokens} subword tokens (with </s>), more "
                f"than {limit} positions{more}; a model with {limit} positions cannot translate "
                "it: split the line, or train with more --max-source-positions and "
                "--max-target-positions (and set this check with --max-positions)")  # fmt: skip
        total += len(found)
    return total
