"""Share the CPU cores with whatever else runs on the machine, by thread count.

torch's OpenMP threads spin while they wait for the next parallel region (its default, what a
plain ``fairseq-train`` gets): the fastest setting alone, and a collapse as soon as the machine
has more busy threads than cores: two trainings of two threads each on two cores made a few
updates each where one alone made hundreds, and one training beside a test suite made 3 updates
in 15 s (each parallel region waits for threads that are not scheduled). Sleeping threads
(``OMP_WAIT_POLICY=PASSIVE``) share fairly but cost a training alone about a quarter of its
speed. Neither is needed when no process runs more threads than the cores left to it.

:class:`CoreShare` keeps torch's default and sets the thread count instead: between the
updates (or decoded batches) of a training or decoding localnmt runs, it samples, every
:data:`SAMPLE_S` seconds, the threads the machine runs that are not this process's
(``procs_running`` of ``/proc/stat`` less the running threads of this process and of its
children, the data loader's workers, read just before and just after it), and every
:data:`EVERY_S` seconds sets ``torch.set_num_threads(cores − others)``, where others is the
count that at least :data:`BUSY` of the samples reach (at least one thread, at most the
``OMP_NUM_THREADS`` the user set). Alone a training keeps every core; beside a second
training each settles at its half; beside other work it leaves that work its cores. Only the
thread count changes, never a number. The measured effect is in ``bench/README.md``
(``python -m bench.concurrency``). Linux only (elsewhere nothing changes).

This module imports only the standard library; torch is imported where threads are set.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: seconds between two samples of the machine's running threads
SAMPLE_S = 0.2
#: seconds between two decisions on the thread count
EVERY_S = 2.0


def machine_running(stat: str) -> int:
    """The runnable threads of the machine: ``procs_running`` of ``/proc/stat``'s text."""
    for line in stat.splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    raise ValueError("no procs_running line")


def task_running(stat: str) -> bool:
    """Whether a thread's ``/proc/PID/task/TID/stat`` text says it is running (state R)."""
    return stat.rsplit(")", 1)[-1].split()[0] == "R"


def _running_threads(pid: str) -> int:
    """Threads of process ``pid`` in state R (0 if it ended meanwhile)."""
    count = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                count += task_running(f.read())
        except OSError:  # the thread ended meanwhile
            pass
    return count


def _children(pid: str) -> list[str]:
    """The child processes of ``pid`` (its threads' ``children`` files)."""
    found: list[str] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found += f.read().split()
        except OSError:
            pass
    return found


def _own_running(pid: str) -> int:
    """Running threads of process ``pid`` and of its children."""
    return sum(_running_threads(p) for p in (pid, *_children(pid)))


def others_count(total: int, own_before: int, own_after: int) -> int:
    """The machine's ``total`` running threads less this process's, read just before and just
    after ``total``: an own thread that stopped or started between the reads (an OpenMP worker
    ending its spin) was running at one of them, so the larger count is this process's."""
    return max(0, total - max(own_before, own_after))


def others_running() -> int | None:
    """Runnable threads of the machine that are not this process's or its children's (the
    data loader's workers); None off Linux."""
    if not os.path.isdir("/proc/self/task"):
        return None
    own = str(os.getpid())
    before = _own_running(own)
    try:
        with open("/proc/stat", encoding="ascii") as f:
            total = machine_running(f.read())
    except (OSError, ValueError):
        return None
    return others_count(total, before, _own_running(own))


#: The share of the samples in which a thread of other work must be running to take a core.
#: A training alone reads a few transient threads (a log reader waking, a process starting);
#: their mean over a decision's window reached 0.8-0.9 at times and took a core from the
#: training for seconds (0.88 of plain fairseq-train alone in a 45-s window,
#: ``bench.concurrency``, 2026-11-27); a second training runs in nearly every sample.
BUSY = 0.75


def steady_others(samples: list[int]) -> int:
    """The count of other running threads that at least :data:`BUSY` of ``samples`` reach:
    work that runs steadily, not a spike."""
    ranked = sorted(samples, reverse=True)
    return ranked[max(1, math.ceil(len(ranked) * BUSY)) - 1]


def threads_for(cores: int, others: int, cap: int | None = None) -> int:
    """The threads to run beside ``others`` busy threads on ``cores``: the cores left, at least
    one, at most ``cap``."""
    left = max(1, cores - others)
    return min(left, cap) if cap else left


def user_thread_cap() -> int | None:
    """The ``OMP_NUM_THREADS`` the user set (a positive integer), else None."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _torch_set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


#: The first decision's samples, taken at once at the first tick, and the gap between them:
#: a training's first update is its slowest, and two trainings started together spin against
#: each other until they decide (decided on one sample, the first decision came 1 s or 3-5 s
#: after training began: 64-69 updates each in 20 s, or 49-61; ``bench.concurrency``,
#: 2026-11-27).
FIRST_SAMPLES = 5
FIRST_GAP_S = 0.02


class CoreShare:
    """This process's thread count: :meth:`tick` (call it in the loop, in the thread that runs
    torch) decides at its first call from :data:`FIRST_SAMPLES` samples of the others' running
    threads taken at once, then samples every ``sample_s`` and decides every ``every_s``
    seconds (:func:`steady_others` of the samples)."""

    def __init__(
        self,
        cores: int,
        cap: int | None = None,
        sample_s: float = SAMPLE_S,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        others: Callable[[], int | None] = others_running,
        set_threads: Callable[[int], None] = _torch_set_threads,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cores, self.cap, self.sample_s, self.every_s = cores, cap, sample_s, every_s
        self.clock, self.others, self.set_threads, self.sleep = clock, others, set_threads, sleep
        self.threads: int | None = None
        self.samples: list[int] = []
        self.last_sample = self.last_decision = clock()
        self.started = False

    def tick(self) -> None:
        """The first call: decide from samples taken now; later: sample if ``sample_s`` has
        passed, decide if ``every_s`` has passed."""
        now = self.clock()
        if not self.started:
            self.started = True
            for i in range(FIRST_SAMPLES):
                if i:
                    self.sleep(FIRST_GAP_S)
                self._sample()
            self.last_sample = now
            self._decide(now)
            return
        if now - self.last_sample >= self.sample_s:
            self.last_sample = now
            self._sample()
        if now - self.last_decision >= self.every_s:
            self._decide(now)

    def _sample(self) -> None:
        count = self.others()
        if count is not None:
            self.samples.append(count)

    def _decide(self, now: float) -> None:
        if not self.samples:
            return
        self.last_decision = now
        others = steady_others(self.samples)
        mean = sum(self.samples) / len(self.samples)
        threads = threads_for(self.cores, others, self.cap)
        self.samples.clear()
        if threads != self.threads:
            self.set_threads(threads)
            logger.info("%d thread(s): %d other threads running steadily (%.1f on average) "
                        "on %d cores", threads, others, mean, self.cores)  # fmt: skip
            self.threads = threads


def install_in_process() -> CoreShare | None:
    """This process's :class:`CoreShare`; None where torch's CPU threads are not OpenMP's
    (its native pool cannot be resized once it has run) or the machine is not Linux."""
    import torch

    from localnmt.processes import usable_cores

    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return None
    if others_running() is None:
        return None
    return CoreShare(usable_cores(), cap=user_thread_cap())
