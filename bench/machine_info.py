"""What machine a benchmark ran on: stated in every output (numbers mean nothing without it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import torch

from localnmt.machine import cpu_model, machine_summary


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def pick_device(name: str | None) -> torch.device:
    """``--device``: explicit, or CUDA when available, else CPU."""
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def machine_info(device: torch.device) -> dict[str, Any]:
    """CPU model, cores, threads, torch/fairseq versions, device, load at start."""
    import fairseq

    info: dict[str, Any] = {
        **machine_summary().to_json(),  # cpu, cores, gpu, torch, python, load_average
        "torch_threads": torch.get_num_threads(),
        "fairseq": getattr(fairseq, "__version__", "?"),
        "device": str(device),
        "device_name": cpu_model(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "git_commit": git_commit(),
    }
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


def describe(info: dict[str, Any]) -> str:
    """One line for markdown headers and plot titles."""
    load = info.get("load_average")
    load_text = f", load {load[0]:.1f}" if load else ""
    policy = info.get("omp_wait_policy") or "torch's default"
    return (
        f"{info['device_name']} ({info['device']}), {info['cores']} cores, "
        f"{info['torch_threads']} torch threads (OpenMP wait policy: {policy}), "
        f"torch {info['torch']}, fairseq {info['fairseq']}{load_text}"
    )
