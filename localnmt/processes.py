"""The processes the project starts (fairseq's train, generate and preprocess): their
environment, and their end.

**Threads on a shared machine.** torch's CPU kernels run on OpenMP threads, and by default an
idle OpenMP thread spins, waiting for the next parallel region, instead of sleeping: the
fastest setting alone, a collapse when two trainings keep four threads on two cores (7
updates each in 45 s where one alone made 359). A child keeps torch's default, and the
trainings and decodings the project runs set their thread count from what else runs instead
(:mod:`localnmt.core_share`, installed by :mod:`localnmt.runs.fairseq_entry`): the measured
effect per method is in ``bench/README.md`` (``python -m bench.concurrency``). Several
processes per node on the CPU (``--cpu --procs N``) also get ``OMP_NUM_THREADS`` = cores / N
unless it is set, so that they do not oversubscribe the node from their start.

**Their end.** A child dies with its launcher: on Linux the kernel sends it SIGTERM when the
launcher dies, even by SIGKILL (``PR_SET_PDEATHSIG``). When the launcher is interrupted
(Ctrl-C, SIGTERM, an error), :func:`run` and :func:`stop` end the child first, SIGTERM and
then, after a grace period, SIGKILL, and wait for it: no trainer is left writing into a
directory nobody watches.

This module imports only the standard library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def child_environment(
    procs_per_node: int = 1, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a child: ``base`` (default this process's), with ``procs_per_node``
    > 1 an ``OMP_NUM_THREADS`` that shares the cores among them (where unset)."""
    env = dict(os.environ if base is None else base)
    if procs_per_node > 1:
        env.setdefault("OMP_NUM_THREADS", str(max(1, usable_cores() // procs_per_node)))
    return env


def die_with_parent() -> None:
    """In a child, before it runs: have the kernel send it SIGTERM when its parent dies
    (Linux; elsewhere a child stops at its next write to the closed output pipe)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def start(cmd: list[str], *, procs_per_node: int = 1, **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(cmd, ...)`` with :func:`child_environment` (unless ``env`` is
    given) and :func:`die_with_parent`."""
    popen.setdefault("env", child_environment(procs_per_node))
    return subprocess.Popen(cmd, preexec_fn=die_with_parent, **popen)


def stop(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Stop a child: SIGTERM (a trainer finishes the checkpoint it is writing, torchrun stops
    its workers), then SIGKILL after ``grace_s``; wait for it either way."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run(
    cmd: list[str], *, timeout: float | None = None, **popen: Any
) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end like ``subprocess.run`` (``capture_output``, ``text``,
    ``timeout`` and the ``Popen`` arguments), started by :func:`start` and stopped by
    :func:`stop` if this process is interrupted (or the timeout passes) meanwhile."""
    if popen.pop("capture_output", False):
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    proc = start(cmd, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
