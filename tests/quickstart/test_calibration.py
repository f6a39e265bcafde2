"""The quickstart's calibration arithmetic (localnmt/quickstart/calibration.py): the budget left
shared as equal updates among systems of different speeds, with their validations and the
cost of each run, checked against numbers worked out by hand."""

from __future__ import annotations

from localnmt.quickstart.calibration import (
    MIN_UPDATES,
    SystemCost,
    last_validation_seconds,
    planned_seconds,
    updates_for,
    validations_run,
)


def test_a_run_validates_at_every_interval_and_at_its_end() -> None:
    assert validations_run(1000, 8) == 8  # every 125, the last at 1000
    assert validations_run(1001, 8) == 9  # every 125, and once more at 1001
    assert validations_run(5, 8) == 5  # every update


def test_the_planned_wall_clock_adds_training_validations_and_overhead() -> None:
    fast = SystemCost(updates_per_s=4.0, validation_s=3.0, overhead_s=10.0)
    slow = SystemCost(updates_per_s=2.0, validation_s=5.0, overhead_s=12.0)
    # 1000 updates, 8 validations: fast 250 + 24 + 10 = 284; slow 500 + 40 + 12 = 552
    assert planned_seconds([fast, slow], 1000, 8) == 836.0
    assert planned_seconds([fast, slow], 1000, 8, seeds=2) == 1672.0


def test_every_system_gets_the_updates_the_budget_left_allows() -> None:
    fast = SystemCost(updates_per_s=4.0, validation_s=3.0, overhead_s=10.0)
    slow = SystemCost(updates_per_s=2.0, validation_s=5.0, overhead_s=12.0)
    assert updates_for([fast, slow], 836.0, 8) == 1000  # exactly the plan above
    # 993-999 updates validate 9 times (every 124): 993 takes 838.75 s; 992 validates 8 times
    assert updates_for([fast, slow], 835.9, 8) == 992
    assert planned_seconds([fast, slow], 992, 8) == 830.0
    # one system: 3208 (every 401: 8 validations) takes 802 + 24 + 10 = 836 s, where
    # 3201-3207 validate 9 times (3201: 837.25 s); the baseline's speed alone would give 3344
    assert updates_for([fast], 836.0, 8) == 3208
    assert planned_seconds([fast], 3201, 8) == 837.25
    assert updates_for([fast, slow], 1672.0, 8, seeds=2) == 1000


def test_a_budget_too_small_still_trains_the_fewest_updates() -> None:
    slow = SystemCost(updates_per_s=2.0, validation_s=50.0, overhead_s=100.0)
    assert updates_for([slow], 30.0, 8) == MIN_UPDATES


def test_the_last_timed_validation_is_read_from_the_curve(tmp_path) -> None:
    curve = tmp_path / "curve.jsonl"
    assert last_validation_seconds(curve) == 0.0
    curve.write_text('{"minutes": 0.1, "updates": 5, "valid_loss": 9.0, "seconds": 1.5}\n'
                     '{"minutes": 0.2, "updates": 9, "valid_loss": 8.0, '
                     '"seconds": 2.25}\n')  # fmt: skip
    assert last_validation_seconds(curve) == 2.25
