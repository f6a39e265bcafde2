"""The ending every data-preparation command shares (the step machinery they use lives at the
base of the package: :mod:`localnmt.steps`, :mod:`localnmt.atomic`, :mod:`localnmt.errors`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from localnmt.errors import entry_point

__all__ = ["KEPT", "run_data_command"]

#: what an interrupted data command says after ``PROG: terminated;`` (or ``interrupted;``)
KEPT = "finished steps are kept, a rerun resumes"


def run_data_command(prog: str, build: Callable[[], Path | None]) -> int:
    """Run ``build`` through :func:`~localnmt.errors.entry_point`: print the path it made and
    return 0, or end with one ``PROG: error: ...`` line, exit 2 (a
    :class:`~localnmt.errors.LocalnmtError`, or a file-system error naming the path and the
    reason). SIGTERM and Ctrl-C end it in one line too (143, 130), after the half-written files
    are removed."""

    @entry_point(prog, kept=KEPT)
    def run() -> int:
        out = build()
        if out is not None:
            print(out)
        return 0

    return run()
