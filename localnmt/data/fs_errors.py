"""File-system errors of data preparation as one line: the path, the reason, what to do.

A full disk, a read-only file system or a ``--workdir`` that is a file stop a data command with
``PROG: error: PATH: REASON (ADVICE)`` and exit 2, not a traceback. Steps that finished stay
finished (their outputs are renamed into place only when complete), so the same command, run
again once the cause is fixed, resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from localnmt.errors import DataError, os_error_text


def check_workdir(workdir: Path, option: str = "--workdir") -> Path:
    """``workdir`` is (or can be made) a directory one can write to; else a
    :class:`~localnmt.errors.DataError` naming it, before any long work starts."""
    workdir = Path(workdir)
    if workdir.exists() and not workdir.is_dir():
        raise DataError(f"{option} {workdir} is a file; give a directory (made if missing)")
    probe = workdir / f".write-test.{os.getpid()}"
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        reason = os_error_text(err, known_path=workdir)
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
