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

_state = threading.local()  # torch's OpenMP thread count is per thread: so are depth and count


@contextlib.contextmanager
def one_thread_if_small(map_elements: int, device: torch.device) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)`` if the map is small and on the CPU.

    Nested blocks keep one saved count per calling thread: the outermost block restores it."""
    if not ENABLED or device.type != "cpu" or map_elements > SMALL_MAP:
        yield
        return
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
