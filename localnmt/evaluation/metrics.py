"""Corpus BLEU: SacreBLEU (with signature) and tokenized BLEU as the papers reported it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU

from localnmt.evaluation.inputs import require_parallel
from localnmt.evaluation.postprocess import CJK_LANGS, moses_tokenize


@dataclass
class BleuResult:
    """A corpus BLEU score with its details."""

    score: float
    precisions: list[float]
    bp: float
    sys_len: int
    ref_len: int
    signature: str
    text: str

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


def sacrebleu_metric(lang: str) -> BLEU:
    """SacreBLEU's default BLEU (13a tokenizer; ``zh`` tokenizer for Chinese targets)."""
    return BLEU(tokenize="zh" if lang == "zh" else "13a")


def _result(metric: BLEU, hyps: Sequence[str], refs: Sequence[str]) -> BleuResult:
    require_parallel(hyps, refs)
    score = metric.corpus_score(list(hyps), [list(refs)])
    return BleuResult(
        score=score.score,
        precisions=list(score.precisions),
        bp=score.bp,
        sys_len=score.sys_len,
        ref_len=score.ref_len,
        signature=str(metric.get_signature()),
        text=str(score),
    )


def sacrebleu_score(hyps: Sequence[str], refs: Sequence[str], lang: str) -> BleuResult:
    """Detokenised hypotheses against raw references with SacreBLEU."""
    return _result(sacrebleu_metric(lang), hyps, refs)


def tokenized_metric() -> BLEU:
    """multi-bleu.perl equivalent: no further tokenisation, no smoothing."""
    return BLEU(tokenize="none", smooth_method="none", force=True)


def tokenize_for_bleu(lines: Sequence[str], lang: str) -> list[str]:
    """Moses tokenisation (+ German compound splitting); character-level for CJK."""
    if lang in CJK_LANGS:
        from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

        tok = TokenizerZh()
        return [tok(line) for line in lines]
    return [moses_tokenize(line, lang) for line in lines]


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str], lang: str) -> BleuResult:
    """Tokenized BLEU (multi-bleu style) of detokenised hypotheses and raw references."""
    return _result(tokenized_metric(), tokenize_for_bleu(hyps, lang), tokenize_for_bleu(refs, lang))
