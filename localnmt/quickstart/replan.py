"""Keep the budget when the machine's speed drifts: every run trains a first part of the
calibrated updates, then the rest is planned again from what the parts measured.

The calibration (:mod:`localnmt.quickstart.calibration`) times every system for seconds, at
the start. On a machine whose speed drifts (a cloud machine, other jobs coming and going)
the trainings can run 10 % slower than that, and equal updates then overrun the budget by as
much. So every run (every system, every seed) first trains to :func:`first_part` of the
calibrated updates: the last validation at or below three quarters of them, at the
calibrated validation interval. Each part gives its system's cost again, over minutes of
training (:func:`part_cost`). What is left of the budget then decides the updates every run
reaches (:func:`updates_after`), and each run goes on from its part's checkpoint
(``extends`` of :func:`localnmt.runs.train_run.train_run`). Only the last quarter is planned
from an older measurement.

A run in two parts is the run in one only when nothing in it depends on ``--max-update``.
The inverse-square-root schedule of every translation recipe does not, fairseq seeds
dropout with the update count, and its checkpoint keeps the position in the epoch. A run
whose command picks another learning-rate schedule trains in one part (:func:`splits`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from localnmt.atomic import write_json
from localnmt.catalog import CatalogRow
from localnmt.quickstart.calibration import Calibration, Replan, SystemCost
from localnmt.quickstart.run_record import Allotment
from localnmt.quickstart.training import Schedule, train_first_part
from localnmt.runs.launch import launch_command
from localnmt.runs.layout import RunLayout
from localnmt.runs.run_specs import TrainSpec
from localnmt.runs.timed_validation import read_curve
from localnmt.runs.train_run import TrainRun
from localnmt.steps import Log, StepRunner

#: the share of the calibrated updates trained before the rest is planned again
FIRST_PART = 0.75
#: learning-rate schedules that do not depend on ``--max-update``
LENGTH_FREE_SCHEDULES = ("inverse_sqrt", "fixed")


def splits(command: Sequence[str]) -> bool:
    """Whether a training command can run in two parts: its (last) ``--lr-scheduler`` does
    not depend on ``--max-update``."""
    schedule = "inverse_sqrt"  # what fairseq-train gets from every translation recipe
    for flag, value in zip(command, command[1:]):
        if flag == "--lr-scheduler":
            schedule = value
    return schedule in LENGTH_FREE_SCHEDULES


def first_part(updates: int, every: int, validations: int) -> int | None:
    """Updates of the first part of a run of ``updates`` validating every ``every``: the last
    validation at or below :data:`FIRST_PART` of the validations (None: too short to split)."""
    part = every * math.floor(validations * FIRST_PART)
    return part if 0 < part < updates else None


def validations_between(start: int, end: int, every: int) -> int:
    """Validations of a run that goes on from update ``start`` to ``end``, validating at
    every multiple of ``every`` and at its end."""
    return end // every - start // every + (1 if end % every else 0)


def part_cost(run: TrainRun, updates: int, calibrated: SystemCost) -> SystemCost:
    """A run's cost as its first part (``updates``, trained by ``run`` in this process)
    measured it: its validations as its learning curve timed them; its speed from its wall
    clock less those and the calibrated start-up (``calibrated.overhead_s``), so a slowdown
    anywhere in the part counts. The calibrated cost when the part's wall clock is not known
    (reused, or resumed after an interruption)."""
    if run.seconds is None or run.resumed:
        return calibrated
    timed = [p.seconds for p in read_curve(run.layout.curve) if p.seconds is not None]
    validation_s = sum(timed) / len(timed) if timed else calibrated.validation_s
    training_s = run.seconds - sum(timed) - calibrated.overhead_s
    speed = updates / training_s if training_s > 0 else calibrated.updates_per_s
    return SystemCost(speed, validation_s, calibrated.overhead_s)


def part_seconds(run: TrainRun, updates: int, every: int, calibrated: SystemCost) -> float:
    """Wall clock the first part took: measured, or as planned when it is not known."""
    if run.seconds is None or run.resumed:
        return calibrated.seconds(updates, validations_between(0, updates, every))
    return run.seconds


def updates_after(costs: Sequence[SystemCost], seconds: float, start: int, every: int) -> int:
    """The most updates every run (one cost each) can reach from ``start``, validating every
    ``every`` and at its end, so that all of them fit in ``seconds``; at least one more
    than ``start``."""

    def need(end: int) -> float:
        runs = validations_between(start, end, every)
        return sum(c.seconds(end - start, runs) for c in costs)

    per_update = sum(1.0 / c.updates_per_s for c in costs)
    fixed = sum(c.overhead_s for c in costs)
    end = start + max(1, math.floor((seconds - fixed) / per_update))
    while end > start + 1 and need(end) > seconds:
        end -= 1
    return end


def plan_rest(
    parts: Sequence[tuple[TrainRun, SystemCost]], part_updates: int, every: int,
    spent_s: float, budget_s: float,
) -> Replan:  # fmt: skip
    """The second plan from every run's first part (with its calibrated cost) and the
    seconds ``spent_s`` before the parts (the calibration's): the parts' costs
    (:func:`part_cost`) share what is left of ``budget_s`` (:func:`updates_after`)."""
    costs = tuple(part_cost(run, part_updates, calibrated) for run, calibrated in parts)
    spent = spent_s + sum(part_seconds(run, part_updates, every, calibrated)
                          for run, calibrated in parts)  # fmt: skip
    updates = updates_after(costs, budget_s - spent, part_updates, every)
    return Replan(part_updates, costs, spent / 60, updates)


def train_first_parts(
    jobs: Sequence[tuple[CatalogRow, TrainSpec, RunLayout]], schedule: Schedule,
    allotment: Allotment, validations: int, workdir: Path, budget: float, log: Log,
) -> tuple[Schedule, Allotment, list[TrainRun]]:  # fmt: skip
    """Train every run's first part of the calibrated ``schedule``, then plan its updates
    again from what the parts measured (:mod:`localnmt.quickstart.replan`; a step, reused
    when the parts are): the schedule every run goes on to, the allotment with the second
    plan, and the parts' runs. A schedule too short to split, or a run whose learning rate
    depends on ``--max-update``, keeps the calibrated plan (no parts)."""
    calibration = allotment.calibration
    assert calibration is not None and schedule.updates is not None
    every = schedule.interval
    part = first_part(schedule.updates, every, validations)
    commands = [launch_command(job_spec, job_spec.gpus_per_node()) for _, job_spec, _ in jobs]
    if part is None or not all(splits(cmd) for cmd in commands):
        return schedule, allotment, []
    log(f"step 2/3, first part: every run trains {part} of the {schedule.updates} updates, "
        "then the rest is planned again from the speeds it measured")  # fmt: skip
    seeds = len(jobs) // len(calibration.costs)
    cost = dict(zip([row.name for row, _, _ in jobs[::seeds]], calibration.costs))
    part_schedule = replace(schedule, updates=part, every=every)
    parts = [train_first_part(row, job_spec, layout, part_schedule, log)
             for row, job_spec, layout in jobs]  # fmt: skip
    runner = StepRunner(workdir / "replan", log=log)
    found = runner.workdir / "replan.json"

    def replan() -> None:
        plan = plan_rest([(run, cost[row.name]) for run, (row, _, _) in zip(parts, jobs)],
                         part, every, calibration.minutes * 60, budget * 60)  # fmt: skip
        write_json(found, plan.to_json())

    runner.run("replan", replan, outputs=[found],
               params={"parts": [run.fingerprint for run in parts], "budget": budget,
                       "calibration": calibration.to_json()})  # fmt: skip
    plan = Replan.from_json(json.loads(found.read_text(encoding="utf-8")))
    log(
        f"replan: {plan.minutes:.1f} min spent → {plan.updates} updates per system "
        f"(baseline {plan.costs[0].updates_per_s:.2f} updates/s in its first part)"
    )
    return (
        replace(schedule, updates=plan.updates, every=every),
        replace(allotment, updates_per_system=plan.updates, replan=plan),
        parts,
    )


def budget_used(
    calibration: Calibration, parts: list[TrainRun], trained: list[TrainRun]
) -> float | None:
    """Minutes of the budget used: the calibration's wall clock and every training's (first
    parts, then the rest or whole runs), when this process trained every run from its start
    (None: some were reused, or resumed after an interruption)."""
    starts = parts or trained  # a second part always goes on from its first
    if any(run.seconds is None for run in (*parts, *trained)) or any(r.resumed for r in starts):
        return None
    seconds = sum(run.seconds or 0.0 for run in (*parts, *trained))
    return calibration.minutes + seconds / 60
