"""One quickstart system: its training spec under the budget, trained, translated and scored.

Everything goes through :func:`localnmt.runs.experiment.train_and_score`, the project's one
path from a spec to a score: the training step's fingerprint covers the data's contents, the
architecture and every training option, so a rerun with other settings retrains (the old
checkpoints, with their learning curve, are set aside) and an identical rerun skips a finished
run or resumes an interrupted one from ``checkpoint_last.pt``; the evaluation step reruns when
its checkpoint or references changed. What the quickstart adds: a wall-clock budget
(``--stop-time-hours``) and validations evenly spaced in wall clock
(:mod:`localnmt.runs.timed_validation`), written to the run's learning curve.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from localnmt.catalog import CatalogRow
from localnmt.quickstart.sizing import Sizing
from localnmt.runs.experiment import ExperimentResult, TestSet, train_and_score
from localnmt.runs.layout import RunLayout
from localnmt.runs.spec import DecodeSpec, TrainSpec
from localnmt.steps import StepRunner

_PROGRESS = ("| valid |", "done training", "Stopping training")
_ECHO_EVERY = 250  # updates between echoed training-loss lines (the log has every 10th)


def budget_args(layout: RunLayout, minutes: float, validate_every: float) -> list[str]:
    """fairseq-train arguments of a wall-clock budget with evenly spaced validations."""
    return [
        "--stop-time-hours", f"{minutes / 60:.5f}",
        "--validate-every-minutes", f"{validate_every:.4f}",
        "--curve", str(layout.curve),
        # only the wall-clock validations: no per-epoch validation or checkpoint
        "--validate-interval", "100000", "--save-interval", "100000",
        "--no-epoch-checkpoints", "--keep-interval-updates", "1",
    ]  # fmt: skip


def system_spec(
    row: CatalogRow,
    sizing: Sizing,
    data_bin: Path,
    layout: RunLayout,
    *,
    cpu: bool,
    max_update: int,
    extra: tuple[str, ...] = (),
) -> TrainSpec:
    """The training of one system: the row's arch and arguments on the sizing's recipe."""
    return TrainSpec(
        data=str(data_bin), save_dir=str(layout.checkpoints), arch=row.arch, size=sizing.recipe,
        recipe_overrides=sizing.overrides, precision=sizing.precision, max_update=max_update,
        cpu=cpu, gpus=0 if cpu else None, extra=(*row.args, *extra),
    )  # fmt: skip


def budgeted(
    spec: TrainSpec, layout: RunLayout, minutes: float, validate_every: float
) -> TrainSpec:
    """``spec`` trained for ``minutes`` of wall clock, validated every ``validate_every``."""
    return spec.replace(extra=(*spec.extra, *budget_args(layout, minutes, validate_every)))


def run_system(
    row: CatalogRow,
    spec: TrainSpec,
    layout: RunLayout,
    test: TestSet,
    minutes: float,
    validate_every: float,
    log: Callable[[str], None],
    decode: DecodeSpec | None = None,
) -> ExperimentResult:
    """Train (or reuse, or resume) one system for ``minutes``, then translate the test set
    with the last checkpoint and score it."""

    def progress(line: str) -> None:
        updates = re.search(r"num_updates=(\d+)", line) if "train_inner" in line else None
        echoed = updates is not None and int(updates.group(1)) % _ECHO_EVERY == 0
        if echoed or any(key in line for key in _PROGRESS):
            log("    " + line.split(" | ", 3)[-1][:150])

    log(f"{row.name}: {minutes:.1f} min of training, validation every {validate_every:.2f} min")
    result = train_and_score(
        budgeted(spec, layout, minutes, validate_every), layout,
        StepRunner(layout.root, log=log), decode=decode or DecodeSpec(), test=test, average=0,
        log=log, on_line=progress,
    )  # fmt: skip
    assert result.scores is not None
    log(f"{row.name}: SacreBLEU {result.scores['sacrebleu']['score']:.2f}")
    return result
