"""One CPU thread for attention maps too small to share (decoding steps, small batches).

With several OpenMP threads, torch runs every softmax, and every element-wise op over more
than one grain (32,768 elements), as a parallel region that wakes the idle threads. Under
``OMP_WAIT_POLICY=PASSIVE`` (sleeping threads, what a shared machine needs) a wake-up costs
more than the op on a decoding step's ``(B·beam, H, 1, Tk)`` tensors, and Gaussian mixture
cross-attention has a dozen such ops per layer and step. ``python -m bench.small_op_threads`` times
them on all threads and on one (2-core AMD EPYC: softmax over (32, 8, 1, 32) 61 µs against
9 µs; a GMM cross-attention decoding step 2317 µs against 1568 µs).

:func:`one_thread_if_small` runs a block on one thread when its largest attention map has at
most :data:`SMALL_MAP` elements. Larger maps (training, big decoding batches) keep every
thread. Only the thread count changes, never a number. fairseq-generate and fairseq-train
call the attention module, not an entry point of ours, hence the rule sits in its forward.

The rule holds only where OpenMP's idle threads sleep (:func:`threads_sleep`). Under torch's
own policy, what localnmt's launchers and a plain transformers run have, the idle threads spin
a while before they sleep, a small op's second thread costs little, and one thread is slower:
the same bench under that policy took 5.9 µs for the softmax on two threads against 8.4 on
one, and 701 µs for the GMM decoding step without the rule against 837 with it; a 512-dim
Marian model's greedy ``generate`` with GMM cross-attention kept 0.865 of ``sdpa``'s speed
without the rule and 0.836 with it (interleaved in one process).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping

import torch

#: Attention maps (B·H·Tq·Tk elements) up to this size run on one thread: torch's grain.
SMALL_MAP = 32_768
#: Whether torch's CPU parallel backend is OpenMP (the native thread pool cannot be resized
#: once it has run: torch warns and keeps its size).
OPENMP = "parallel backend: OpenMP" in torch.__config__.parallel_info()


def threads_sleep(env: Mapping[str, str] = os.environ) -> bool:
    """Whether OpenMP's idle threads sleep at once, as the process's environment sets it up:
    ``OMP_WAIT_POLICY=passive`` (any case), or GNU OpenMP's ``GOMP_SPINCOUNT=0``."""
    policy = env.get("OMP_WAIT_POLICY", "").strip().lower()
    return policy == "passive" or env.get("GOMP_SPINCOUNT", "").strip() == "0"


#: Switch for benchmarks and tests (False: never change the thread count): on where the
#: backend is OpenMP and its idle threads sleep (see the module docstring).
ENABLED = OPENMP and threads_sleep()

_state = threading.local()  # torch's OpenMP thread count is per thread: so are depth and count


#: What :func:`one_thread_if_small` gives where the count stays (reusable: it keeps no state).
_KEEP_THREADS = contextlib.nullcontext()


def one_thread_if_small(
    map_elements: int, device: torch.device
) -> contextlib.AbstractContextManager[None]:
    """Run the block with ``torch.set_num_threads(1)`` if the map is small and on the CPU.

    Nested blocks keep one saved count per calling thread: the outermost block restores it.
    Where the count stays (the rule off, another device, a large map) the block costs no
    generator: every attention call asks."""
    if not ENABLED or map_elements > SMALL_MAP or device.type != "cpu":
        return _KEEP_THREADS
    return _one_thread()


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    depth = getattr(_state, "depth", 0)
    if depth == 0:
        _state.saved = torch.get_num_threads()
        if _state.saved > 1:
            torch.set_num_threads(1)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth -= 1
        if _state.depth == 0 and _state.saved > 1:
            torch.set_num_threads(_state.saved)
