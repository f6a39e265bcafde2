"""matplotlib for files only: the Agg backend, and its debug log kept quiet (importing
fairseq leaves the root logger at DEBUG, where matplotlib's font search writes ~150 lines)."""

from __future__ import annotations

import logging
from types import ModuleType


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend, matplotlib's logger at WARNING."""
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # before its import logs
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
