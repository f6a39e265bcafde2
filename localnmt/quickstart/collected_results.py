"""Gather what the report shows of the trained and scored systems: BLEU with sacrebleu's
bootstrap intervals and paired tests, updates, speed, parameters and learning curves."""

from __future__ import annotations

import statistics
from pathlib import Path

from localnmt.catalog import CatalogRow
from localnmt.catalog.names import system_name
from localnmt.data.corpus_layout import count_lines
from localnmt.evaluation.metrics import sacrebleu_metric
from localnmt.evaluation.results import Scores, TrainingRecord, read_scores
from localnmt.evaluation.scoring import read_lines
from localnmt.evaluation.significance import bootstrap_intervals
from localnmt.quickstart.report import SeedRun, SystemResult
from localnmt.quickstart.run_record import Corpus, CorpusSizes
from localnmt.runs.generate import infer_langs
from localnmt.runs.layout import RunLayout
from localnmt.runs.timed_validation import read_curve
from localnmt.runs.train_log import read_train_log

_GETTEXT = {
    "en-de": "gettext En→De",
    "en-zh": "gettext En→Zh",
}


def label(row: CatalogRow) -> str:
    """What the system is, then its paper and row: ``GMM cross-attention (Zhang & Feng 2021,
    Table 2: Our Method)``, not the paper's own label alone."""
    return system_name(row)


def run_result(layout: RunLayout, seed: int, bleu: float,
               training: TrainingRecord | None = None) -> SeedRun:  # fmt: skip
    """One trained run: its BLEU, updates, minutes of training (the trainer's clock, which
    counts validations too), training speed (fairseq's median updates/s over the logged
    intervals, as the calibration measures it) and learning curve."""
    train_log = read_train_log(layout.train_log)
    curve = read_curve(layout.curve)
    updates = max([train_log.num_updates, *(p.updates for p in curve)])
    minutes = curve[-1].minutes if curve else 0.0
    speed = train_log.ups or (round(updates / (minutes * 60), 3) if minutes else None)
    return SeedRun(seed=seed, bleu=round(bleu, 2), updates=updates, minutes=round(minutes, 2),
                   updates_per_s=speed, params=train_log.params, curve=curve,
                   training=training)  # fmt: skip


def collect(
    systems: list[CatalogRow], layouts: list[list[RunLayout]], ref: Path, samples: int
) -> tuple[list[SystemResult], str, int]:
    """One :class:`SystemResult` per system (the first is the baseline) from its runs, one
    per seed (``layouts[i][k]``: system ``i``, seed ``k + 1``); the SacreBLEU signature and
    the number of test sentences.

    BLEU is the mean over seeds (with their standard deviation when there are several). The
    95 % interval and the paired test against the baseline are sacrebleu's bootstrap over the
    test sentences of every seed at once: each run's output is concatenated in seed order,
    and seed k of a system is paired with seed k of the baseline, so the test sees both the
    test set's and the seeds' variation."""
    refs = read_lines(ref)
    seeds = len(layouts[0])
    first = single_ref_scores(layouts[0][0])
    assert first.scored is not None
    metric = sacrebleu_metric(first.scored.target_lang)
    joined = [(row.name, [line for layout in runs for line in read_lines(layout.hypotheses)])
              for row, runs in zip(systems, layouts)]  # fmt: skip
    intervals = bootstrap_intervals(joined, refs * seeds, metric, samples)
    results = []
    for row, runs, interval in zip(systems, layouts, intervals):
        per_seed = []
        for k, layout in enumerate(runs, 1):
            scores = single_ref_scores(layout)
            per_seed.append(run_result(layout, k, scores.bleu, scores.training))
        bleus = [r.bleu for r in per_seed]
        results.append(SystemResult(
            name=row.name, row=label(row), arch=row.arch, args=list(row.args),
            bleu=round(statistics.fmean(bleus), 2),
            bleu_sd=round(statistics.stdev(bleus), 2) if len(bleus) > 1 else None,
            ci=[round(float(interval.ci[0]), 2), round(float(interval.ci[1]), 2)],
            p_value=None if interval.p_value is None else round(float(interval.p_value), 4),
            updates=round(statistics.fmean(r.updates for r in per_seed)),
            minutes=round(statistics.fmean(r.minutes for r in per_seed), 2),
            updates_per_s=per_seed[0].updates_per_s if len(per_seed) == 1 else round(
                statistics.fmean(r.updates_per_s or 0 for r in per_seed), 3),
            params=per_seed[0].params, curve=per_seed[0].curve, seeds=per_seed))  # fmt: skip
    return results, first.signature, len(refs)


def single_ref_scores(layout: RunLayout) -> Scores:
    """A system's ``scores.json`` (the quickstart scores against one reference)."""
    scores = read_scores(layout.scores)
    if not isinstance(scores, Scores):
        raise TypeError(f"{layout.scores}: multi-reference scores in a quickstart run")
    return scores


def corpus_info(data_bin: Path, pair: str | None) -> Corpus:
    """Name, one-line description, subset sizes and languages of the corpus (``pair``: the
    gettext pair it was built from; None for the user's data-bin)."""
    src, tgt = infer_langs(data_bin, "test")
    sizes = CorpusSizes(*(count_lines(data_bin, s, src, tgt) for s in ("train", "valid", "test")))
    if pair:
        name = _GETTEXT.get(pair, pair)
        text = (f"{sizes.train:,} training pairs of software-interface strings (the gettext "
                "catalogs installed on this machine; short UI messages, not news)")  # fmt: skip
    else:
        name = f"{Path(data_bin).name} ({src}→{tgt})"
        text = f"{sizes.train:,} training pairs of {data_bin}"
    return Corpus(name, text, sizes, str(data_bin), (src, tgt))
