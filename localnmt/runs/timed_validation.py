"""Record a learning curve, and validate by wall clock instead of by updates if asked.

:func:`install` wraps ``fairseq_cli.train.validate_and_save`` so that each validation appends
``{"minutes", "updates", "valid_loss", "seconds"}`` (minutes of the trainer's cumulative training
time, which survives a resume from ``checkpoint_last.pt``; seconds of wall clock that
validation and its checkpoint took) to a JSON-lines file. fairseq validates
every N updates or epochs; a comparison under equal wall-clock budgets wants the same number
of points per system whatever its speed: with ``every_minutes``, the update that crosses each
mark of that many minutes validates and saves a checkpoint.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CurvePoint:
    """One validation of a learning curve: minutes of training (the trainer's clock), updates,
    validation loss and the seconds the validation took (None in curves written before it
    was recorded)."""

    minutes: float
    updates: int
    valid_loss: float
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """One line of ``curve.jsonl`` (and of report.json's curves), keys in this order."""
        line: dict[str, Any] = {"minutes": self.minutes, "updates": self.updates,
                                "valid_loss": self.valid_loss}  # fmt: skip
        if self.seconds is not None:
            line["seconds"] = self.seconds
        return line

    @classmethod
    def from_json(cls, line: dict[str, Any]) -> CurvePoint:
        seconds = line.get("seconds")
        return cls(float(line["minutes"]), int(line["updates"]), float(line["valid_loss"]),
                   None if seconds is None else float(seconds))  # fmt: skip


def install(curve_path: Path, every_minutes: float | None = None) -> None:
    """Patch fairseq's training loop (call in the training process, before ``cli_main``)."""
    import fairseq_cli.train as train_cli

    original = train_cli.validate_and_save
    every_s = every_minutes * 60.0 if every_minutes else math.inf
    curve_path = Path(curve_path)
    state: dict[str, float] = {}

    def validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        elapsed = trainer.cumulative_training_time()
        if "next" not in state:  # first call, or the first after a resume
            state["next"] = (math.floor(elapsed / every_s) + 1) * every_s  # inf: never
        num_updates = trainer.get_num_updates()
        due = elapsed >= state["next"] and num_updates > 0
        if due:
            state["next"] = (math.floor(elapsed / every_s) + 1) * every_s
            saved = (cfg.dataset.validate_interval_updates, cfg.checkpoint.save_interval_updates)
            cfg.dataset.validate_interval_updates = num_updates
            cfg.checkpoint.save_interval_updates = num_updates
        start = time.monotonic()
        try:
            losses, stop = original(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        finally:
            if due:
                cfg.dataset.validate_interval_updates, cfg.checkpoint.save_interval_updates = saved
        if losses and losses[0] is not None and trainer.data_parallel_rank == 0:
            point = CurvePoint(round(elapsed / 60.0, 4), num_updates, round(float(losses[0]), 4),
                               round(time.monotonic() - start, 3))  # fmt: skip
            with open(curve_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(point.to_json()) + "\n")
        return losses, stop

    train_cli.validate_and_save = validate_and_save


def read_curve(curve_path: Path) -> list[CurvePoint]:
    """The recorded points, one per validation, ordered by updates (later records win)."""
    path = Path(curve_path)
    if not path.exists():
        return []
    points: dict[int, CurvePoint] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            point = CurvePoint.from_json(json.loads(line))
            points[point.updates] = point
    return [points[u] for u in sorted(points)]
