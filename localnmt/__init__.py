"""localnmt: local attention for fairseq NMT (use with ``--user-dir $(localnmt-path)``).

Importing the package registers every model, architecture and attention method with fairseq,
and lets new torch load fairseq's argparse checkpoints (``weights_only`` loading rejects
``argparse.Namespace`` otherwise).
"""

import argparse

import torch

if hasattr(torch.serialization, "add_safe_globals"):
    torch.serialization.add_safe_globals([argparse.Namespace])

from localnmt import models  # noqa: E402,F401
from localnmt.attention import fast, methods  # noqa: E402,F401  (registration side effects)
