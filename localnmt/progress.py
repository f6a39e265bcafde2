"""Progress bars for the long commands: tqdm's, with a rate and the time left, on stderr.

A bar is shown only where someone watches: when stderr is a terminal. Logs, pipes and tests
stay free of carriage returns. ``LOCALNMT_PROGRESS=1`` forces the bars on (``0`` off)
whatever stderr is, e.g. under ``script`` or a job scheduler that keeps a terminal log.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")
#: the environment variable that forces the bars on ("1") or off ("0")
ENV = "LOCALNMT_PROGRESS"


def enabled() -> bool:
    """Whether bars are shown: ``$LOCALNMT_PROGRESS`` if set to 0 or 1, else whether stderr
    is a terminal."""
    forced = os.environ.get(ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def bar(total: int | None = None, desc: str | None = None, unit: str = "it",
        show: bool = True, **kwargs: Any) -> tqdm:  # fmt: skip
    """A tqdm bar on stderr (disabled unless ``show`` and :func:`enabled`); use it as a context
    manager and ``update(n)`` it."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=not (show and enabled()), dynamic_ncols=True, **kwargs)  # fmt: skip


def lines_in(path: Path) -> int | None:
    """The newlines of a plain text file (a bar's total; None for a compressed or unreadable
    file)."""
    if path.suffix in (".gz", ".bz2", ".xz"):
        return None
    try:
        with open(path, "rb") as f:
            return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def track(iterable: Iterable[T], total: int | None = None, desc: str | None = None,
          unit: str = "it") -> Iterator[T]:  # fmt: skip
    """``iterable`` with a bar (its length as the total where it has one)."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with bar(total=total, desc=desc, unit=unit) as progress:
        for item in iterable:
            yield item
            progress.update(1)
