"""One process per working directory.

A workdir, run directory or save directory is held by the process working in it: a lock file,
``<dir>/.lock``, locked with ``flock`` and holding the holder's PID, host, command and start
time. A second process that wants the directory stops at once with one message naming the
holder (:class:`~localnmt.errors.BusyError`, exit 2). The kernel releases the lock when its
holder dies, however it dies, so a lock left by a killed process is taken over by the next
run without any cleaning up. A process may hold a directory more than once (nested steps):
it is released when the last holder lets go, or when the process ends.

This module imports only the standard library and :mod:`localnmt.errors`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from localnmt.errors import BusyError

LOCK_NAME = ".lock"

#: directories this process holds: resolved path -> [open lock file, hold count]
_HELD: dict[Path, list] = {}


def holder(directory: Path) -> dict | None:
    """What the lock file of ``directory`` says about its last holder (None: no lock file)."""
    try:
        return json.loads((Path(directory) / LOCK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _describe(info: dict | None) -> str:
    if not info:
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("since", 0)))
    return (f"process {info.get('pid')} on {info.get('host')} (`{info.get('command')}`, "
            f"since {since})")  # fmt: skip


def _command() -> str:
    """This process's command line as typed (``python -m localnmt.quickstart --workdir w``),
    shortened."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv:
        argv[0] = os.path.basename(argv[0])
    return " ".join(argv)[:300]


def acquire(directory: Path) -> None:
    """Hold ``directory`` for this process (again, if it already does); :class:`BusyError`
    when another live process holds it."""
    directory = Path(directory).resolve()
    if directory in _HELD:
        _HELD[directory][1] += 1
        return
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    f = open(path, "a+", encoding="utf-8")  # noqa: SIM115  (kept open while held)
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise BusyError(
            f"{directory} is in use by {_describe(holder(directory))}; wait for it to finish "
            "or stop it (two runs in one directory would overwrite each other's checkpoints "
            "and logs)"
        ) from None
    except OSError:
        f.close()  # a file system without flock: run unlocked rather than not at all
        _HELD[directory] = [None, 1]
        return
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command(),
            "since": time.time()}  # fmt: skip
    f.seek(0)
    f.truncate()
    f.write(json.dumps(info) + "\n")
    f.flush()
    _HELD[directory] = [f, 1]


def release(directory: Path) -> None:
    """Let go of ``directory`` once (the lock is freed when no hold is left)."""
    directory = Path(directory).resolve()
    held = _HELD.get(directory)
    if held is None:
        return
    held[1] -= 1
    if held[1] > 0:
        return
    del _HELD[directory]
    if held[0] is not None:
        fcntl.flock(held[0].fileno(), fcntl.LOCK_UN)
        held[0].close()


@contextlib.contextmanager
def hold(directory: Path) -> Iterator[None]:
    """Hold ``directory`` while the block runs."""
    acquire(directory)
    try:
        yield
    finally:
        release(directory)
