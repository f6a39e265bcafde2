"""n-gram precision gaps and BLEU by source length."""

import json

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


def zh_sources() -> list[str]:
    """Chinese sources of 1, 3 and 6 fixture sentences joined (no spaces: whitespace splitting
    sees one 'word' each)."""
    from pathlib import Path

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "sample.zh"
    zh = fix.read_text(encoding="utf-8").splitlines()
    return ["".join(zh[i : i + k]) for i, k in ((0, 1), (1, 3), (4, 6), (10, 1), (11, 9))]


def jieba_counts(sources: list[str], edges: tuple[int, ...]) -> list[int]:
    """Bucket counts with jieba words counted directly (a plain re-statement)."""
    import jieba

    lengths = [len([w for w in jieba.lcut(s) if w.strip()]) for s in sources]
    bounds = [0, *edges, 10**9]
    return [sum(lo < n <= hi for n in lengths) for lo, hi in zip(bounds, bounds[1:])]


def test_buckets_segment_chinese_sources_with_jieba(tmp_path) -> None:
    from localnmt.evaluation.results import Scores
    from localnmt.evaluation.scoring import ScoringOptions, score
    from localnmt.runs.decode_and_score import evaluate_checkpoint

    sources = zh_sources()
    hyps = refs = [f"sentence number {i} ." for i in range(len(sources))]
    edges = (10, 20)
    expected = jieba_counts(sources, edges)
    assert expected[0] < len(sources) and expected[-1] > 0  # not all in the first bucket
    # text path: the target is English, the source Chinese
    result = score(hyps, refs, "en", sources=sources, source_lang="zh",
                   options=ScoringOptions(edges=edges))  # fmt: skip
    assert [b.sentences for b in result.length_buckets] == expected
    assert "jieba" in result.length_unit
    with pytest.raises(ValueError, match="source_lang"):
        score(hyps, refs, "en", sources=sources, options=ScoringOptions(edges=edges))
    # checkpoint path: the source language comes from the data-bin (zh-en)
    data_bin = tmp_path / "bin"
    data_bin.mkdir()
    (data_bin / "test.zh-en.zh.idx").write_bytes(b"")
    translated = {"hyp": hyps, "ref_gen": refs, "src_gen": sources}
    result = evaluate_checkpoint(data_bin, tmp_path / "ckpt.pt", tmp_path / "out",
                                 translated=translated,
                                 scoring=ScoringOptions(edges=edges))  # fmt: skip
    assert [b.sentences for b in result.length_buckets] == expected
    on_disk = json.loads((tmp_path / "out" / "scores.json").read_text(encoding="utf-8"))
    assert [b["sentences"] for b in on_disk["length_buckets"]] == expected
    assert Scores.from_json(on_disk) == result


def test_buckets_moses_words_for_other_languages() -> None:
    from sacremoses import MosesTokenizer

    from localnmt.evaluation.breakdown import source_length

    text = "Well, it's 8 o'clock (again)!"
    assert source_length("en")(text) == len(MosesTokenizer("en").tokenize(text, escape=False))
    assert source_length("en")(text) > len(text.split())
