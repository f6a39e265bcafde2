"""The C runtime of the kernels: loading the optional extensions, threads, tensor checks.

Four small C extensions without torch headers (``localnmt/csrc``, built by ``setup.py``,
optional): band attention on the CPU (:mod:`.c_band`), GMM cross-attention's mixture forward
and backward (:mod:`.c_gmm_mixture`) and its decoding step (:mod:`.gmm_step`), and attention
with relative positions on the CPU (:mod:`.c_relative`). Each module here
wraps one of them in torch: argument checks, autograd Functions, the split of sentences among
threads. Only kernels (``fast/*.py``) call these wrappers; methods reach them through the
kernel registries.

:func:`load` takes an extension only when it was built from the sources beside it
(``localnmt/cbuild.py``); :func:`extension_status` says, for ``localnmt-check``, whether each is
built, stale or missing.
"""

from __future__ import annotations

import ctypes
import glob
import importlib
import os
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import Tensor

from localnmt.cbuild import load_extension, source_digest

#: ``(module name, C source)`` of every optional extension.
EXTENSIONS = (
    ("_band", "band.c"),
    ("_gmm_mixture", "gmm_mixture.c"),
    ("_gmm_step", "gmm_step.c"),
    ("_relative", "relative.c"),
)

_pool: ThreadPoolExecutor | None = None
_pool_key = (0, 0)  # (process id, workers): a forked child must not reuse its parent's pool


def load(name: str, source: str) -> ModuleType | None:
    """``localnmt.<name>`` if built from the current ``csrc/<source>``, else None (the torch
    ops run; a stale build is reported once with the rebuild command)."""
    return load_extension(name, source)


@dataclass(frozen=True)
class ExtensionStatus:
    """``state``: ``built`` (current), ``stale`` (built from other sources: not used) or
    ``missing`` (not built: no C compiler at install time); ``build``: the instruction set in
    use (``avx512``, ``avx2``, ``baseline``) where built."""

    name: str
    source: str
    state: str
    build: str | None = None


def extension_status() -> list[ExtensionStatus]:
    """Whether each C extension is built from the sources beside it, stale, or missing."""
    found = []
    for name, source in EXTENSIONS:
        try:
            module = importlib.import_module(f"localnmt.{name}")
        except ImportError:
            found.append(ExtensionStatus(name, source, "missing"))
            continue
        expected = source_digest(source)
        built = getattr(module, "source_digest", lambda: None)()
        state = "built" if expected is None or built == expected else "stale"
        in_use = getattr(module, "in_use", None)
        found.append(ExtensionStatus(name, source, state, in_use() if in_use else None))
    return found


def has_memory(t: Tensor) -> bool:
    """A plain tensor with storage: not ``torch.func``'s wrapped or batched tensors (inside a
    vmapped backward a batched gradient looks plain but has no storage), not a subclass."""
    if type(t) not in (Tensor, torch.nn.Parameter):
        return False
    if torch._C._functorch.is_functorch_wrapped_tensor(t):
        return False
    try:
        t.untyped_storage()
    except (NotImplementedError, RuntimeError):
        return False
    return True


def cpu_float32(*tensors: Tensor | None) -> bool:
    """Whether every given tensor (None skipped) is float32 on the CPU, plain, with memory
    (:func:`has_memory`): what the C kernels read by address."""
    for t in tensors:  # a plain loop, ``is_cpu``: called at every decoding step
        if t is not None and not (t.is_cpu and t.dtype is torch.float32 and has_memory(t)):
            return False
    return True


def view_of(t: Tensor) -> tuple[int, int, int, int]:
    """``(address, stride of b, of h, of t)`` of a ``(B, H, T, d)`` tensor whose last
    dimension is contiguous: a ``View`` of ``csrc/views.h``."""
    return (t.data_ptr(), *t.stride()[:3])


def _sentence_ranges(bsz: int) -> list[tuple[int, int]]:
    parts = max(1, min(torch.get_num_threads(), bsz))
    bounds = [bsz * i // parts for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if lo < hi]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]  # fmt: skip


def torch_openmp_runtime() -> str | None:
    """The file (real path) of the OpenMP runtime whose ``omp_get_max_threads`` torch's CPU
    library calls, or None where that cannot be told (not Linux, no such library, no
    OpenMP)."""
    found = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.*"))
    try:
        torch_cpu = ctypes.CDLL(found[0], mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        address = ctypes.cast(torch_cpu.omp_get_max_threads, ctypes.c_void_p)
        dladdr = ctypes.CDLL(None).dladdr
    except (IndexError, OSError, AttributeError):
        return None
    info = _DlInfo()
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


def splits_itself(module: ModuleType | None) -> bool:
    """Whether the extension ``module`` splits its sentences among torch's own threads: built
    with OpenMP (csrc/builds.h) and bound to the OpenMP runtime torch runs on. Bound to another
    one (a torch wheel whose libgomp has another soname, or Intel's), it would run a second
    set of threads at a count of its own: the wrappers' pool splits instead."""
    team_library = getattr(module, "team_library", None)
    library = team_library() if team_library is not None else None
    return library is not None and torch_openmp_runtime() == os.path.realpath(library)


def use_torchs_threads(module: ModuleType | None) -> bool:
    """Turn on the extension ``module``'s split among torch's threads where
    :func:`splits_itself` (off otherwise: each call then runs on its calling thread); whether
    it is on."""
    on = splits_itself(module)
    if module is not None and hasattr(module, "use_team"):
        module.use_team(on)
    return on


def run_by_sentences(fn, args: tuple, bsz: int, grads: tuple, team: bool = False) -> None:
    """``fn(*args, b0, b1, grads)`` over the ``bsz`` sentences (a C kernel that releases the
    GIL: band.c, gmm_mixture.c, relative.c): one call where the kernel splits them among
    torch's threads itself (``team``: :func:`splits_itself`), else ``torch.get_num_threads()``
    ranges on this thread and a pool's."""
    global _pool, _pool_key
    if team:
        fn(*args, 0, bsz, grads)
        return
    ranges = _sentence_ranges(bsz)
    if len(ranges) == 1:
        fn(*args, 0, bsz, grads)
        return
    if _pool is None or _pool_key[0] != os.getpid() or _pool_key[1] < len(ranges) - 1:
        _pool_key = (os.getpid(), len(ranges) - 1)
        _pool = ThreadPoolExecutor(max_workers=_pool_key[1], thread_name_prefix="localnmt-c")
    futures = [_pool.submit(fn, *args, lo, hi, grads) for lo, hi in ranges[1:]]
    try:
        fn(*args, *ranges[0], grads)
    finally:  # the threads write into the caller's tensors: never return before they end
        wait(futures)
    for future in futures:
        future.result()
