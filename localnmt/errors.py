"""The project's errors, one family, and the one way a command ends with them.

Every problem a user can fix (a wrong option, missing or malformed data, a config file that
does not match its schema, an attention spec that names a layer the model lacks) is a
:class:`LocalnmtError`. A command's ``main`` is wrapped in :func:`entry_point`, which prints
such an error as one line, ``PROG: error: MESSAGE`` (argparse's own format), and exits with
the error's status: 2 for the user's mistakes, 1 for a training that failed.

This module imports only the standard library: everything else in the package may use it.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class LocalnmtError(Exception):
    """A problem the user can fix, said in one line; ``exit_status`` is what a command
    ending with it returns."""

    exit_status = 2


class UsageError(LocalnmtError):
    """A wrong option or a missing input, found before any long work starts."""


class ConfigError(LocalnmtError, ValueError):
    """A config file (``configs/*.yaml``) that does not match its schema; the message names
    the file and the key."""


class DataError(LocalnmtError):
    """Input data that cannot be used (missing, misaligned, truncated, undecodable)."""


class ChecksumError(DataError):
    """A downloaded file whose checksum is not the published or recorded one."""


class CheckpointError(DataError):
    """A checkpoint that cannot be loaded: missing, damaged, or refused as unsafe to
    unpickle (:mod:`localnmt.safe_load`)."""


class TrainFailed(LocalnmtError):
    """fairseq-train exited with an error (its log names the cause); a command ending with
    it exits with the trainer's status (1 at least; 130 after Ctrl-C)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.exit_status = status if status > 0 else 1


class BusyError(LocalnmtError):
    """A directory another live process is working in (its lock names the process)."""


def report(prog: str, err: BaseException) -> None:
    """Print ``err`` as the one line a command ends with."""
    print(f"{prog}: error: {err}", file=sys.stderr, flush=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (children stopped, finished
    work kept)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


def stop_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` in this process (main thread only). A process
    forked from it (a ``multiprocessing`` worker) gets the default SIGTERM back: a pool's
    ``terminate`` must end its workers, not raise inside their queue locks."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


_TERM = {signal.SIGTERM}


def _ours() -> bool:
    return signal.getsignal(signal.SIGTERM) is _raise_terminated


def _block_sigterm_across_fork() -> None:
    # A SIGTERM that reached the child between fork() and the reset below would be dropped
    # (CPython clears the signals its handler caught before the fork), leaving a worker that
    # a pool's terminate cannot end: keep it pending until the child has the default back.
    if _ours():
        signal.pthread_sigmask(signal.SIG_BLOCK, _TERM)


def _unblock_sigterm_in_parent() -> None:
    if _ours():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _TERM)


def _default_sigterm_in_forked_child() -> None:
    if _ours():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _TERM)


os.register_at_fork(
    before=_block_sigterm_across_fork,
    after_in_parent=_unblock_sigterm_in_parent,
    after_in_child=_default_sigterm_in_forked_child,
)


def entry_point(
    prog: str, *, kept: str = "finished work is kept"
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Wrap a command's ``main``: a :class:`LocalnmtError` is printed as ``PROG: error:
    MESSAGE`` and the command exits with its ``exit_status``; an ``OSError`` that reaches the
    top (a full disk, a read-only or missing path) likewise, naming the path and the reason,
    exit status 2. SIGTERM is turned into an interruption like Ctrl-C: the child processes
    the command started are stopped and waited for, and it exits with 130 (143 for SIGTERM)
    after one line, ``PROG: terminated; KEPT``."""

    def wrap(main: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> T:
            previous = signal.getsignal(signal.SIGTERM)
            stop_on_sigterm()
            try:
                return main(*args, **kwargs)
            except LocalnmtError as err:
                report(prog, err)
                raise SystemExit(err.exit_status) from None
            except OSError as err:
                report(prog, os_error_text(err))
                raise SystemExit(2) from None
            except KeyboardInterrupt as err:
                terminated = isinstance(err, Terminated)
                print(f"{prog}: {'terminated' if terminated else 'interrupted'}; {kept}",
                      file=sys.stderr, flush=True)  # fmt: skip
                raise SystemExit(143 if terminated else 130) from None
            finally:  # a main called from Python leaves the process as it found it
                if threading.current_thread() is threading.main_thread() and previous is not None:
                    signal.signal(signal.SIGTERM, previous)

        return run

    return wrap


_RERUN = "run the same command again: finished steps are kept"

#: what to do about a file-system error, by errno
OS_ERROR_ADVICE = {
    errno.ENOSPC: f"the disk is full; free some space and {_RERUN}",
    errno.EDQUOT: f"the disk quota is used up; free some space and {_RERUN}",
    errno.EROFS: "the file system is read-only; choose a --workdir on a writable one",
    errno.EACCES: "no permission; choose a --workdir you can write to, or fix its permissions",
    errno.EPERM: "not permitted; choose a --workdir you can write to, or fix its permissions",
    errno.ENOTDIR: "a part of this path is a file, not a directory",
    errno.EEXIST: "a file is in the way of a directory",
    errno.ENOENT: "no such file or directory",
}


def os_error_text(err: OSError, *, known_path: Path | str | None = None) -> str:
    """``PATH: REASON (ADVICE)`` of a file-system error, as one line (``/data/x: No space
    left on device (the disk is full; ...)``); no PATH when it is ``known_path``, which the
    message names already."""
    paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
    if known_path is not None and paths == [str(known_path)]:
        paths = []
    reason = err.strerror or str(err) or type(err).__name__
    text = f"{' -> '.join(paths)}: {reason}" if paths else reason
    advice = OS_ERROR_ADVICE.get(err.errno) if err.errno is not None else None
    return f"{text} ({advice})" if advice else text
