"""n-gram precision gaps and BLEU by source length."""

import pytest
from sacrebleu.metrics import BLEU

from localnmt.evaluation.breakdown import (
    bleu_by_length,
    bucket_bounds,
    ngram_precision_gaps,
    parse_edges,
)

REFS = ["a b c d e", "f g h i j", "k l m n o"]
BASE = ["a b x d e", "f g y i j", "k z m n o"]
SYS = ["a b c d e", "f g y i j", "k l m n q"]


def test_ngram_gaps_are_precision_differences() -> None:
    gaps = ngram_precision_gaps(BASE, SYS, REFS)
    base = BLEU().corpus_score(BASE, [REFS]).precisions
    system = BLEU().corpus_score(SYS, [REFS]).precisions
    assert gaps == pytest.approx([s - b for s, b in zip(system, base)])
    assert len(gaps) == 4 and gaps[3] > 0


def test_bucket_labels_follow_the_paper() -> None:
    assert [b[2] for b in bucket_bounds()] == ["(0,20]", "[21,40]", "[41,∞)"]
    assert bucket_bounds([10])[1][:2] == (11, None)
    assert parse_edges("10,30,50") == [10, 30, 50]
    with pytest.raises(ValueError):
        parse_edges("30,10")


def test_bleu_by_length_scores_each_subset() -> None:
    sources = ["w " * 5, "w " * 25, "w " * 45]
    buckets = bleu_by_length(sources, SYS, REFS)
    assert [b.sentences for b in buckets] == [1, 1, 1]
    assert buckets[0].bleu == BLEU().corpus_score([SYS[0]], [[REFS[0]]]).score
    assert buckets[0].bleu == pytest.approx(100.0)
    empty = bleu_by_length(sources[:1], SYS[:1], REFS[:1], edges=[3])
    assert empty[0].sentences == 0 and empty[0].bleu is None
