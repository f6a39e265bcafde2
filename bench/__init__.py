"""Benchmarks of localnmt against fairseq's own Transformer (``python -m bench.run``).

Importing this package sets ``OMP_WAIT_POLICY=PASSIVE`` before torch is imported: OpenMP
spin-waits inflate short kernels about 10x on small shared machines (bench/README.md). A value
already set in the environment wins, and ``LOCALNMT_BENCH_OMP=torch`` keeps torch's own policy
(threads that spin a while before they sleep): what the trainings localnmt starts run with
(``localnmt/core_share.py``), for timings of an idle machine. It also keeps freed memory in
the process as the trainings localnmt starts do (:func:`localnmt.heap.keep_freed_memory`), so
that the in-process benches time the heap users get; plain ``fairseq-train`` children of
``bench.concurrency`` keep glibc's defaults.
"""

import os

if os.environ.get("LOCALNMT_BENCH_OMP") != "torch":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from localnmt.heap import keep_freed_memory  # noqa: E402  (after the setting, before torch)

keep_freed_memory()
