"""Input validation before long work: presence, gzip integrity, UTF-8, aligned line counts."""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from localnmt.errors import DataError


def not_regular(path: Path) -> str | None:
    """Why ``path`` cannot be read as a corpus file: missing, or there but no regular file
    (a FIFO or a link to ``/dev/null`` reads once, or as empty); None for a regular file."""
    if path.is_file():
        return None
    if not path.exists():
        return f"missing input file: {path}"
    mode = path.stat().st_mode
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a character device" if stat.S_ISCHR(mode) else "a socket or device")  # fmt: skip
    link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
    return (f"{path} is {kind}{link}, not a regular file: the corpus is read more than once "
            "(validated, then tokenised); give a regular file")  # fmt: skip


def iter_lines_checked(path: Path) -> Iterator[str]:
    """Yield decoded lines (without newline) of a plain or .gz file, raising DataError on
    a missing file, a truncated/corrupt gzip or invalid UTF-8 (with the line number)."""
    path = Path(path)
    if problem := not_regular(path):
        raise DataError(problem)
    opener = gzip.open if path.suffix == ".gz" else open
    if path.suffix == ".gz" and path.stat().st_size == 0:
        raise DataError(f"{path}: empty gzip file (truncated download?)")
    lines = 0
    try:
        with opener(path, "rb") as f:
            for lines, line in enumerate(decode_lines(f, path), start=1):  # noqa: B007
                yield line
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise DataError(
            f"{path}: truncated or corrupt gzip after line {lines} ({e}); download it again"
        ) from None


def decode_lines(stream: BinaryIO, name: object) -> Iterator[str]:
    """Decoded lines (without ``\r\n``) of a binary stream, e.g. ``sys.stdin.buffer``;
    DataError naming ``name`` and the line on invalid UTF-8."""
    for lineno, raw in enumerate(stream, start=1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise DataError(
                f"{name}:{lineno}: invalid UTF-8 (byte {e.start} of the line: "
                f"{raw[max(0, e.start - 10) : e.start + 10]!r})"
            ) from None


def count_lines_checked(path: Path) -> int:
    """Number of lines, after full validation of the file."""
    n = 0
    for _ in iter_lines_checked(path):
        n += 1
    return n


def validate_parallel(src: Path, tgt: Path) -> int:
    """Validate both sides of a parallel corpus; return the common line count."""
    for p in (src, tgt):
        if problem := not_regular(Path(p)):
            raise DataError(problem)
    n_src, n_tgt = count_lines_checked(src), count_lines_checked(tgt)
    if n_src != n_tgt:
        raise DataError(
            f"line counts differ: {src} has {n_src} lines, {tgt} has {n_tgt} "
            f"(first unmatched line: {min(n_src, n_tgt) + 1})"
        )
    if n_src == 0:
        raise DataError(f"empty corpus: {src}")
    return n_src
