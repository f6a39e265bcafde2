"""What machine a result came from: numbers mean nothing without it."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class MachineSummary:
    """CPU, cores, GPU (None: none), torch and Python versions, and the load averages when
    the summary was taken (None where the system has none)."""

    cpu: str
    cores: int | None
    gpu: str | None
    torch: str
    python: str
    load_average: list[float] | None

    def to_json(self) -> dict[str, Any]:
        """As reports keep it (these keys, in this order)."""
        return {"cpu": self.cpu, "cores": self.cores, "gpu": self.gpu, "torch": self.torch,
                "python": self.python, "load_average": self.load_average}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MachineSummary:
        return cls(data["cpu"], data["cores"], data.get("gpu"), data["torch"],
                   data.get("python", ""), data.get("load_average"))  # fmt: skip

    def describe(self) -> str:
        """One line: ``AMD EPYC ... , 2 cores, no GPU, torch 2.13.0, load 0.4``."""
        load = self.load_average
        return f"{self.cpu}, {self.cores} cores, {self.gpu or 'no GPU'}, torch {self.torch}" + (
            f", load {load[0]:.1f}" if load else ""
        )


def machine_summary() -> MachineSummary:
    """CPU, cores, GPU (if any), torch version and the load now."""
    import torch

    return MachineSummary(
        cpu=cpu_model(),
        cores=os.cpu_count(),
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        torch=torch.__version__,
        python=platform.python_version(),
        load_average=load_average(),
    )


def describe_machine(info: Mapping[str, Any]) -> str:
    """:meth:`MachineSummary.describe` of a summary as JSON keeps it (the benches' dicts)."""
    return MachineSummary.from_json(info).describe()


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
