"""What machine a result came from: numbers mean nothing without it."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """CPU model name from ``/proc/cpuinfo`` (Linux), else ``platform.processor()``."""
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """1, 5 and 15-minute load averages, where the system has them."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_summary() -> dict[str, Any]:
    """CPU, cores, GPU (if any), torch version and the load now."""
    import torch

    info: dict[str, Any] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load_average": load_average(),
    }
    return info


def describe_machine(info: dict[str, Any]) -> str:
    """One line: ``AMD EPYC ... , 2 cores, no GPU, torch 2.13.0, load 0.4``."""
    load = info.get("load_average")
    return (
        f"{info['cpu']}, {info['cores']} cores, {info.get('gpu') or 'no GPU'}, "
        f"torch {info['torch']}" + (f", load {load[0]:.1f}" if load else "")
    )


def available_memory() -> int | None:
    """Bytes that new work can take without swapping: ``MemAvailable`` of ``/proc/meminfo``,
    or less where a cgroup (v2) limits this process; None where neither is known."""
    found = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            free = max(0, int(limit) - used)
            found = free if found is None else min(found, free)
    except (OSError, ValueError):
        pass
    return found


def gpu_available_memory() -> int | None:
    """Free bytes of the visible GPU with the least free memory (each training process holds
    its own batch on its own GPU); None without a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return min(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))
    except Exception:  # no driver, a busy device: nothing known
        return None
