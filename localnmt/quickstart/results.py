"""Gather what the report shows of the trained and scored systems: BLEU with sacrebleu's
bootstrap intervals and paired tests, updates, speed, parameters and learning curves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localnmt.catalog import CatalogRow
from localnmt.data.layout import count_lines
from localnmt.evaluation.metrics import sacrebleu_metric
from localnmt.evaluation.scoring import read_lines
from localnmt.evaluation.significance import bootstrap_intervals
from localnmt.quickstart.report import SystemResult
from localnmt.runs.generate import infer_langs
from localnmt.runs.layout import RunLayout
from localnmt.runs.timed_validation import read_curve
from localnmt.runs.train_log import read_train_log

_GETTEXT = {
    "en-de": "gettext En→De",
    "en-zh": "gettext En→Zh",
}


def label(row: CatalogRow) -> str:
    """``paper: row`` (``zhang2021: Our Method``)."""
    return f"{row.paper}: {row.row}"


def collect(
    systems: list[CatalogRow], layouts: list[RunLayout], ref: Path, samples: int
) -> tuple[list[SystemResult], str, int]:
    """One :class:`SystemResult` per system (the first is the baseline), the SacreBLEU
    signature and the number of test sentences."""
    refs = read_lines(ref)
    scores = [json.loads(layout.scores.read_text(encoding="utf-8")) for layout in layouts]
    lang = scores[0]["target_lang"]
    hyps = [(row.name, read_lines(layout.hypotheses)) for row, layout in zip(systems, layouts)]
    intervals = bootstrap_intervals(hyps, refs, sacrebleu_metric(lang), samples)
    results = []
    for row, layout, interval in zip(systems, layouts, intervals):
        train_log = read_train_log(layout.train_log)
        curve = read_curve(layout.curve)
        updates = max([train_log.num_updates, *(p["updates"] for p in curve)])
        seconds = curve[-1]["minutes"] * 60 if curve else 0.0
        results.append(SystemResult(
            name=row.name, row=label(row), arch=row.arch, args=list(row.args),
            bleu=round(interval.score, 2),
            ci=[round(float(interval.ci[0]), 2), round(float(interval.ci[1]), 2)],
            p_value=None if interval.p_value is None else round(float(interval.p_value), 4),
            updates=updates,
            updates_per_s=round(updates / seconds, 3) if seconds else train_log.ups,
            params=train_log.params, curve=curve))  # fmt: skip
    return results, scores[0]["sacrebleu"]["signature"], len(refs)


def corpus_meta(data_bin: Path, pair: str | None) -> dict[str, Any]:
    """Name, one-line description and subset sizes of the corpus."""
    src, tgt = infer_langs(data_bin, "test")
    sizes = {s: count_lines(data_bin, s, src, tgt) for s in ("train", "valid", "test")}
    if pair:
        name = _GETTEXT.get(pair, pair)
        text = (f"{sizes['train']:,} training pairs of software-interface strings (the gettext "
                "catalogs installed on this machine; short UI messages, not news)")  # fmt: skip
    else:
        name = f"{Path(data_bin).name} ({src}→{tgt})"
        text = f"{sizes['train']:,} training pairs of {data_bin}"
    return {"corpus": name, "corpus_description": text, "corpus_sizes": sizes,
            "data_bin": str(data_bin), "languages": [src, tgt]}  # fmt: skip
