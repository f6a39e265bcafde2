"""Keep freed memory in the process instead of handing it back to the kernel (glibc).

glibc's ``malloc`` serves a block above its *mmap threshold* (128 KiB at start) with a fresh
``mmap`` and unmaps it on ``free``; below it, from its heap, whose free top it gives back to
the kernel once it exceeds the *trim threshold*. A training allocates and frees the same
activation and gradient buffers at every update: each one the kernel took back is faulted in
and zeroed again, page by page. glibc raises both thresholds by itself when it frees a large
mapped block, to at most 32 MiB and 64 MiB on 64-bit Linux; that still leaves plain
``fairseq-train`` with the quickstart's CPU model 1.9-2.4 million page faults and 5.2-6.3 s in
the kernel in 20 s of training. :func:`keep_freed_memory` sets the mmap threshold to that
maximum and keeps up to 512 MiB of freed heap per process: 0.24-0.25 million faults and
1.9-2.0 s (``python -m bench.concurrency``, its last column; bench/README.md). The price: up to
512 MiB of freed memory at the top of the heap stays with the process (per process, with
several CPU processes per node). Only memory
placement changes, never a number.

This module imports only the standard library; it changes nothing off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

#: mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: the most glibc's own rule raises the mmap threshold to on 64-bit Linux
#: (DEFAULT_MMAP_THRESHOLD_MAX): larger blocks are still mapped and unmapped each time
MMAP_THRESHOLD = 32 * 1024 * 1024
#: the freed top of the heap kept. In a one-off check (not a bench figure) 64 MiB, glibc's own
#: rule's maximum, left the CPU model's page faults as they were and 256 MiB already removed
#: most of them; 512 MiB leaves room for larger models
TRIM_THRESHOLD = 512 * 1024 * 1024


def _glibc() -> ctypes.CDLL | None:
    """The C library if it is glibc (it has ``mallopt`` and ``gnu_get_libc_version``)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018  (musl and others lack it)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory(libc: ctypes.CDLL | None = None) -> bool:
    """Fix glibc's mmap and trim thresholds at :data:`MMAP_THRESHOLD` and
    :data:`TRIM_THRESHOLD` for this process (and the children it forks); whether they were
    set. Call it before the work starts (blocks already allocated keep where they are)."""
    libc = libc if libc is not None else _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not done:
        logger.debug("mallopt refused the thresholds; glibc's defaults stay")
    return done
