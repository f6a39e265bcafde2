"""What one quickstart run was, typed: the machine, the budget and what every system had in
common (:class:`Allotment`), the corpus (:class:`Corpus`) and how the test set was scored.

:class:`QuickstartRun` is built once when the run starts, with what is known then, and
completed with :func:`dataclasses.replace` as the steps decide the rest; the report is made
from it. :meth:`QuickstartRun.to_json` gives ``report.json``'s fields besides ``systems``, in
the file's order, and :meth:`QuickstartRun.from_json` reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localnmt.machine import MachineSummary
from localnmt.quickstart.calibration import Calibration, Replan


@dataclass(frozen=True)
class Allotment:
    """What every system got. Equal updates: ``updates_per_system`` (given, or calibrated:
    then with the ``calibration`` and the budget's ``minutes_per_system`` it came from, and
    the ``replan`` after the runs' first parts that set the final number); equal time:
    ``minutes_per_system`` of training. ``budget_used_minutes``: the calibration's and every
    training's wall clock, when this process trained them all (None otherwise)."""

    minutes_per_system: float | None = None
    updates_per_system: int | None = None
    calibration: Calibration | None = None
    replan: Replan | None = None
    budget_used_minutes: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields that are known, in ``report.json``'s order."""
        out: dict[str, Any] = {}
        if self.minutes_per_system is not None:
            out["minutes_per_system"] = self.minutes_per_system
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_json()
        if self.updates_per_system is not None:
            out["updates_per_system"] = self.updates_per_system
        if self.replan is not None:
            out["replan"] = self.replan.to_json()
        if self.budget_used_minutes is not None:
            out["budget_used_minutes"] = self.budget_used_minutes
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Allotment:
        calibration, replan = data.get("calibration"), data.get("replan")
        return cls(data.get("minutes_per_system"), data.get("updates_per_system"),
                   Calibration.from_json(calibration) if calibration else None,
                   Replan.from_json(replan) if replan else None,
                   data.get("budget_used_minutes"))  # fmt: skip


@dataclass(frozen=True)
class CorpusSizes:
    """Sentence pairs of each subset."""

    train: int
    valid: int
    test: int

    def to_json(self) -> dict[str, int]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


@dataclass(frozen=True)
class Corpus:
    """The corpus the systems were compared on: its name, a one-line description, its sizes,
    its data-bin and its source and target languages."""

    name: str
    description: str
    sizes: CorpusSizes
    data_bin: str
    languages: tuple[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"corpus": self.name, "corpus_description": self.description,
                "corpus_sizes": self.sizes.to_json(), "data_bin": self.data_bin,
                "languages": list(self.languages)}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Corpus:
        src, tgt = data["languages"]
        return cls(data["corpus"], data["corpus_description"],
                   CorpusSizes(**data["corpus_sizes"]), data["data_bin"], (src, tgt))  # fmt: skip


@dataclass(frozen=True)
class QuickstartRun:
    """One run of the quickstart. Known at the start: the machine (as
    :func:`localnmt.machine.machine_summary` describes it), the budget, what the systems get
    the same of (``equal``: ``updates`` or ``time``), seeds, sizing, device and bootstrap
    resamples. Completed later: the allotment (once the schedule is decided), the corpus,
    the test sentences and SacreBLEU signature (once scored), the load at the end (None where
    the system has none) and the whole run's minutes."""

    machine: MachineSummary
    budget_minutes: float
    equal: str
    seeds: int
    sizing: str
    device: str
    bootstrap_samples: int
    allotment: Allotment | None = None
    corpus: Corpus | None = None
    test_sentences: int | None = None
    signature: str | None = None
    load_average_end: tuple[float, ...] | None = None
    elapsed_minutes: float | None = None

    @property
    def by_updates(self) -> bool:
        """Every system trained the same number of updates (else the same wall clock)."""
        return self.equal == "updates"

    def missing(self) -> list[str]:
        """What is not known yet (nothing, once the run is complete)."""
        later = ("allotment", "corpus", "test_sentences", "signature", "elapsed_minutes")
        return [name for name in later if getattr(self, name) is None]

    def to_json(self) -> dict[str, Any]:
        """``report.json``'s fields besides ``systems``, in the file's order (a run that is
        not complete is a ``ValueError``: it is no report yet)."""
        missing = self.missing()
        if missing:
            raise ValueError(f"the quickstart run is not complete: no {', '.join(missing)}")
        assert self.allotment is not None and self.corpus is not None
        load_end = None if self.load_average_end is None else list(self.load_average_end)
        return {
            "machine": self.machine.to_json(), "budget_minutes": self.budget_minutes,
            "equal": self.equal, "seeds": self.seeds, "sizing": self.sizing,
            "device": self.device, **self.allotment.to_json(), **self.corpus.to_json(),
            "test_sentences": self.test_sentences, "signature": self.signature,
            "bootstrap_samples": self.bootstrap_samples, "load_average_end": load_end,
            "elapsed_minutes": self.elapsed_minutes,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuickstartRun:
        """The run of ``report.json`` (its ``systems`` are not read)."""
        load_end = data["load_average_end"]
        return cls(
            machine=MachineSummary.from_json(data["machine"]),
            budget_minutes=data["budget_minutes"],
            equal=data["equal"], seeds=data["seeds"], sizing=data["sizing"],
            device=data["device"], bootstrap_samples=data["bootstrap_samples"],
            allotment=Allotment.from_json(data), corpus=Corpus.from_json(data),
            test_sentences=data["test_sentences"], signature=data["signature"],
            load_average_end=None if load_end is None else tuple(load_end),
            elapsed_minutes=data["elapsed_minutes"],
        )  # fmt: skip
