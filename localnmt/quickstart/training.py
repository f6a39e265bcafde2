"""One quickstart system: its training spec and schedule, trained, translated and scored.

Everything goes through :func:`localnmt.runs.experiment.train_and_score`, the project's one
path from a spec to a score: the training step's fingerprint covers the data's contents, the
architecture, the seed and every training option, so a rerun with other settings retrains
(the old checkpoints, with their learning curve, are set aside) and an identical rerun skips a
finished run or resumes an interrupted one from ``checkpoint_last.pt``; the evaluation step
reruns when its checkpoint or references changed.

Two schedules (:class:`Schedule`). **Equal updates** (the default, the papers' convention):
every system trains exactly ``updates`` updates, validating at evenly spaced updates, so its
result does not depend on what else the machine did meanwhile. **Equal time**: every system
trains for the same wall clock (``--stop-time-hours``), validating at evenly spaced minutes
(:mod:`localnmt.runs.timed_validation`). Either way each validation is a point of the run's
learning curve (minutes of training, updates, validation loss).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localnmt.catalog import CatalogRow
from localnmt.quickstart.sizing import Sizing
from localnmt.runs.experiment import (
    ExperimentResult,
    TestSet,
    TranslationEvaluation,
    train_and_score,
)
from localnmt.runs.layout import RunLayout
from localnmt.runs.run_specs import DecodeSpec, TrainSpec
from localnmt.runs.train_run import TrainRun, train_run
from localnmt.steps import StepRunner

_PROGRESS = ("| valid |", "done training", "Stopping training")
_ECHO_EVERY = 250  # updates between echoed training-loss lines


@dataclass(frozen=True)
class Schedule:
    """How long each system trains: ``updates`` (equal updates) or ``minutes`` (equal wall
    clock), with ``validations`` evenly spaced points on its learning curve (equal updates:
    every ``every`` updates, by default ``updates // validations``, and at the end)."""

    validations: int
    updates: int | None = None
    minutes: float | None = None
    every: int | None = None

    def __post_init__(self) -> None:
        if (self.updates is None) == (self.minutes is None):
            raise ValueError("a schedule is either updates or minutes")

    @property
    def interval(self) -> int:
        """Updates between validations (equal updates)."""
        if self.updates is None:
            raise ValueError("an equal-time schedule validates by minutes")
        return self.every or max(1, self.updates // self.validations)

    def describe(self) -> str:
        if self.updates is not None:
            return f"{self.updates} updates"
        return f"{self.minutes:.1f} min of training"

    def fairseq_args(self, layout: RunLayout) -> list[str]:
        """fairseq-train arguments of this schedule (after the recipe's, so they win)."""
        common = [
            "--curve", str(layout.curve),
            "--no-epoch-checkpoints", "--keep-interval-updates", "1",
            # only the schedule's validations: none per epoch
            "--validate-interval", "100000", "--save-interval", "100000",
        ]  # fmt: skip
        if self.updates is not None:
            every = self.interval
            return [*common, "--max-update", str(self.updates),
                    "--validate-interval-updates", str(every),
                    "--save-interval-updates", str(every)]  # fmt: skip
        assert self.minutes is not None
        return [*common, "--stop-time-hours", f"{self.minutes / 60:.5f}",
                "--validate-every-minutes", f"{self.minutes / self.validations:.4f}"]  # fmt: skip


def system_spec(
    row: CatalogRow,
    sizing: Sizing,
    data_bin: Path,
    layout: RunLayout,
    *,
    cpu: bool,
    max_update: int,
    seed: int = 1,
) -> TrainSpec:
    """The training of one system: the row's arch and arguments on the sizing's recipe."""
    return TrainSpec(
        data=str(data_bin), save_dir=str(layout.checkpoints), arch=row.arch, size=sizing.recipe,
        recipe_overrides=sizing.overrides, precision=sizing.precision, max_update=max_update,
        cpu=cpu, gpus=0 if cpu else None, extra=(*row.args, "--seed", str(seed)),
    )  # fmt: skip


def scheduled(spec: TrainSpec, layout: RunLayout, schedule: Schedule) -> TrainSpec:
    """``spec`` trained on ``schedule``."""
    return spec.replace(extra=(*spec.extra, *schedule.fairseq_args(layout)))


def progress_echo(log: Callable[[str], None]) -> Callable[[str], None]:
    """What of fairseq's output the quickstart shows: every few hundred updates' training
    line, the validations and the end."""

    def progress(line: str) -> None:
        updates = re.search(r"num_updates=(\d+)", line) if "train_inner" in line else None
        echoed = updates is not None and int(updates.group(1)) % _ECHO_EVERY == 0
        if echoed or any(key in line for key in _PROGRESS):
            log("    " + line.split(" | ", 3)[-1][:150])

    return progress


def train_first_part(
    row: CatalogRow, spec: TrainSpec, layout: RunLayout, schedule: Schedule,
    log: Callable[[str], None],
) -> TrainRun:  # fmt: skip
    """Train (or reuse, or resume) the first part of one system's run (the step
    ``train-part``; :mod:`localnmt.quickstart.replan`): ``schedule`` is that part's."""
    log(f"{row.name}: first part, {schedule.describe()}")
    return train_run(scheduled(spec, layout, schedule), layout, StepRunner(layout.root, log=log),
                     name="train-part", log=log, on_line=progress_echo(log))  # fmt: skip


def run_system(
    row: CatalogRow,
    spec: TrainSpec,
    layout: RunLayout,
    test: TestSet,
    schedule: Schedule,
    log: Callable[[str], None],
    decode: DecodeSpec | None = None,
    extends: tuple[str, ...] = (),
) -> ExperimentResult:
    """Train (or reuse, or resume) one system on ``schedule`` (going on from the run of
    fingerprint in ``extends``, its first part, when that is in ``layout``), then translate
    the test set with the last checkpoint and score it."""

    log(f"{row.name}: {schedule.describe()}, {schedule.validations} validations")
    result = train_and_score(
        scheduled(spec, layout, schedule), layout, StepRunner(layout.root, log=log),
        evaluation=TranslationEvaluation(test, decode or DecodeSpec()), log=log,
        on_line=progress_echo(log), extends=extends,
    )  # fmt: skip
    assert result.scores is not None
    log(f"{row.name}: SacreBLEU {result.scores.bleu:.2f}")
    return result
