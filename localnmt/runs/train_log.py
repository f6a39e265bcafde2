"""Read parameter counts, training speed and validation losses from a fairseq-train log."""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

_PARAMS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")
# fairseq's own format ("| INFO | train | epoch 001 | ...") and logging's default
# ("INFO:train:epoch 001 | ...") when something configured logging before fairseq_cli did.
_INNER = re.compile(r"(?:\| |:)train_inner(?: \| |:)epoch \d+:.*?\s(loss=.*)$")
_EPOCH = re.compile(r"(?:\| |:)(train|valid)(?: \| |:)epoch (\d+) \| (.*)$")


@dataclass
class TrainLog:
    """What the reports need from one training run."""

    params: int | None = None
    ups: float | None = None
    wps: float | None = None
    num_updates: int = 0
    valid: list[tuple[int, float]] = field(default_factory=list)
    finished: bool = False

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return asdict(self)


def _pairs(text: str, sep: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in text.split(sep):
        parts = item.strip().replace("=", " ").split()
        if len(parts) == 2:
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


def parse_train_log(text: str) -> TrainLog:
    """Parse a log written with ``--log-format simple``.

    Speed is the median of the ``train_inner`` records (``ups`` updates/s, ``wps`` target
    words/s summed over workers), falling back to the per-epoch ``train`` summaries.
    """
    log = TrainLog()
    inner: list[dict[str, float]] = []
    epochs: list[dict[str, float]] = []
    for line in text.splitlines():
        if (m := _PARAMS.search(line)) and log.params is None:
            log.params = int(m.group(1).replace(",", ""))
        elif m := _INNER.search(line):
            inner.append(_pairs(m.group(1), ","))
        elif m := _EPOCH.search(line):
            values = _pairs(m.group(3), "|")
            if m.group(1) == "train":
                epochs.append(values)
            elif "loss" in values:
                log.valid.append((int(values.get("num_updates", 0)), values["loss"]))
        if "done training in" in line:
            log.finished = True
    records = inner or epochs
    for key in ("ups", "wps"):
        values = [r[key] for r in records if key in r]
        if values:
            setattr(log, key, statistics.median(values))
    updates = [r["num_updates"] for r in inner + epochs if "num_updates" in r]
    log.num_updates = int(max(updates)) if updates else 0
    return log


def read_train_log(path: Path) -> TrainLog:
    """Parse a log file (empty result if it does not exist)."""
    path = Path(path)
    return parse_train_log(path.read_text(errors="replace")) if path.exists() else TrainLog()
