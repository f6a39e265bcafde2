"""Train one quickstart system for its share of the budget, as a resumable step.

Training goes through :func:`localnmt.runs.train_run.train_run`, the project's one training
step: its fingerprint covers the data, the architecture and every training option, so a rerun
with other settings retrains (the old checkpoints, with their learning curve, are set aside) and
an identical rerun skips a finished run or resumes an interrupted one from
``checkpoint_last.pt``. What the quickstart adds: a wall-clock budget (``--stop-time-hours``)
and validations evenly spaced in wall clock (:mod:`localnmt.runs.timed_validation`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from localnmt.data.steps import StepRunner
from localnmt.runs.train_run import train_run

_PROGRESS = ("| valid |", "done training", "Stopping training")
_ECHO_EVERY = 250  # updates between echoed training-loss lines (the log has every 10th)


def curve_path(run_dir: Path) -> Path:
    """The learning curve, kept with the checkpoints it belongs to."""
    return run_dir / "checkpoints" / "curve.jsonl"


def budget_args(run_dir: Path, minutes: float, validate_every: float) -> list[str]:
    """fairseq-train arguments of a wall-clock budget with evenly spaced validations."""
    return [
        "--stop-time-hours", f"{minutes / 60:.5f}",
        "--validate-every-minutes", f"{validate_every:.4f}",
        "--curve", str(curve_path(run_dir)),
        # only the wall-clock validations: no per-epoch validation or checkpoint
        "--validate-interval", "100000", "--save-interval", "100000",
        "--no-epoch-checkpoints", "--keep-interval-updates", "1",
    ]  # fmt: skip


def train_system(
    runner: StepRunner,
    name: str,
    run_dir: Path,
    data_bin: Path,
    arch: str,
    args: list[str],
    minutes: float,
    validate_every: float,
    log: Callable[[str], None],
    cpu: bool = True,
) -> str:
    """Train (or reuse, or resume) one system on the ``cpu`` recipe with ``args`` on top;
    returns the step's name (translation depends on it)."""

    def progress(line: str) -> None:
        updates = re.search(r"num_updates=(\d+)", line) if "train_inner" in line else None
        echoed = updates is not None and int(updates.group(1)) % _ECHO_EVERY == 0
        if echoed or any(key in line for key in _PROGRESS):
            log("    " + line.split(" | ", 3)[-1][:150])

    step = f"train.{name}"
    log(f"{name}: {minutes:.1f} min of training, validation every {validate_every:.2f} min")
    train_run(run_dir, data_bin, arch, [*args, *budget_args(run_dir, minutes, validate_every)],
              size="cpu", cpu=cpu, gpus=None if not cpu else 0, runner=runner, name=step,
              log=log, on_line=progress)  # fmt: skip
    return step
