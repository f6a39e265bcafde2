"""Scores of detokenised hypotheses against raw references, the ways the papers report them.

SacreBLEU with its signature, tokenized BLEU (multi-bleu style, German compound splitting),
BLEU by source-length bucket, and against a baseline: paired bootstrap significance and n-gram
precision gaps (:func:`score`, typed :class:`~localnmt.evaluation.results.Scores`);
:func:`summary` prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localnmt.data.text_tokenize import tokenizer_name
from localnmt.data.validate import iter_lines_checked
from localnmt.evaluation.breakdown import bleu_by_length, ngram_precision_gaps, source_length
from localnmt.evaluation.metrics import sacrebleu_metric, sacrebleu_score, tokenized_bleu
from localnmt.evaluation.results import AnyScores, Scored, Scores
from localnmt.evaluation.significance import paired_bootstrap


def read_lines(path: Path) -> list[str]:
    """Lines of a text file without their newlines. Only ``\\n`` ends a line (as in fairseq
    and the data pipelines): a U+2028 or U+0085 inside a raw reference does not split it. A
    missing file or invalid UTF-8 is a :class:`~localnmt.errors.DataError` naming the
    file and line (:func:`localnmt.data.validate.iter_lines_checked`)."""
    return list(iter_lines_checked(Path(path)))


def write_lines(path: Path, lines: Sequence[str]) -> None:
    """Write one line per item."""
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@dataclass(frozen=True)
class ScoringOptions:
    """How scores are computed beyond BLEU itself: the source-length bucket edges, and the
    paired bootstrap's resamples and seed."""

    edges: tuple[int, ...] = (20, 40)
    bootstrap_samples: int = 1000
    seed: int = 12345


#: the papers' scoring: buckets (0,20], [21,40], [41,inf); 1000 resamples, seed 12345
DEFAULT_SCORING = ScoringOptions()


def score(
    hyps: Sequence[str],
    refs: Sequence[str],
    lang: str,
    *,
    sources: Sequence[str] | None = None,
    source_lang: str | None = None,
    baseline_hyps: Sequence[str] | None = None,
    options: ScoringOptions = DEFAULT_SCORING,
    scored: Scored | None = None,
) -> Scores:
    """All scores of detokenised hypotheses against raw references.

    ``lang`` is the target language; ``sources`` (raw source sentences, for the length
    buckets) are segmented by ``source_lang``'s tokeniser, which they then require;
    ``scored`` says what was scored (the checkpoint and its training, the references).
    """
    metric = sacrebleu_metric(lang)
    buckets = unit = boot = gaps = None
    if sources is not None:
        if not source_lang:
            raise ValueError("length buckets need the source language (source_lang)")
        length = source_length(source_lang)
        buckets = tuple(bleu_by_length(sources, hyps, refs, options.edges, length=length,
                                       metric=metric))  # fmt: skip
        unit = f"{tokenizer_name(source_lang)} words of the {source_lang} source"
    if baseline_hyps is not None:
        boot = paired_bootstrap(baseline_hyps, hyps, refs, metric, options.bootstrap_samples,
                                options.seed)  # fmt: skip
        gaps = tuple(ngram_precision_gaps(baseline_hyps, hyps, refs, metric))
    return Scores(
        sentences=len(hyps), sacrebleu=sacrebleu_score(hyps, refs, lang),
        tokenized_bleu=tokenized_bleu(hyps, refs, lang), length_buckets=buckets,
        length_unit=unit, bootstrap=boot, ngram_precision_gaps=gaps, scored=scored,
    )  # fmt: skip


def summary(scores: AnyScores) -> str:
    """Human-readable lines for typed scores (one test set, or NIST's sets)."""
    return scores.summary()
