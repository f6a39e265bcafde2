"""Fine-grained BLEU: n-gram precision gaps and BLEU by source-length bucket."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU

from localnmt.evaluation.inputs import ScoringInputError, require_parallel


def ngram_precisions(
    hyps: Sequence[str], refs: Sequence[str], metric: BLEU | None = None
) -> list[float]:
    """Corpus 1..4-gram precisions (%) of a system."""
    require_parallel(hyps, refs)
    metric = metric or BLEU()
    return list(metric.corpus_score(list(hyps), [list(refs)]).precisions)


def ngram_precision_gaps(
    baseline_hyps: Sequence[str],
    system_hyps: Sequence[str],
    refs: Sequence[str],
    metric: BLEU | None = None,
) -> list[float]:
    """System minus baseline n-gram precision for n=1..4 (Zhang & Feng 2021, Fig. 6)."""
    base = ngram_precisions(baseline_hyps, refs, metric)
    system = ngram_precisions(system_hyps, refs, metric)
    return [s - b for s, b in zip(system, base)]


@dataclass
class Bucket:
    """BLEU of the sentences whose source length falls in one bucket."""

    label: str
    low: int
    high: int | None
    sentences: int
    bleu: float | None

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


def bucket_bounds(edges: Sequence[int] = (20, 40)) -> list[tuple[int, int | None, str]]:
    """Edges (20, 40) -> ``(0,20]``, ``[21,40]``, ``[41,∞)`` as inclusive (low, high, label),
    labelled as the papers do. The first bucket starts at 0 all the same: a sentence with an
    empty source is counted there, not lost."""
    bounds: list[tuple[int, int | None, str]] = []
    low = 0
    for i, edge in enumerate(edges):
        label = f"(0,{edge}]" if i == 0 else f"[{low},{edge}]"
        bounds.append((low, edge, label))
        low = edge + 1
    bounds.append((low, None, f"[{low},∞)"))
    return bounds


def source_length(lang: str) -> Callable[[str], int]:
    """Length of a raw source sentence in words of its own language's tokeniser: jieba for
    Chinese, janome for Japanese, Moses otherwise (as :mod:`localnmt.data.text_tokenize`)."""
    from localnmt.data.text_tokenize import tokenizer_for

    tokenize = tokenizer_for(lang)
    return lambda s: len(tokenize(s).split())


def bleu_by_length(
    sources: Sequence[str],
    hyps: Sequence[str],
    refs: Sequence[str],
    edges: Sequence[int] = (20, 40),
    length: Callable[[str], int] = lambda s: len(s.split()),
    metric: BLEU | None = None,
) -> list[Bucket]:
    """Corpus BLEU per source-length bucket (length in whitespace tokens by default; raw
    sources take :func:`source_length` of their language)."""
    require_parallel(hyps, refs)
    if len(sources) != len(hyps):
        raise ScoringInputError(f"{len(sources)} sources but {len(hyps)} hypotheses")
    metric = metric or BLEU()
    lengths = [length(s) for s in sources]
    buckets: list[Bucket] = []
    for low, high, label in bucket_bounds(edges):
        idx = [i for i, n in enumerate(lengths) if low <= n and (high is None or n <= high)]
        score = None
        if idx:
            score = metric.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        buckets.append(Bucket(label=label, low=low, high=high, sentences=len(idx), bleu=score))
    return buckets


def parse_edges(text: str) -> list[int]:
    """``"20,40"`` -> ``[20, 40]`` (strictly increasing, positive)."""
    edges = [int(x) for x in text.split(",") if x.strip()]
    if any(e <= 0 for e in edges) or edges != sorted(set(edges)):
        raise ValueError(f"bucket edges must be increasing positive integers: {text!r}")
    return edges
