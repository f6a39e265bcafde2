"""Files written whole or not at all: a temporary sibling, flushed to disk, renamed on success.

A kill, a full disk or an exception while writing leaves the previous file (or none), never a
truncated one. This module imports only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def temporary_sibling(path: Path) -> Path:
    """The name a file is written under before it is renamed onto ``path`` (hidden, and
    unique to this process)."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def fsync_path(path: Path) -> None:
    """Flush a written file (or every file under a written folder) to disk."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_path(path: Path, *, sync: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling path; rename it onto ``path`` only on success (``sync``:
    flush it to disk first, for files that must survive a crash of the machine too)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    _remove(tmp)
    try:
        yield tmp
        if sync:
            fsync_path(tmp)
    except BaseException:
        _remove(tmp)
        raise
    if tmp.is_dir() and path.is_dir():
        old = path.with_name(f".{path.name}.old{os.getpid()}")
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file for writing; rename it onto ``path`` when closed cleanly."""
    with atomic_path(path) as tmp:
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with open(tmp, mode, **kwargs) as f:
            yield f


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically."""
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.write("\n")


def write_text(path: Path, text: str) -> None:
    """Write text atomically."""
    with atomic_open(path) as f:
        f.write(text)
