"""Cleaning filters for gettext pairs: accelerators, placeholders, markup, length, dedup.

Each filter is a named predicate so provenance can count what each one removed. Filters run
in the fixed order of :data:`FILTER_ORDER`; an entry is counted under the first filter that
rejects it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass

_WS = re.compile(r"\s+")
# printf-style: %s %d %5.2f %-10s %ld %zu %1$s %(name)s %%-free; also Qt-style %1
_PRINTF = re.compile(
    r"%(?:\d+\$)?(?:\([^)]*\))?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?[diouxXeEfFgGaAcsSpnmCB]|%\d+|%<\w+>"
)
_BRACE = re.compile(r"\{[^{}\s]*\}")  # {0} {name} {} {0:>5}
_SHELL = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\d|@[A-Z_][A-Z0-9_]*@")
_MARKUP = re.compile(r"</?[A-Za-z][^<>]*>|&[A-Za-z]+;|&#\d+;")
_URL = re.compile(r"https?://|ftp://|www\.|\S+@\S+\.\w|(?:^|\s)/(?:[\w.-]+/)+|\\[ntr]|`")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")
# accelerators: "(_F)" / "(&F)" suffixes of CJK translations, then "_File" / "&File"
_ACCEL_SUFFIX = re.compile(r"\s*[(（]\s*[_&][A-Za-z0-9]\s*[)）]")
_UNDERSCORE_ACCEL = re.compile(r"(?<!_)_(?=[^\W_])")
_AMP_ACCEL = re.compile(r"(?<![&\w])&(?=[^\W_])|(?<=\w)&(?=[^\W_])")

FILTER_ORDER = (
    "empty",
    "multiline",
    "markup",
    "placeholder",
    "code_like",
    "no_letters",
    "untranslated",
    "too_short",
    "too_long",
    "length_ratio",
)


@dataclass(frozen=True)
class CleanConfig:
    """Filter parameters (recorded in provenance)."""

    min_tokens: int = 1
    max_tokens: int = 80
    max_ratio: float = 3.0  # on smoothed length units, (max+1)/(min+1)
    cjk_chars_per_token: float = 1.5  # Chinese characters per English-like word

    def to_dict(self) -> dict:
        return asdict(self)


def normalize_ws(text: str) -> str:
    """Collapse runs of whitespace (incl. tabs, NBSP) into one space and strip."""
    return _WS.sub(" ", text.replace("\u00a0", " ")).strip()


def strip_accelerators(text: str) -> str | None:
    """Remove keyboard-accelerator markers; None if underscores look like code, not markers."""
    text = _ACCEL_SUFFIX.sub("", text)
    single = [m for m in _UNDERSCORE_ACCEL.finditer(text)]
    if len(single) > 1 or re.search(r"\w_\w.*_", text):
        return None  # identifiers such as foo_bar_baz
    if single:
        text = _UNDERSCORE_ACCEL.sub("", text, count=1)
    text = text.replace("__", "_")
    if "&&" in text:
        text = text.replace("&&", "&")
    elif len(_AMP_ACCEL.findall(text)) == 1:
        text = _AMP_ACCEL.sub("", text, count=1)
    return text


def length_units(text: str) -> float:
    """Length in word-like units: whitespace tokens, CJK characters / 1.5 each."""
    n_cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text).split()
    return len(rest) + n_cjk / CleanConfig.cjk_chars_per_token


def reject_reason(src: str, tgt: str, tgt_lang: str, cfg: CleanConfig) -> str | None:
    """Name of the first filter rejecting the raw pair, or None if it passes."""
    if not src.strip() or not tgt.strip():
        return "empty"
    if "\n" in src.strip() or "\n" in tgt.strip():
        return "multiline"
    if _MARKUP.search(src) or _MARKUP.search(tgt):
        return "markup"
    for pat in (_PRINTF, _BRACE, _SHELL):
        if pat.search(src) or pat.search(tgt):
            return "placeholder"
    if _URL.search(src) or _URL.search(tgt):
        return "code_like"
    if not _LETTER.search(src):
        return "no_letters"
    if tgt_lang.startswith("zh") and not _CJK.search(tgt):
        return "untranslated"
    if src.strip() == tgt.strip():
        return "untranslated"  # copied names (ISO catalogs) and untranslated strings
    ls, lt = length_units(src), length_units(tgt)
    if min(ls, lt) < cfg.min_tokens:
        return "too_short"
    if max(ls, lt) > cfg.max_tokens:
        return "too_long"
    if (max(ls, lt) + 1) / (min(ls, lt) + 1) > cfg.max_ratio:
        return "length_ratio"
    return None


def clean_pair(src: str, tgt: str) -> tuple[str, str] | None:
    """Strip accelerators and normalise whitespace; None if a side looks like code."""
    s, t = strip_accelerators(src), strip_accelerators(tgt)
    if s is None or t is None:
        return None
    return normalize_ws(s), normalize_ws(t)


def clean_pairs(
    pairs: Iterable[tuple[str, str]], tgt_lang: str, cfg: CleanConfig
) -> tuple[list[tuple[str, str]], Counter]:
    """Filter and normalise pairs; return kept pairs (in input order) and removal counts."""
    removed: Counter = Counter({name: 0 for name in FILTER_ORDER})
    kept = []
    for src, tgt in pairs:
        if "\n" in src.strip() or "\n" in tgt.strip():
            removed["multiline"] += 1
            continue
        cleaned = clean_pair(src, tgt)
        if cleaned is None:
            removed["code_like"] += 1
            continue
        reason = reject_reason(cleaned[0], cleaned[1], tgt_lang, cfg)
        if reason:
            removed[reason] += 1
        else:
            kept.append(cleaned)
    return kept, removed


def dedup_source(pairs: Iterable[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
    """One pair per source: its most frequent target, ties broken by the smallest string.

    Output is sorted by source, so the result does not depend on catalog order.
    """
    targets: dict[str, Counter] = defaultdict(Counter)
    n = 0
    for s, t in pairs:
        targets[s][t] += 1
        n += 1
    out = []
    for s in sorted(targets):
        best = min(targets[s].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        out.append((s, best))
    return out, n - len(out)
