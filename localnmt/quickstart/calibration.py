"""Turn a wall-clock budget into a number of updates: the papers compare systems trained for
the same number of updates, so the quickstart does too.

Every system trains for a short while (its share of ``calibration_minutes``) on the
quickstart's data and sizing, and validates once at the end. Each short run gives the
system's :class:`SystemCost`: its speed (the median of fairseq's ``ups``, updates per second,
over the logged intervals), what one validation with its checkpoint costs, and what a run
costs besides (start-up, data loading, the end), from the run's wall clock. The budget left
after the calibration is then shared so that every system (every seed), at its own speed and
with the schedule's validations, trains the same number of updates (:func:`updates_for`). The
calibration is a step like any other: a rerun with the same settings and data reuses its
numbers (so the trainings are reused too); a changed setting or corpus measures again.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localnmt.atomic import write_json
from localnmt.errors import TrainFailed
from localnmt.runs.layout import RunLayout
from localnmt.runs.run_specs import TrainSpec
from localnmt.runs.timed_validation import read_curve
from localnmt.runs.train_log import read_train_log
from localnmt.runs.train_run import train_run
from localnmt.steps import Log, StepRunner

#: the fewest updates a system trains, whatever the budget
MIN_UPDATES = 10


@dataclass(frozen=True)
class SystemCost:
    """What one system's short run measured: updates per second of training, seconds of one
    validation (with its checkpoint), and seconds of a run besides training and validating."""

    updates_per_s: float
    validation_s: float
    overhead_s: float

    def seconds(self, updates: int, validations: int) -> float:
        """Wall clock of one run of ``updates`` with ``validations`` validations."""
        return updates / self.updates_per_s + validations * self.validation_s + self.overhead_s

    def to_json(self) -> dict:
        return {"updates_per_s": self.updates_per_s, "validation_s": self.validation_s,
                "overhead_s": self.overhead_s}  # fmt: skip


@dataclass(frozen=True)
class Calibration:
    """The systems' costs, the calibration's own wall clock, and the updates of each system."""

    costs: tuple[SystemCost, ...]
    minutes: float
    updates: int

    def to_json(self) -> dict:
        return {"updates_per_s": self.costs[0].updates_per_s, "minutes": self.minutes,
                "updates": self.updates,
                "systems": [c.to_json() for c in self.costs]}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Calibration:
        """The calibration of :meth:`to_json` (the first system's speed is its first cost's)."""
        costs = tuple(SystemCost(c["updates_per_s"], c["validation_s"], c["overhead_s"])
                      for c in data["systems"])  # fmt: skip
        return cls(costs, data["minutes"], data["updates"])


@dataclass(frozen=True)
class Replan:
    """The second plan: the first part's ``part_updates``, every run's cost as its part
    measured it (systems in order, seeds within), the minutes spent until then (calibration
    included) and the ``updates`` every run then reaches."""

    part_updates: int
    costs: tuple[SystemCost, ...]
    minutes: float
    updates: int

    def to_json(self) -> dict[str, Any]:
        return {"part_updates": self.part_updates, "minutes": self.minutes,
                "updates": self.updates,
                "runs": [c.to_json() for c in self.costs]}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Replan:
        costs = tuple(SystemCost(c["updates_per_s"], c["validation_s"], c["overhead_s"])
                      for c in data["runs"])  # fmt: skip
        return cls(data["part_updates"], costs, data["minutes"], data["updates"])


def validations_run(updates: int, validations: int) -> int:
    """The validations of a run of ``updates`` that validates every ``updates // validations``
    updates (the quickstart's schedule) and once more at its end if that is not one of them."""
    every = max(1, updates // validations)
    return math.ceil(updates / every)


def planned_seconds(
    costs: Sequence[SystemCost], updates: int, validations: int, seeds: int = 1
) -> float:
    """Wall clock of training every system, ``seeds`` times each, for ``updates``."""
    runs = validations_run(updates, validations)
    return seeds * sum(c.seconds(updates, runs) for c in costs)


def updates_for(
    costs: Sequence[SystemCost], seconds: float, validations: int, seeds: int = 1
) -> int:
    """The most updates (at least :data:`MIN_UPDATES`) for which training every system
    ``seeds`` times fits in ``seconds`` (:func:`planned_seconds`)."""
    per_update = seeds * sum(1.0 / c.updates_per_s for c in costs)
    fixed = seeds * sum(c.overhead_s for c in costs)
    per_validation = seeds * sum(c.validation_s for c in costs)
    # a run validates `validations` or `validations + 1` times: between these two bounds
    low = math.floor((seconds - fixed - (validations + 1) * per_validation) / per_update)
    high = math.floor((seconds - fixed - validations * per_validation) / per_update)
    for updates in range(high, max(low, MIN_UPDATES) - 1, -1):
        if planned_seconds(costs, updates, validations, seeds) <= seconds:
            return updates
    return MIN_UPDATES


def last_validation_seconds(curve: Path) -> float:
    """Seconds of the last validation recorded in a learning curve (0 if none was timed)."""
    points = read_curve(curve)
    return float(points[-1].seconds or 0.0) if points else 0.0


def measure_system(
    spec: TrainSpec, layout: RunLayout, minutes: float, log: Log
) -> tuple[SystemCost, float]:
    """Train ``spec`` for ``minutes`` of training in ``layout`` (a step, reused when nothing
    changed), validating once at the end; its cost and the wall clock the run took."""
    runner = StepRunner(layout.root, log=log)
    result = layout.root / "calibration.json"
    spec = spec.replace(
        save_dir=str(layout.checkpoints),
        extra=(*spec.extra, "--stop-time-hours", f"{minutes / 60:.5f}",
               "--curve", str(layout.curve), "--no-epoch-checkpoints",
               "--keep-interval-updates", "1",
               "--validate-interval", "100000", "--save-interval", "100000"),
    )  # fmt: skip
    start = time.monotonic()
    ran = train_run(spec, layout, runner, log=log, on_line=None).ran
    wall = time.monotonic() - start

    def measure() -> None:
        speed = read_train_log(layout.train_log).ups
        if not speed:
            raise TrainFailed(f"the calibration run made no update in {minutes:g} min; see "
                              f"{layout.train_log}")  # fmt: skip
        validation = last_validation_seconds(layout.curve)
        overhead = max(0.0, wall - minutes * 60 - validation) if ran else 0.0
        write_json(result, {"updates_per_s": speed, "validation_s": validation,
                            "overhead_s": overhead, "wall_s": wall if ran else 0.0})  # fmt: skip

    runner.run("measure", measure, outputs=[result], deps=("train",),
               params={"minutes": minutes})  # fmt: skip
    found = json.loads(result.read_text(encoding="utf-8"))
    cost = SystemCost(found["updates_per_s"], found["validation_s"], found["overhead_s"])
    return cost, found["wall_s"]


def calibrate(
    systems: Sequence[tuple[str, TrainSpec]],
    workdir: Path,
    minutes: float,
    budget_minutes: float,
    validations: int,
    seeds: int,
    log: Log,
) -> Calibration:
    """Measure every system (``minutes`` of training shared among them, in
    ``workdir/calibration/<system>``) and share what is left of ``budget_minutes`` among
    them as equal updates."""
    each = minutes / len(systems)
    log(f"calibration: each system trains for {each:.2f} min to measure its speed and the "
        "cost of its validations")  # fmt: skip
    costs, wall = [], 0.0
    for name, spec in systems:
        folder = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)
        cost, seconds = measure_system(
            spec, RunLayout.under(Path(workdir) / "calibration" / folder), each, log
        )
        log(f"calibration: {name}: {cost.updates_per_s:.2f} updates/s, {cost.validation_s:.1f} "
            f"s per validation, {cost.overhead_s:.1f} s per run besides")  # fmt: skip
        costs.append(cost)
        wall += seconds
    left = max(budget_minutes * 60 - wall, minutes * 60)
    updates = updates_for(costs, left, validations, seeds)
    return Calibration(tuple(costs), wall / 60, updates)
