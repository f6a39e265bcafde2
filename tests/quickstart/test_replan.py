"""The quickstart's second plan (localnmt/quickstart/replan.py): where a run's first part
ends, what the part measured, and the updates the rest of the budget allows, checked against
numbers worked out by hand."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from localnmt.quickstart.calibration import Calibration, Replan, SystemCost
from localnmt.quickstart.replan import (
    budget_used,
    first_part,
    part_cost,
    part_seconds,
    plan_rest,
    splits,
    updates_after,
    validations_between,
)
from localnmt.quickstart.run_record import Allotment

FAST = SystemCost(updates_per_s=4.0, validation_s=3.0, overhead_s=10.0)
SLOW = SystemCost(updates_per_s=2.0, validation_s=5.0, overhead_s=12.0)


def _run(tmp_path: Path, seconds: float | None, resumed: bool = False, timed=(1.5, 2.5)):
    """A first part's :class:`TrainRun` as the re-plan reads it: wall clock, whether it
    resumed, and a learning curve whose validations took ``timed`` seconds."""
    curve = tmp_path / f"curve-{seconds}-{resumed}.jsonl"
    curve.write_text("".join(f'{{"minutes": {k}, "updates": {100 * k}, "valid_loss": 5.0, '
                             f'"seconds": {s}}}\n' for k, s in enumerate(timed, 1)))  # fmt: skip
    return SimpleNamespace(seconds=seconds, resumed=resumed, layout=SimpleNamespace(curve=curve))


def test_the_first_part_ends_at_the_last_validation_within_three_quarters() -> None:
    assert first_part(1000, 125, 8) == 750  # the 6th of 8 validations
    assert first_part(1003, 125, 8) == 750
    assert first_part(3264, 408, 8) == 2448
    assert first_part(5, 1, 8) is None  # a run of 5 updates is not split


def test_a_resumed_run_validates_at_the_multiples_after_its_start_and_at_its_end() -> None:
    assert validations_between(750, 1000, 125) == 2  # 875, 1000
    assert validations_between(750, 1001, 125) == 3  # 875, 1000, 1001
    assert validations_between(750, 751, 125) == 1  # its end
    assert validations_between(0, 750, 125) == 6


def test_a_schedule_that_depends_on_max_update_is_not_split() -> None:
    assert splits(["fairseq-train", "--lr-scheduler", "inverse_sqrt", "--lr", "7e-4"])
    assert splits(["fairseq-train"])  # the translation recipes' schedule
    assert not splits(["--lr-scheduler", "inverse_sqrt", "--lr-scheduler", "polynomial_decay"])
    assert not splits(["--lr-scheduler", "cosine"])


def test_the_part_measures_speed_over_its_whole_wall_clock(tmp_path) -> None:
    calibrated = SystemCost(updates_per_s=5.0, validation_s=3.0, overhead_s=10.0)
    # 400 updates in 114 s: 4 s of validations (1.5 + 2.5), 10 s of start-up → 100 s of training
    assert part_cost(_run(tmp_path, 114.0), 400, calibrated) == SystemCost(4.0, 2.0, 10.0)
    assert part_seconds(_run(tmp_path, 114.0), 400, 100, calibrated) == 114.0
    # reused, or resumed after an interruption: the wall clock is not the part's
    for run in (_run(tmp_path, None), _run(tmp_path, 50.0, resumed=True)):
        assert part_cost(run, 400, calibrated) == calibrated
        assert part_seconds(run, 400, 100, calibrated) == 80.0 + 4 * 3.0 + 10.0  # as planned
    # no timed validation: the calibrated one
    assert part_cost(_run(tmp_path, 90.0, timed=()), 400, calibrated) == SystemCost(5.0, 3.0, 10)


def test_the_rest_gets_the_updates_the_budget_left_allows() -> None:
    # from 750 to 1000: fast 62.5 + 2 * 3 + 10, slow 125 + 2 * 5 + 12: 225.5 s
    assert updates_after([FAST, SLOW], 225.5, 750, 125) == 1000
    # 999 validates at 875 and 999: 249 * 0.75 + 2 * 8 + 22 = 224.75 s
    assert updates_after([FAST, SLOW], 225.4, 750, 125) == 999
    # 300 s: 1001-1124 validate 3 times; 1088 takes 338 * 0.75 + 24 + 22 = 299.5 s
    assert updates_after([FAST, SLOW], 300.0, 750, 125) == 1088
    assert updates_after([FAST, SLOW], 0.0, 750, 125) == 751  # no time left: one more


def test_the_second_plan_counts_the_calibration_and_the_parts(tmp_path) -> None:
    # measured: 750 updates in 464 s less 4 s of validations and 10 s of start-up: 5/3 per s
    # reused: as planned, 750 / 2 + 6 * 5 + 12 = 417 s
    parts = [(_run(tmp_path, 464.0), FAST), (_run(tmp_path, None), SLOW)]
    plan = plan_rest(parts, 750, 125, spent_s=60.0, budget_s=60.0 + 464.0 + 417.0 + 311.5)
    assert plan.costs == (SystemCost(750 / 450, 2.0, 10.0), SLOW)
    assert plan.minutes == (60.0 + 464.0 + 417.0) / 60 and plan.part_updates == 750
    # 311.5 s left: 1000 takes 250 * (0.6 + 0.5) + 2 * (2 + 5) + 22 = 311 s, 1001 319.1 s
    assert plan.updates == 1000


def test_the_budget_used_is_only_known_when_every_run_trained_here(tmp_path) -> None:
    calibration = Calibration((FAST,), 1.5, 1000)
    parts = [_run(tmp_path, 60.0), _run(tmp_path, 120.0)]
    rest = [
        SimpleNamespace(seconds=30.0, resumed=True),
        SimpleNamespace(seconds=30.0, resumed=True),
    ]
    assert budget_used(calibration, parts, rest) == 1.5 + 240.0 / 60
    assert budget_used(calibration, [parts[0], _run(tmp_path, None)], rest) is None
    assert budget_used(calibration, [parts[0], _run(tmp_path, 9.0, True)], rest) is None
    assert budget_used(calibration, parts, [rest[0], SimpleNamespace(seconds=None)]) is None
    whole = [SimpleNamespace(seconds=30.0, resumed=False)]  # not split
    assert budget_used(calibration, [], whole) == 2.0
    assert budget_used(calibration, [], [SimpleNamespace(seconds=30.0, resumed=True)]) is None


def test_the_second_plan_round_trips_through_the_record() -> None:
    plan = Replan(750, (FAST, SLOW), 19.25, 999)
    assert Replan.from_json(plan.to_json()) == plan
    allotment = Allotment(11.25, 999, Calibration((FAST, SLOW), 1.5, 1000), plan, 24.5)
    assert Allotment.from_json(allotment.to_json()) == allotment
    assert list(allotment.to_json()) == [
        "minutes_per_system",
        "calibration",
        "updates_per_system",
        "replan",
        "budget_used_minutes",
    ]
