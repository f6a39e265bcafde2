"""Plain text from WMT SGML test sets (what Moses' input-from-sgm.perl does)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_SEG = re.compile(r"<seg[^>]*>(.*)</seg>", re.IGNORECASE)


def sgm_segments(lines: Iterable[str]) -> Iterator[str]:
    """The text of each ``<seg>`` element, whitespace-stripped, entities left as they are."""
    for line in lines:
        m = _SEG.search(line)
        if m:
            yield re.sub(r"\s+", " ", m.group(1)).strip()
