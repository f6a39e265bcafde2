"""The one way a model build inside fairseq ends on a user's mistake.

fairseq parses its own command line and then calls ``build_model``; an attention spec that
does not fit the model is found there, after argparse is done. :func:`check_at_build` runs
such a check through :func:`localnmt.errors.entry_point`, so it ends as every localnmt
command does: ``fairseq: error: MESSAGE``, exit 2, before any training or decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from localnmt.errors import entry_point


def check_at_build(check: Callable[[Any], object], args: Any) -> None:
    """Run ``check(args)`` (a spec check of the model being built); a
    :class:`~localnmt.errors.LocalnmtError` ends the process in one line, exit 2."""
    entry_point("fairseq")(check)(args)
