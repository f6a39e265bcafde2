"""Benchmarks of localnmt against fairseq's own Transformer (``python -m bench.run``).

Importing this package sets ``OMP_WAIT_POLICY=PASSIVE`` before torch is imported: OpenMP
spin-waits inflate short kernels about 10x on small shared machines (bench/README.md). A value
already set in the environment wins.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
