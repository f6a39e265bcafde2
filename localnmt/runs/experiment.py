"""Train, then evaluate: the one path from a catalog row to its scores.

:func:`train_and_score` is what the quickstart (each system), ``reproduce`` (each catalog
row, translation or GLUE) and ``localnmt-train --evaluate`` run. Training is
:func:`~localnmt.runs.train_run.train_run`; evaluating is a typed :class:`Evaluation` of the
row's task: :class:`TranslationEvaluation` (decode, then SacreBLEU and the rest: ``Scores``,
or ``MultiRefScores`` for NIST) or :class:`~localnmt.runs.glue_runs.GlueEvaluation` (the dev
accuracy per GLUE task). A translation's evaluation is a second step, ``evaluate``, which
depends on the training step and on the contents of what it reads (the checkpoint, the
references, the sources, the baseline's hypotheses), so a rerun redoes it exactly when one
of those changed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from localnmt.data.metadata import post_processing
from localnmt.evaluation.results import AnyScores, read_scores
from localnmt.paths import default_user_dir
from localnmt.runs.decode_and_score import TestSet, score_checkpoint
from localnmt.runs.layout import RunLayout
from localnmt.runs.recipes import effective_recipe
from localnmt.runs.run_specs import DEFAULT_DECODING, DecodeSpec, TrainSpec
from localnmt.runs.train_run import TrainCommand, TrainRun, train_run
from localnmt.steps import Log, StepRunner

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True)
class EvaluationStep:
    """What an evaluation step's fingerprint covers besides the training it follows."""

    params: dict
    inputs: list[Path | None]
    outputs: list[Path]
    deps: tuple[str, ...] = ("train",)


class Evaluation(Protocol[R_co]):
    """A task's evaluation of a trained run, giving a typed result."""

    def step(self, trained: TrainRun) -> EvaluationStep | None:
        """The evaluation as a step after training (None: no step, read afresh each time)."""
        ...

    def evaluate(self, trained: TrainRun, log: Log) -> None:
        """Evaluate ``trained``, writing the step's outputs."""
        ...

    def result(self, trained: TrainRun) -> R_co:
        """The typed result, read back from the outputs."""
        ...


@dataclass
class ExperimentResult(Generic[R]):
    """A trained run and, when it was evaluated, its result (typed: ``scores.json`` of a
    translation, the dev accuracies of a GLUE row)."""

    train: TrainRun
    scores: R | None = None


def pick_checkpoint(layout: RunLayout, average: int, by_update: bool, log: Log = print) -> Path:
    """Average the last ``average`` checkpoints when there are enough, else the last one.
    The average is made again at every evaluation (a step that reruns only when its
    training or its settings changed), never read back from an earlier one."""
    from localnmt.runs.average_checkpoints import average_last

    if average > 1:
        out = layout.checkpoints / f"checkpoint_avg{average}.pt"
        try:
            return average_last(layout.checkpoints, average, by_update, out, log)
        except ValueError as err:
            log(f"  not averaging: {err}")
    return layout.last_checkpoint


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


@dataclass(frozen=True)
class TranslationEvaluation:
    """Translate ``test`` with the trained model as ``decode`` says and score it into
    ``layout.eval_dir`` (:func:`~localnmt.runs.decode_and_score.score_checkpoint`): the step
    ``evaluate``. ``average``: how many last checkpoints to average (None: the recipe's
    ``average_last``; 0 or 1: the last)."""

    test: TestSet
    decode: DecodeSpec = DEFAULT_DECODING
    average: int | None = 0

    def _spec(self, trained: TrainRun) -> TrainSpec:
        if trained.spec is None:
            raise ValueError("a translation is evaluated after training a TrainSpec")
        return trained.spec

    def _average(self, spec: TrainSpec) -> int:
        recipe = effective_recipe(spec.size, spec.recipe_overrides)
        return recipe.average_last if self.average is None else self.average

    def step(self, trained: TrainRun) -> EvaluationStep:
        """Reruns when the checkpoint, a file the scores read or a setting changed."""
        spec = self._spec(trained)
        return EvaluationStep(
            evaluation_params(spec, self.decode, self.test, self._average(spec)),
            inputs=[trained.layout.last_checkpoint, *self.test.inputs()],
            outputs=[trained.layout.scores],
        )  # fmt: skip

    def evaluate(self, trained: TrainRun, log: Log) -> None:
        """Pick (or average) the checkpoint, translate and score."""
        spec, layout = self._spec(trained), trained.layout
        save_by_update = effective_recipe(spec.size, spec.recipe_overrides).save_interval_updates
        ckpt = pick_checkpoint(layout, self._average(spec), save_by_update > 0, log)
        log(f"  evaluating {ckpt.name} ({self.decode.describe()})")
        score_checkpoint(Path(spec.data), ckpt, layout.eval_dir, self.test, self.decode,
                         user_dir=default_user_dir())  # fmt: skip

    def result(self, trained: TrainRun) -> AnyScores:
        """``scores.json``, typed."""
        return read_scores(trained.layout.scores)


def train_and_score(
    training: TrainSpec | Sequence[TrainCommand],
    layout: RunLayout,
    runner: StepRunner | None = None,
    *,
    evaluation: Evaluation[R] | None = None,
    rescore: bool = False,
    log: Log = print,
    echo: bool = False,
    on_line: Callable[[str], None] | None = None,
    extends: Collection[str] = (),
) -> ExperimentResult[R]:
    """Train (:func:`~localnmt.runs.train_run.train_run`: a :class:`TrainSpec`, or a GLUE
    row's commands; steps of ``runner`` when one is given; ``extends``: fingerprints of
    shorter runs of the same training whose checkpoints it goes on from), then, when
    ``evaluation`` is given, evaluate (a step ``evaluate`` of ``runner`` where the evaluation
    is one) and read its typed result. ``rescore`` evaluates again even when nothing
    changed."""
    trained = train_run(training, layout, runner, log=log, echo=echo, on_line=on_line,
                        extends=extends)  # fmt: skip
    if evaluation is None:
        return ExperimentResult(trained)
    step = evaluation.step(trained)
    if runner is None or step is None:
        evaluation.evaluate(trained, log)
    else:
        if rescore:
            runner.forget("evaluate")
        runner.run("evaluate", lambda: evaluation.evaluate(trained, log), outputs=step.outputs,
                   params=step.params, deps=step.deps, inputs=step.inputs)  # fmt: skip
    return ExperimentResult(trained, evaluation.result(trained))
