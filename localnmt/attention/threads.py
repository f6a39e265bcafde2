"""One CPU thread for attention maps too small to share (decoding steps, small batches).

With several OpenMP threads, torch runs every softmax, and every element-wise op over more
than one grain (32,768 elements), as a parallel region that wakes the idle threads. Under
``OMP_WAIT_POLICY=PASSIVE`` (sleeping threads, what a shared machine needs) a wake-up costs
more than the op on a decoding step's ``(B·beam, H, 1, Tk)`` tensors: on a 2-core AMD EPYC
VM, a softmax over ``(32, 8, 1, 32)`` takes 52 µs on 2 threads and 10 µs on 1, and an
``exp`` over ``(32, 8, 1, 4, 32)`` 61 µs and 30 µs. Beam search with 8 sentences pays this
once per op, per layer, per step; Gaussian mixture cross-attention has a dozen such ops.

:func:`one_thread_if_small` runs a block on one thread when its largest attention map has at
most :data:`SMALL_MAP` elements. Larger maps (training, big decoding batches) keep every
thread. Only the thread count changes, never a number.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

#: Attention maps (B·H·Tq·Tk elements) up to this size run on one thread: torch's grain.
SMALL_MAP = 32_768
#: Switch for benchmarks and tests (False: never change the thread count). Off where torch's
#: CPU parallel backend is not OpenMP: the native thread pool cannot be resized once it has
#: run (torch warns and keeps its size).
ENABLED = "parallel backend: OpenMP" in torch.__config__.parallel_info()

_lock = threading.Lock()
_depth = 0
_saved_threads = 0


@contextlib.contextmanager
def one_thread_if_small(map_elements: int, device: torch.device) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)`` if the map is small and on the CPU.

    Nested and concurrent blocks share one saved thread count: the outermost block to
    finish restores it."""
    global _depth, _saved_threads
    if not ENABLED or device.type != "cpu" or map_elements > SMALL_MAP:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved_threads = torch.get_num_threads()
            if _saved_threads > 1:
                torch.set_num_threads(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved_threads > 1:
                torch.set_num_threads(_saved_threads)
