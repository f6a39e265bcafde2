"""Translate each trained system, then gather what the report shows: BLEU with sacrebleu's
bootstrap intervals and paired tests, updates, speed, parameters and learning curves."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localnmt.data.steps import StepRunner
from localnmt.quickstart.report import SystemResult

_GETTEXT = {
    "en-de": "gettext En→De",
    "en-zh": "gettext En→Zh",
}


def translate_system(
    runner: StepRunner, row: dict, run_dir: Path, data_bin: Path, ref: Path, src: Path,
    train_step: str, user_dir: str | None, log: Callable[[str], None],
) -> None:  # fmt: skip
    """Beam search (beam 4, length penalty 0.6) on the test set with the last checkpoint, then
    scoring against the raw references; a step that depends on the training step."""
    from localnmt.data.metadata import post_processing
    from localnmt.runs.evaluate import evaluate_checkpoint

    out = run_dir / "eval"

    def translate() -> None:
        log(f"{row['name']}: translating the test set")
        result = evaluate_checkpoint(
            data_bin, run_dir / "checkpoints" / "checkpoint_last.pt", out, ref=ref,
            src=src if src.exists() else None, user_dir=user_dir)  # fmt: skip
        log(f"{row['name']}: SacreBLEU {result['sacrebleu']['score']:.2f}")

    runner.run(f"translate.{row['name']}", translate, deps=(train_step,),
               params={"ref": str(ref), "beam": 4, "lenpen": 0.6,
                       "post_processing": list(post_processing(data_bin))},
               outputs=[out / "hyp.txt", out / "scores.json"])  # fmt: skip


def label(row: dict) -> str:
    """``paper: row`` (``zhang2021: Our Method``), the row alone when the paper is unknown."""
    return f"{row['paper']}: {row['row']}" if row.get("paper") else row["row"]


def collect(
    systems: list[dict], workdir: Path, ref: Path, samples: int
) -> tuple[list[SystemResult], str, int]:
    """One :class:`SystemResult` per system (the first is the baseline), the SacreBLEU
    signature and the number of test sentences."""
    from localnmt.evaluation.metrics import sacrebleu_metric
    from localnmt.evaluation.scoring import read_lines
    from localnmt.evaluation.significance import bootstrap_intervals
    from localnmt.quickstart.cli import slug
    from localnmt.quickstart.training import curve_path
    from localnmt.runs.timed_validation import read_curve
    from localnmt.runs.train_log import read_train_log

    refs = read_lines(ref)
    run_dirs = [workdir / "runs" / slug(row["name"]) for row in systems]
    scores = [json.loads((d / "eval" / "scores.json").read_text()) for d in run_dirs]
    lang = scores[0]["target_lang"]
    hyps = [(row["name"], read_lines(d / "eval" / "hyp.txt")) for row, d in zip(systems, run_dirs)]
    intervals = bootstrap_intervals(hyps, refs, sacrebleu_metric(lang), samples)
    results = []
    for row, run_dir, interval in zip(systems, run_dirs, intervals):
        train_log = read_train_log(run_dir / "train.log")
        curve = read_curve(curve_path(run_dir))
        updates = max([train_log.num_updates, *(p["updates"] for p in curve)])
        seconds = curve[-1]["minutes"] * 60 if curve else 0.0
        results.append(SystemResult(
            name=row["name"], row=label(row), arch=row["arch"], args=list(row.get("args", [])),
            bleu=round(interval.score, 2),
            ci=[round(float(interval.ci[0]), 2), round(float(interval.ci[1]), 2)],
            p_value=None if interval.p_value is None else round(float(interval.p_value), 4),
            updates=updates,
            updates_per_s=round(updates / seconds, 3) if seconds else train_log.ups,
            params=train_log.params, curve=curve))  # fmt: skip
    return results, scores[0]["sacrebleu"]["signature"], len(refs)


def corpus_meta(data_bin: Path, pair: str | None) -> dict[str, Any]:
    """Name, one-line description and subset sizes of the corpus."""
    from localnmt.data.layout import count_lines
    from localnmt.runs.generate import infer_langs

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
