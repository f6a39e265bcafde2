"""Scores of detokenised hypotheses against raw references, the ways the papers report them.

SacreBLEU with its signature, tokenized BLEU (multi-bleu style, German compound splitting),
BLEU by source-length bucket, and against a baseline: paired bootstrap significance and n-gram
precision gaps (:func:`score`); :func:`summary` prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from localnmt.data.text_tokenize import tokenizer_name
from localnmt.data.validate import iter_lines_checked
from localnmt.evaluation.breakdown import bleu_by_length, ngram_precision_gaps, source_length
from localnmt.evaluation.metrics import sacrebleu_metric, sacrebleu_score, tokenized_bleu
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


def score(
    hyps: Sequence[str],
    refs: Sequence[str],
    lang: str,
    *,
    sources: Sequence[str] | None = None,
    source_lang: str | None = None,
    baseline_hyps: Sequence[str] | None = None,
    edges: Sequence[int] = (20, 40),
    bootstrap_samples: int = 1000,
    seed: int = 12345,
) -> dict:
    """All scores of detokenised hypotheses against raw references, as a JSON-able dict.

    ``lang`` is the target language; ``sources`` (raw source sentences, for the length
    buckets) are segmented by ``source_lang``'s tokeniser, which they then require.
    """
    result: dict = {
        "sentences": len(hyps),
        "sacrebleu": sacrebleu_score(hyps, refs, lang).to_dict(),
        "tokenized_bleu": tokenized_bleu(hyps, refs, lang).to_dict(),
    }
    metric = sacrebleu_metric(lang)
    if sources is not None:
        if not source_lang:
            raise ValueError("length buckets need the source language (source_lang)")
        length = source_length(source_lang)
        buckets = bleu_by_length(sources, hyps, refs, edges, length=length, metric=metric)
        result["length_buckets"] = [b.to_dict() for b in buckets]
        result["length_unit"] = f"{tokenizer_name(source_lang)} words of the {source_lang} source"
    if baseline_hyps is not None:
        test = paired_bootstrap(baseline_hyps, hyps, refs, metric, bootstrap_samples, seed)
        result["bootstrap"] = test.to_dict()
        result["ngram_precision_gaps"] = ngram_precision_gaps(baseline_hyps, hyps, refs, metric)
    return result


def summary(result: dict) -> str:
    """Human-readable lines for a scores dict."""
    lines = [
        f"SacreBLEU {result['sacrebleu']['score']:.2f}  ({result['sacrebleu']['signature']})",
        f"tokenized BLEU {result['tokenized_bleu']['score']:.2f}",
    ]
    if result.get("training"):
        from localnmt.provenance import describe_training

        lines.append(f"checkpoint {result['training']['checkpoint']}: "
                     f"{describe_training(result['training'])}")  # fmt: skip
    if "bootstrap" in result:
        b = result["bootstrap"]
        lines.append(f"vs baseline: {b['delta']:+.2f} BLEU, p={b['p_value']:.3f} {b['marker']}")
        gaps = ", ".join(f"{g:+.2f}" for g in result["ngram_precision_gaps"])
        lines.append(f"n-gram precision gaps (1..4): {gaps}")
    if "length_unit" in result:
        lines.append(f"BLEU by source length ({result['length_unit']}):")
    for b in result.get("length_buckets", []):
        bleu = "-" if b["bleu"] is None else f"{b['bleu']:.2f}"
        lines.append(f"  source length {b['label']}: {b['sentences']} sentences, BLEU {bleu}")
    return "\n".join(lines)
