"""Progress lines and error entries shared by the sections of ``python -m bench.run``."""

from __future__ import annotations

import sys
import time
import traceback


def log(message: str) -> None:
    """A time-stamped progress line on stderr."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def error_entry(section: str, what: str, err: BaseException) -> dict[str, str]:
    """The ``errors`` entry of a failed measurement (call inside ``except``)."""
    return {
        "section": section,
        "what": what,
        "error": f"{type(err).__name__}: {err}",
        "traceback": traceback.format_exc(limit=6),
    }
