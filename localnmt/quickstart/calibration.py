"""Turn a wall-clock budget into a number of updates: the papers compare systems trained for
the same number of updates, so the quickstart does too.

The baseline trains for a short while (``calibration_minutes``) on the quickstart's data and
sizing; its median speed (fairseq's ``ups``, updates per second, over the logged intervals)
times the budget's share per system is the number of updates every system then trains. The
calibration is a step like any other: a rerun with the same settings and data reuses its
number (so the trainings are reused too); a changed setting or corpus measures again.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from localnmt.atomic import write_json
from localnmt.errors import TrainFailed
from localnmt.runs.layout import RunLayout
from localnmt.runs.spec import TrainSpec
from localnmt.runs.train_log import read_train_log
from localnmt.runs.train_run import train_run
from localnmt.steps import Log, StepRunner


@dataclass(frozen=True)
class Calibration:
    """What the short baseline run measured, and the updates it gives each system."""

    updates_per_s: float
    minutes: float
    updates: int

    def to_json(self) -> dict:
        return {"updates_per_s": self.updates_per_s, "minutes": self.minutes,
                "updates": self.updates}  # fmt: skip


def updates_for(updates_per_s: float, minutes_per_system: float) -> int:
    """The updates a system at ``updates_per_s`` makes in its share (at least 10)."""
    return max(10, math.floor(updates_per_s * minutes_per_system * 60))


def calibrate(
    baseline: TrainSpec, workdir: Path, minutes: float, minutes_per_system: float, log: Log
) -> Calibration:
    """Train ``baseline`` for ``minutes`` of wall clock in ``workdir/calibration`` (a step,
    reused when nothing changed) and turn its speed into the updates of one system."""
    layout = RunLayout.under(Path(workdir) / "calibration")
    spec = baseline.replace(
        save_dir=str(layout.checkpoints),
        extra=(*baseline.extra, "--stop-time-hours", f"{minutes / 60:.5f}",
               "--disable-validation"),
    )  # fmt: skip
    runner = StepRunner(layout.root, log=log)
    result = layout.root / "calibration.json"

    def measure() -> None:
        speed = read_train_log(layout.train_log).ups
        if not speed:
            raise TrainFailed(f"the calibration run made no update in {minutes:g} min; see "
                              f"{layout.train_log}")  # fmt: skip
        write_json(result, {"updates_per_s": speed, "minutes": minutes})

    log(f"calibration: the baseline trains for {minutes:g} min to measure its speed")
    train_run(spec, layout, runner, log=log, on_line=None)
    runner.run("measure", measure, outputs=[result], deps=("train",),
               params={"minutes": minutes})  # fmt: skip
    speed = json.loads(result.read_text(encoding="utf-8"))["updates_per_s"]
    return Calibration(speed, minutes, updates_for(speed, minutes_per_system))
