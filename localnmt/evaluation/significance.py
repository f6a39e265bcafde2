"""Paired bootstrap resampling (Koehn, 2004) of corpus BLEU between two systems."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from localnmt.evaluation.inputs import require_parallel


@dataclass
class BootstrapResult:
    """Outcome of a paired bootstrap test of ``system`` against ``baseline``."""

    baseline: float
    system: float
    delta: float
    p_value: float
    wins: int
    samples: int
    marker: str

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


def significance_marker(p_value: float, delta: float) -> str:
    """``⇑`` for p<0.01 and ``↑`` for p<0.05 when better; ``⇓``/``↓`` when worse; else ``''``."""
    if p_value < 0.01:
        return "⇑" if delta > 0 else "⇓"
    if p_value < 0.05:
        return "↑" if delta > 0 else "↓"
    return ""


def sentence_stats(metric: BLEU, hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-sentence BLEU sufficient statistics, shape (N, 2 + 2 * max_ngram_order)."""
    require_parallel(hyps, refs)
    return np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.int64)


def bleu_from_stats(metric: BLEU, stats: np.ndarray) -> float:
    """Corpus BLEU of summed statistics, exactly as ``metric.corpus_score`` computes it."""
    return metric._compute_score_from_stats([int(x) for x in stats]).score


def paired_bootstrap(
    baseline_hyps: Sequence[str],
    system_hyps: Sequence[str],
    refs: Sequence[str],
    metric: BLEU | None = None,
    samples: int = 1000,
    seed: int = 12345,
) -> BootstrapResult:
    """Koehn's paired bootstrap: resample test sentences with replacement ``samples`` times.

    ``p_value`` is the fraction of samples in which the system is *not* better than the
    baseline (one-sided, so identical systems give p=1); if the system is worse overall the
    test is mirrored (fraction of samples in which it is not worse). Deterministic per seed.
    """
    metric = metric or BLEU()
    base = sentence_stats(metric, baseline_hyps, refs)
    system = sentence_stats(metric, system_hyps, refs)
    base_score = bleu_from_stats(metric, base.sum(0))
    sys_score = bleu_from_stats(metric, system.sum(0))
    delta = sys_score - base_score
    rng = np.random.default_rng(seed)
    n = len(refs)
    wins = 0
    for _ in range(samples):
        idx = rng.integers(0, n, size=n)
        diff = bleu_from_stats(metric, system[idx].sum(0)) - bleu_from_stats(
            metric, base[idx].sum(0)
        )
        wins += int(diff > 0) if delta >= 0 else int(diff < 0)
    p_value = 1.0 - wins / samples
    return BootstrapResult(
        baseline=base_score,
        system=sys_score,
        delta=delta,
        p_value=p_value,
        wins=wins,
        samples=samples,
        marker=significance_marker(p_value, delta) if delta else "",
    )


@dataclass
class SystemInterval:
    """sacrebleu's bootstrap estimate for one system: BLEU, resampled mean and 95 % interval;
    ``p_value`` of the paired test against the first system (None for the first)."""

    name: str
    score: float
    mean: float
    ci: tuple[float, float]
    p_value: float | None

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


def bootstrap_intervals(
    named_hyps: Sequence[tuple[str, Sequence[str]]],
    refs: Sequence[str],
    metric: BLEU | None = None,
    samples: int = 1000,
) -> list[SystemInterval]:
    """95 % bootstrap intervals and paired bootstrap tests against the first system, both by
    sacrebleu's own resampling (``sacrebleu.significance.PairedTest``, test type ``bs``; seed
    from ``SACREBLEU_SEED``, 12345 by default). The interval is sacrebleu's: the resampled
    mean ± half the distance between the 2.5th and 97.5th percentiles, cut to BLEU's range
    [0, 100] (near 0 the symmetric interval would reach below it). sacrebleu counts
    resampled differences strictly above the observed one, so two systems with the same
    score would get p = 1/(samples+1); an observed difference of exactly zero gets p = 1."""
    from sacrebleu.significance import PairedTest

    systems = [(name, list(hyps)) for name, hyps in named_hyps]
    for name, hyps in systems:
        require_parallel(hyps, refs, system=name)
    metric = metric or BLEU()
    test = PairedTest(systems, {"BLEU": metric}, [list(refs)], test_type="bs",
                      n_samples=samples)  # fmt: skip
    _, scores = test()
    results = next(v for k, v in scores.items() if k != "System")
    base = results[0].score
    return [
        SystemInterval(name, float(r.score), float(r.mean),
                       (max(float(r.mean - r.ci), 0.0), min(float(r.mean + r.ci), 100.0)),
                       None if r.p_value is None else 1.0 if r.score == base else float(r.p_value))
        for (name, _), r in zip(systems, results)
    ]  # fmt: skip
