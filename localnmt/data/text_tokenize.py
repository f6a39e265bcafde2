"""Sentence-level tokenisation: Moses (sacremoses) for European languages, jieba for Chinese,
janome for Japanese; ``none`` (pre-tokenised input) only cleans control characters and spaces."""

from __future__ import annotations

import logging
import multiprocessing as mp
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from itertools import islice
from pathlib import Path

from localnmt import progress
from localnmt.atomic import atomic_open
from localnmt.data.validate import iter_lines_checked

_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u200b\ufeff\u2028\u2029]")


@lru_cache(maxsize=8)
def _moses(lang: str):
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    return MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def tokenize_moses(text: str, lang: str, normalize: bool = True) -> str:
    """Moses punctuation normalisation + tokenisation (aggressive dash split, no escaping).

    No XML escaping (``&apos;`` etc.): fairseq does not need it, and detokenised output stays
    plain text for sacrebleu. ``normalize=False`` skips the punctuation normalisation (quotes,
    dashes, spaces before punctuation stay as written), so detokenised output can match raw
    references exactly.
    """
    norm, tok = _moses(lang)
    text = _CONTROL.sub(" ", text)
    if normalize:
        text = norm.normalize(text)
    return tok.tokenize(text, aggressive_dash_splits=True, escape=False, return_str=True).strip()


def tokenize_zh(text: str) -> str:
    """jieba segmentation (default dictionary, HMM on), tokens joined by single spaces."""
    text = _WS.sub(" ", _CONTROL.sub(" ", text)).strip()
    return " ".join(t for t in _jieba().lcut(text) if t.strip())


def clean_spaces(text: str) -> str:
    """Pre-tokenised text: control characters become spaces, runs of spaces one space."""
    return _WS.sub(" ", _CONTROL.sub(" ", text)).strip()


def tokenizer_name(lang: str, pretokenized: bool = False) -> str:
    """Which tokeniser a language gets: ``jieba`` (zh*), ``janome`` (ja*), ``moses``, or
    ``none`` for pre-tokenised input."""
    if pretokenized:
        return "none"
    if lang.startswith("zh"):
        return "jieba"
    if lang.startswith("ja"):
        return "janome"
    return "moses"


def tokenizer_for(
    lang: str, *, normalize: bool = True, pretokenized: bool = False
) -> Callable[[str], str]:
    """The tokeniser of a language code (``zh*`` → jieba, ``ja*`` → janome, else Moses, with
    punctuation normalisation unless ``normalize=False``); ``pretokenized`` → spaces only."""
    name = tokenizer_name(lang, pretokenized)
    if name == "none":
        return clean_spaces
    if name == "jieba":
        return tokenize_zh
    if name == "janome":
        from localnmt.data.ja_segment import tokenize_ja

        return tokenize_ja
    return lambda s: tokenize_moses(s, lang, normalize)


def _tok_chunk(args: tuple[str, list[str]]) -> list[str]:
    key, lines = args
    lang, mode = key.split("\t")
    fn = tokenizer_for(lang, normalize=mode == "norm", pretokenized=mode == "pretok")
    return [fn(line) for line in lines]


def _chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(lines)
    while chunk := list(islice(it, size)):
        yield chunk


def map_lines(
    fn: Callable[[tuple[str, list[str]]], list[str]],
    key: str,
    lines: Iterable[str],
    workers: int,
    chunk: int = 2000,
    desc: str | None = None,
    total: int | None = None,
) -> Iterator[str]:
    """Apply a chunk function over lines, in order, with ``workers`` processes; with ``desc``,
    a progress bar over ``total`` lines (:mod:`localnmt.progress`)."""
    jobs = ((key, c) for c in _chunks(lines, chunk))
    with progress.bar(total=total, desc=desc, unit="line", unit_scale=True,
                      show=desc is not None) as shown:  # fmt: skip
        if workers <= 1:
            for job in jobs:
                out = fn(job)
                yield from out
                shown.update(len(out))
            return
        with mp.get_context("fork").Pool(workers) as pool:
            for out in pool.imap(fn, jobs):
                yield from out
                shown.update(len(out))


def tokenize_file(
    inp: Path, out: Path, lang: str, workers: int = 1, *, normalize: bool = True,
    pretokenized: bool = False,
) -> int:  # fmt: skip
    """Tokenise a (validated) text file line by line into ``out`` atomically."""
    mode = "pretok" if pretokenized else "norm" if normalize else "raw"
    n = 0
    with atomic_open(out) as f:
        lines = iter_lines_checked(inp)
        shown = {"desc": f"tokenising {inp.name}", "total": progress.lines_in(inp)}
        for line in map_lines(_tok_chunk, f"{lang}\t{mode}", lines, workers, **shown):
            f.write(line + "\n")
            n += 1
    return n
