"""Japanese word segmentation with janome (pure Python, ships its own IPADIC dictionary).

janome is imported lazily so the package works without it; only Japanese data needs it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from localnmt.errors import DataError

_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u200b\ufeff\u2028\u2029]")


@lru_cache(maxsize=1)
def _janome():
    try:
        from janome.tokenizer import Tokenizer
    except ImportError:
        raise DataError("Japanese segmentation needs janome: pip install janome") from None
    return Tokenizer(wakati=True)


def tokenize_ja(text: str) -> str:
    """janome segmentation (wakati mode), tokens joined by single spaces.

    Whitespace (ASCII or ideographic U+3000) only separates tokens and is never a token;
    characters are not normalised (no NFKC), so the tokens concatenate back to the input
    without its whitespace.
    """
    text = _WS.sub(" ", _CONTROL.sub(" ", text)).strip()
    if not text:
        return ""
    return " ".join(t for t in (s.strip() for s in _janome().tokenize(text)) if t)
