"""Timing and peak memory of one callable, and A/B interleaved timing of several.

Time: ``time.perf_counter`` around the call on CPU; CUDA events with a synchronize on GPU.
``use_clock("cpu")`` times CPU calls by the process's CPU time instead (``time.process_time``:
every thread's, user and system): on a shared machine, time other processes take from our
threads is then not counted, though their pressure on caches and memory still is. With
``OMP_WAIT_POLICY=PASSIVE`` (the ``bench`` package sets it) idle torch threads sleep rather
than spin, so they add nothing to it. A call that waits on something else than the CPU would
read as fast: the benchmarks here are CPU-bound.
Peak memory (bytes allocated by torch during the call, above what was live before it):

- GPU: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``.
- CPU: the torch profiler with ``profile_memory=True``: every allocation and free of the call
  is an event; the peak of their running sum is the call's peak. Chosen over the resident-set
  delta, which the allocator's caching and never-shrinking peak RSS make meaningless for
  repeated measurements in one process, and over ``tracemalloc``, which does not see torch.
  The profiled call is a separate run, never one of the timed ones.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

import torch

#: name → clock of :func:`time_call` on CPU
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
_clock: Callable[[], float] = time.perf_counter


def use_clock(name: str) -> None:
    """Time CPU calls by ``"wall"`` (default) or ``"cpu"`` (process CPU) seconds."""
    global _clock
    if name not in CLOCKS:
        raise ValueError(f"clock {name!r}: use one of {', '.join(CLOCKS)}")
    _clock = CLOCKS[name]


@contextmanager
def switched(settings: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Attributes ``(owner, name, value)`` set for the duration, restored after (even on an
    error): how a benchmark times one form of the code, switches and patched methods set."""
    with ExitStack() as stack:
        for owner, name, value in settings:
            stack.enter_context(mock.patch.object(owner, name, value))
        yield


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds of one ``fn()`` by the clock of :func:`use_clock` (CUDA: event time,
    synchronized)."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        synchronize(device)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    begin = _clock()
    fn()
    return _clock() - begin


def interleaved(
    fns: dict[str, Callable[[], object]],
    device: torch.device,
    *,
    warmup: int,
    repeats: int,
) -> dict[str, list[float]]:
    """Seconds per call of each function, A/B interleaved: every repeat calls each function
    once (the order alternates between repeats, so a slow drift of the machine hits all
    alike). ``warmup`` untimed rounds first."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    synchronize(device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(time_call(fns[name], device))
    return times


def median_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over repeats of ``numerator[i] / denominator[i]`` (paired, same repeat)."""
    return statistics.median(n / d for n, d in zip(numerator, denominator) if d > 0)


def ratio_quartiles(numerator: list[float], denominator: list[float]) -> tuple[float, float]:
    """First and third quartile over repeats of the paired ratios of :func:`median_ratio`
    (the spread its median comes with; both the one ratio where there is one)."""
    ratios = [n / d for n, d in zip(numerator, denominator) if d > 0]
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    first, _, third = statistics.quantiles(ratios, n=4, method="inclusive")
    return first, third


def peak_memory(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes torch allocates during ``fn()`` above what was live before (see module doc)."""
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    return cpu_peak_memory(fn)


def cpu_peak_memory(fn: Callable[[], object]) -> int:
    """Peak of the running sum of CPU allocation events recorded by the torch profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = _memory_events(prof)
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return int(peak)


def _memory_events(prof) -> list[tuple[int, int]]:
    """``(time ns, bytes)`` of the profile's CPU allocation (+) and free (−) events."""
    out = []
    for event in prof.profiler.kineto_results.events():
        if event.name() != "[memory]":
            continue
        if str(event.device_type()).split(".")[-1] != "CPU":
            continue
        out.append((_start_ns(event), event.nbytes()))
    out.sort(key=lambda e: e[0])  # stable: events of the same instant keep their order
    return out


def _start_ns(event) -> int:
    """An event's start in ns (torch before 2.2 records microseconds only)."""
    if hasattr(event, "start_ns"):
        return event.start_ns()
    return event.start_us() * 1000
