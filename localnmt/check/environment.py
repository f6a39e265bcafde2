"""What this install runs on: Python, torch, fairseq, transformers (for ``localnmt.hf``), the
device, the C extensions, FlexAttention and CPU threads (in the spirit of ``python -m
torch.utils.collect_env``)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Any

import torch

from localnmt.machine import cpu_model, load_average


def _version(*distributions: str) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def transformers_status() -> dict[str, Any]:
    """The installed transformers (read from its metadata: not imported) and whether
    ``localnmt.hf`` takes it (:mod:`localnmt.hf.versions`), T5's family included."""
    from localnmt.hf.versions import BEYOND, OLDEST, REQUIREMENT, T5_DISPATCH, release

    version = _version("transformers")
    if version is None:
        return {"version": None, "supported": False, "t5": False, "requirement": REQUIREMENT}
    found = release(version)
    return {"version": version, "supported": OLDEST <= found < BEYOND,
            "t5": release(T5_DISPATCH) <= found < BEYOND, "requirement": REQUIREMENT}  # fmt: skip


def format_transformers(status: dict[str, Any]) -> str:
    """One line: the version and what ``localnmt.hf`` does with it."""
    need = status["requirement"]
    if status["version"] is None:
        return f"not installed (localnmt.hf needs {need}: pip install 'localnmt[hf]')"
    if not status["supported"]:
        return f"{status['version']}: outside {need}, localnmt.hf refuses it"
    t5 = "T5 family too" if status["t5"] else "not the T5 family (it dispatches from 5.15)"
    return f"{status['version']}: localnmt.hf runs with it ({need}; {t5})"


def device_info(device: torch.device) -> dict[str, Any]:
    """Name, and on CUDA the compute capability, memory and supported low precisions."""
    if device.type != "cuda":
        return {"type": "cpu", "name": cpu_model(), "cores": os.cpu_count()}
    props = torch.cuda.get_device_properties(device)
    return {
        "type": "cuda",
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
        "bf16": torch.cuda.is_bf16_supported(),
    }


def flex_status(device: torch.device) -> dict[str, Any]:
    """Whether the FlexAttention kernel can run here, and why (not)."""
    from localnmt.attention.fast import flex

    if not flex.available():
        why = f"torch {torch.__version__} has no torch.nn.attention.flex_attention"
        return {"available": False, "why": why}
    if flex._disabled:
        return {"available": False, "why": "turned off (LOCALNMT_FLEX=0, or failed before)"}
    if device.type != "cuda":
        why = "present; on the CPU only when forced (no backward there): band and SDPA run"
        return {"available": True, "why": why}
    return {"available": True, "why": f"taken for windows from Tk = {flex.MIN_LENGTH}"}


def threads_status() -> dict[str, Any]:
    """torch's CPU threads, its parallel backend, and the OpenMP settings."""
    from localnmt.attention import threads

    backend = next(
        (line.split(":", 1)[1].strip() for line in torch.__config__.parallel_info().splitlines()
         if line.startswith("ATen parallel backend")),
        "?",
    )  # fmt: skip
    return {
        "torch_threads": torch.get_num_threads(),
        "parallel_backend": backend,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "one_thread_for_small_maps": threads.ENABLED,
        "c_kernels_on_torch_threads": _c_kernels_on_torch_threads(),
    }


def _c_kernels_on_torch_threads() -> bool:
    """Whether the C kernels split their work among torch's own OpenMP threads (bound to its
    runtime), rather than a thread pool of their own (csrc/builds.h)."""
    from localnmt.attention.fast.native import c_band, c_gmm_mixture

    return c_band.TEAM and c_gmm_mixture.TEAM


def collect(device: torch.device) -> dict[str, Any]:
    """Everything above as one JSON-ready dict."""
    from localnmt.attention.fast.native import extension_status

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "fairseq": _version("ve-fairseq", "fairseq-fixed", "fairseq"),
        "transformers": transformers_status(),
        "localnmt": _version("localnmt"),
        "cuda_available": torch.cuda.is_available(),
        "device": device_info(device),
        "c_extensions": [vars(status) for status in extension_status()],
        "flex_attention": flex_status(device),
        "threads": threads_status(),
        "load_average": load_average(),
    }


def format_environment(env: dict[str, Any]) -> str:
    """The environment as aligned ``key: value`` lines."""
    device = env["device"]
    if device["type"] == "cuda":
        where = (
            f"{device['name']} (capability {device['capability']}, {device['memory_gib']} GiB, "
            f"CUDA {device['cuda']}, bf16 {'yes' if device['bf16'] else 'no'})"
        )
    else:
        where = f"CPU: {device['name']}, {device['cores']} cores"
    extensions = ", ".join(
        f"{e['name'].lstrip('_')} {e['state']}" + (f" ({e['build']})" if e.get("build") else "")
        for e in env["c_extensions"]
    )
    flex = env["flex_attention"]
    th = env["threads"]
    load = env["load_average"]
    rows = [
        ("python", f"{env['python']} ({env['platform']})"),
        ("torch", env["torch"]),
        ("fairseq", env["fairseq"] or "not found"),
        ("transformers", format_transformers(env["transformers"])),
        ("localnmt", env["localnmt"] or "not installed (source tree)"),
        ("device", where),
        ("C extensions", extensions),
        ("FlexAttention", f"{'yes' if flex['available'] else 'no'}: {flex['why']}"),
        (
            "threads",
            f"{th['torch_threads']} torch threads ({th['parallel_backend']}), "
            f"OMP_NUM_THREADS={th['OMP_NUM_THREADS']}, OMP_WAIT_POLICY={th['OMP_WAIT_POLICY']}, "
            "C kernels on "
            + ("torch's threads" if th["c_kernels_on_torch_threads"] else "a pool of their own"),
        ),
        ("load average", " ".join(map(str, load)) if load else "unknown"),
    ]
    return "\n".join(f"{key:14} {value}" for key, value in rows)
