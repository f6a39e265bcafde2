"""The torch versions this package runs on, and the features that need a newer one.

The oldest supported torch is :data:`OLDEST` (``setup.py`` declares the same, CI tests it:
``scripts/test_oldest_torch.sh``; docs/install.md says which versions were tried). Features
that need a newer torch switch off on older ones instead of failing:

- FlexAttention (``torch.nn.attention.flex_attention``, torch >= 2.5): the ``flex`` kernel is
  unavailable and the others run (:mod:`localnmt.attention.fast.flex`);
- ``torch.serialization.add_safe_globals`` (torch >= 2.4): before it, the package's own
  checkpoint loads enforce the same allow-list with an unpickler of their own
  (:mod:`localnmt.safe_load`);
- float16 matrix products on the CPU (torch 2.2 or so): :func:`cpu_supports` says whether
  this torch has them.

A torch built against NumPy 1 (2.1.2 here) cannot exchange arrays with NumPy 2, which fairseq's
data loading needs: :func:`numpy_problem` says so, and the package refuses to import with
the fix (``pip install 'numpy<2'``) instead of failing later in a data loader.
"""

from __future__ import annotations

import functools
import re

import torch

#: The oldest torch this package is tested with (major, minor).
OLDEST = (2, 1)
#: The first torch with FlexAttention.
FLEX_ATTENTION = (2, 5)


def version(text: str | None = None) -> tuple[int, int]:
    """``(major, minor)`` of ``text`` (default: the running torch), e.g. ``"2.5.1+cu124"``."""
    match = re.match(r"(\d+)\.(\d+)", text or torch.__version__)
    if match is None:
        raise ValueError(f"not a torch version: {text!r}")
    return int(match.group(1)), int(match.group(2))


def at_least(wanted: tuple[int, int]) -> bool:
    """Whether the running torch is ``wanted`` or newer."""
    return version() >= wanted


@functools.cache
def cpu_supports(dtype: torch.dtype) -> bool:
    """Whether this torch multiplies ``dtype`` matrices on the CPU (older ones lack float16)."""
    try:
        torch.nn.functional.linear(torch.ones(2, 2, dtype=dtype), torch.ones(2, 2, dtype=dtype))
    except RuntimeError:
        return False
    return True


def numpy_problem() -> str | None:
    """Why torch cannot use the installed numpy (a torch built against NumPy 1 with NumPy 2
    installed), or None."""
    import numpy

    try:
        torch.from_numpy(numpy.zeros(1))
    except RuntimeError as err:
        return (
            f"torch {torch.__version__} cannot use numpy {numpy.__version__} ({err}); "
            "install numpy<2 for it: pip install 'numpy<2'"
        )
    return None
