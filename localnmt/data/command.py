"""The ending every data-preparation command shares (the step machinery they use lives at the
base of the package: :mod:`localnmt.steps`, :mod:`localnmt.atomic`, :mod:`localnmt.errors`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from localnmt.errors import LocalnmtError, Terminated, os_error_text, stop_on_sigterm

__all__ = ["run_data_command"]


def run_data_command(build: Callable[[], Path | None]) -> int:
    """Run ``build``; print the path it made (exit 0), or an error as one ``error:`` line
    (exit 2): a :class:`~localnmt.errors.LocalnmtError`, or a file-system error naming the
    path and the reason. SIGTERM and Ctrl-C end it in one line too (143, 130), after the
    half-written files are removed."""
    stop_on_sigterm()  # a SIGTERM unwinds: half-written files are removed, workers stopped
    try:
        out = build()
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"{'terminated' if terminated else 'interrupted'}; finished steps are kept, "
              "a rerun resumes", file=sys.stderr, flush=True)  # fmt: skip
        return 143 if terminated else 130
    except LocalnmtError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_status
    except OSError as e:
        print(f"error: {os_error_text(e)}", file=sys.stderr)
        return 2
    if out is not None:
        print(out)
    return 0
