"""Train, then translate and score: the one path from a spec to a BLEU score.

:func:`train_and_score` is what the quickstart (each system), ``reproduce`` (each catalog
row) and ``localnmt-train --evaluate`` run. Training is :func:`~localnmt.runs.train_run.
train_run`; scoring is a second step, ``evaluate``, which depends on the training step and on
the contents of what it reads (the checkpoint, the references, the sources, the baseline's
hypotheses), so a rerun redoes it exactly when one of those changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localnmt.data.metadata import post_processing
from localnmt.evaluation.results import AnyScores, read_scores
from localnmt.paths import default_user_dir
from localnmt.runs.decode_and_score import evaluate_checkpoint
from localnmt.runs.layout import RunLayout
from localnmt.runs.nist_eval import evaluate_nist
from localnmt.runs.recipes import effective_recipe
from localnmt.runs.spec import DecodeSpec, TrainSpec
from localnmt.runs.train_run import TrainRun, train_run
from localnmt.steps import Log, StepRunner


@dataclass(frozen=True)
class TestSet:
    """What a trained model is scored on."""

    subset: str = "test"
    #: raw references (None: fairseq's post-processed target lines)
    ref: Path | None = None
    #: raw sources, for BLEU by source length (None: fairseq's source lines)
    src: Path | None = None
    #: NIST's four references per set (``refs/subsets.json``): every test subset is decoded
    nist_refs: Path | None = None
    #: the baseline run's evaluation folder: its hypotheses are the paired test's reference
    baseline: Path | None = None

    def inputs(self) -> list[Path | None]:
        """The files whose contents decide the scores (for the step's fingerprint)."""
        base = self.baseline / "hyp.txt" if self.baseline and not self.nist_refs else self.baseline
        return [self.ref, self.src, self.nist_refs, base]


@dataclass
class ExperimentResult:
    """A trained run and, when it was scored, its scores (``scores.json``, typed)."""

    train: TrainRun
    scores: AnyScores | None = None


def pick_checkpoint(layout: RunLayout, average: int, by_update: bool, log: Log = print) -> Path:
    """Average the last ``average`` checkpoints when there are enough, else the last one.
    The average is made again at every evaluation (a step that reruns only when its
    training or its settings changed), never read back from an earlier one."""
    from localnmt.runs.average_checkpoints import last_n_checkpoints, write_average

    if average > 1:
        try:
            paths = last_n_checkpoints(layout.checkpoints, average, by_update=by_update)
        except ValueError as err:
            log(f"  not averaging: {err}")
        else:
            log(f"  averaging {', '.join(p.name for p in paths)}")
            return write_average(paths, layout.checkpoints / f"checkpoint_avg{average}.pt")
    return layout.last_checkpoint


def score_checkpoint(
    spec: TrainSpec, checkpoint: Path, layout: RunLayout, decode: DecodeSpec, test: TestSet,
    log: Log = print,
) -> AnyScores:  # fmt: skip
    """Translate ``test`` with ``checkpoint`` and score it into ``layout.eval_dir``."""
    if test.nist_refs is not None:
        return evaluate_nist(Path(spec.data), checkpoint, layout.eval_dir, test.nist_refs,
                             decode, baseline_dir=test.baseline,
                             user_dir=default_user_dir())  # fmt: skip
    baseline = test.baseline / "hyp.txt" if test.baseline else None
    return evaluate_checkpoint(Path(spec.data), checkpoint, layout.eval_dir, ref=test.ref,
                               src=test.src, baseline_hyp=baseline, subset=test.subset,
                               decode=decode, user_dir=default_user_dir())  # fmt: skip


def evaluation_params(spec: TrainSpec, decode: DecodeSpec, test: TestSet, average: int) -> dict:
    """What the evaluation step's fingerprint covers besides its input files: the decoding
    options, the subset, the averaging, the post-processing the data-bin records (resolved,
    so a data-bin that records another scheme is scored again) and the scoring."""
    return {
        "decode": decode.to_json(),
        "subset": test.subset,
        "average": average,
        "post_processing": list(post_processing(Path(spec.data), decode.bpe, decode.detok)),
        "scoring": "nist_multi_ref" if test.nist_refs else "bleu",
    }


def train_and_score(
    spec: TrainSpec,
    layout: RunLayout,
    runner: StepRunner | None = None,
    *,
    decode: DecodeSpec | None = None,
    test: TestSet | None = None,
    average: int | None = 0,
    rescore: bool = False,
    log: Log = print,
    echo: bool = False,
    on_line: Callable[[str], None] | None = None,
) -> ExperimentResult:
    """Train ``spec`` (a step of ``runner`` when one is given), then, when ``test`` is given,
    translate it with ``decode`` and score it (the step ``evaluate``). ``average``: how many
    last checkpoints to average (None: the recipe's ``average_last``; 0 or 1: the last);
    ``rescore`` evaluates again even when nothing changed."""
    trained = train_run(spec, layout, runner, log=log, echo=echo, on_line=on_line)
    if test is None:
        return ExperimentResult(trained)
    decode = decode or DecodeSpec()
    recipe = effective_recipe(spec.size, spec.recipe_overrides)
    n = recipe.average_last if average is None else average

    def evaluate() -> None:
        ckpt = pick_checkpoint(layout, n, recipe.save_interval_updates > 0, log)
        log(f"  evaluating {ckpt.name} ({decode.describe()})")
        score_checkpoint(spec, ckpt, layout, decode, test, log)

    if runner is None:
        evaluate()
    else:
        if rescore:
            runner.forget("evaluate")
        runner.run("evaluate", evaluate, outputs=[layout.scores],
                   params=evaluation_params(spec, decode, test, n), deps=("train",),
                   inputs=[layout.last_checkpoint, *test.inputs()])  # fmt: skip
    return ExperimentResult(trained, read_scores(layout.scores))
