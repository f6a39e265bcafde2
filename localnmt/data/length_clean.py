"""Length and ratio cleaning of a parallel corpus (semantics of Moses clean-corpus-n.perl)."""

from __future__ import annotations

from pathlib import Path

from localnmt.atomic import atomic_open
from localnmt.data.validate import iter_lines_checked


def keep_pair(src: str, tgt: str, min_len: int, max_len: int, ratio: float) -> bool:
    """Moses rule: both sides within [min_len, max_len] tokens, neither ratio above ``ratio``."""
    ls, lt = len(src.split()), len(tgt.split())
    if ls < min_len or lt < min_len or ls > max_len or lt > max_len:
        return False
    return ls / lt <= ratio and lt / ls <= ratio


def clean_corpus(
    src_in: Path, tgt_in: Path, src_out: Path, tgt_out: Path,
    *, min_len: int, max_len: int, ratio: float,
) -> tuple[int, int]:  # fmt: skip
    """Filter aligned files; return (lines read, lines kept)."""
    n = kept = 0
    with atomic_open(src_out) as fs, atomic_open(tgt_out) as ft:
        for s, t in zip(iter_lines_checked(src_in), iter_lines_checked(tgt_in), strict=True):
            n += 1
            if keep_pair(s, t, min_len, max_len, ratio):
                fs.write(s + "\n")
                ft.write(t + "\n")
                kept += 1
    return n, kept
