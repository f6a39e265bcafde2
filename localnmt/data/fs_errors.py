"""File-system errors of data preparation as one line: the path, the reason, what to do.

A full disk, a read-only file system or a ``--workdir`` that is a file stop a data command with
``error: PATH: REASON (ADVICE)`` and exit 2, not a traceback. Steps that finished stay finished
(their outputs are renamed into place only when complete), so the same command, run again once
the cause is fixed, resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from localnmt.data.steps import DataError

_RERUN = "run the same command again: finished steps are kept"

ADVICE = {
    errno.ENOSPC: f"the disk is full; free some space and {_RERUN}",
    errno.EDQUOT: f"the disk quota is used up; free some space and {_RERUN}",
    errno.EROFS: "the file system is read-only; choose a --workdir on a writable one",
    errno.EACCES: "no permission; choose a --workdir you can write to, or fix its permissions",
    errno.EPERM: "not permitted; choose a --workdir you can write to, or fix its permissions",
    errno.ENOTDIR: "a part of this path is a file, not a directory",
    errno.EEXIST: "a file is in the way of a directory",
    errno.ENOENT: "no such file or directory",
}


def describe_os_error(err: OSError, *, known_path: Path | None = None) -> str:
    """``PATH: REASON (ADVICE)`` of an ``OSError``, as one line (no PATH when it is
    ``known_path``, which the message names already)."""
    paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
    if known_path is not None and paths == [str(known_path)]:
        paths = []
    reason = err.strerror or str(err) or type(err).__name__
    text = f"{' -> '.join(paths)}: {reason}" if paths else reason
    advice = ADVICE.get(err.errno) if err.errno is not None else None
    return f"{text} ({advice})" if advice else text


def check_workdir(workdir: Path, option: str = "--workdir") -> Path:
    """``workdir`` is (or can be made) a directory one can write to; else a
    :class:`~localnmt.data.steps.DataError` naming it, before any long work starts."""
    workdir = Path(workdir)
    if workdir.exists() and not workdir.is_dir():
        raise DataError(f"{option} {workdir} is a file; give a directory (made if missing)")
    probe = workdir / f".write-test.{os.getpid()}"
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        reason = describe_os_error(err, known_path=workdir)
        raise DataError(f"{option} {workdir} cannot be written: {reason}") from None
    return workdir


@contextlib.contextmanager
def located_in(workdir: Path) -> Iterator[None]:
    """Give an ``OSError`` that names no path (a write on a full disk names none) ``workdir``
    as its path, so that its message says where."""
    try:
        yield
    except OSError as err:
        if err.filename is None:
            err.filename = str(workdir)
        raise


@contextlib.contextmanager
def writing_to(workdir: Path, option: str = "--workdir") -> Iterator[Path]:
    """:func:`check_workdir`, then :func:`located_in` it: the frame of a data command."""
    workdir = check_workdir(workdir, option)
    with located_in(workdir):
        yield workdir
