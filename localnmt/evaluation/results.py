"""Typed scores of a trained model, as ``scores.json`` holds them.

:class:`Scores` (one test set, one reference) and :class:`MultiRefScores` (NIST: every set
with its four references) are what scoring returns and what the runs, the quickstart and
``reproduce`` read; :meth:`to_json` / :func:`read_scores` turn them into the file's format
and back at the edge, so the file keeps its keys and order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localnmt.atomic import write_json
from localnmt.evaluation.breakdown import Bucket
from localnmt.evaluation.metrics import BleuResult
from localnmt.evaluation.significance import BootstrapResult


@dataclass(frozen=True)
class TrainingRecord:
    """How far the scored checkpoint was trained (:func:`localnmt.provenance.
    training_record`): its updates, its run's ``max_update`` and whether the run finished
    (None: not known)."""

    checkpoint: str
    updates: int | None
    max_update: int | None
    finished: bool | None

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "updates": self.updates,
                "max_update": self.max_update, "finished": self.finished}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TrainingRecord | None:
        if data is None:
            return None
        return cls(str(data.get("checkpoint", "")), data.get("updates"),
                   data.get("max_update"), data.get("finished"))  # fmt: skip

    def describe(self) -> str:
        """``95 of 2000 updates, UNFINISHED run``."""
        from localnmt.provenance import describe_training

        return describe_training(self.to_json())


@dataclass(frozen=True)
class Scored:
    """What was scored: the checkpoint, its training, the target language and the
    references (absent when a hypothesis file was scored directly)."""

    checkpoint: str
    training: TrainingRecord | None
    target_lang: str
    references: str


@dataclass(frozen=True)
class Scores:
    """The scores of one test set against one reference (Section "Evaluation" of each
    paper): SacreBLEU with its signature, tokenized BLEU, BLEU by source length, and against
    a baseline the paired bootstrap test and the n-gram precision gaps."""

    sentences: int
    sacrebleu: BleuResult
    tokenized_bleu: BleuResult
    length_buckets: tuple[Bucket, ...] | None = None
    length_unit: str | None = None
    bootstrap: BootstrapResult | None = None
    ngram_precision_gaps: tuple[float, ...] | None = None
    scored: Scored | None = None

    @property
    def bleu(self) -> float:
        """SacreBLEU, the number every report shows."""
        return self.sacrebleu.score

    @property
    def signature(self) -> str:
        return self.sacrebleu.signature

    @property
    def training(self) -> TrainingRecord | None:
        return self.scored.training if self.scored else None

    def to_json(self) -> dict[str, Any]:
        """``scores.json``'s content (keys in the file's order)."""
        out: dict[str, Any] = {"sentences": self.sentences,
                               "sacrebleu": self.sacrebleu.to_dict(),
                               "tokenized_bleu": self.tokenized_bleu.to_dict()}  # fmt: skip
        if self.length_buckets is not None:
            out["length_buckets"] = [b.to_dict() for b in self.length_buckets]
            out["length_unit"] = self.length_unit
        if self.bootstrap is not None:
            out["bootstrap"] = self.bootstrap.to_dict()
            out["ngram_precision_gaps"] = list(self.ngram_precision_gaps or ())
        if self.scored is not None:
            t = self.scored.training
            out.update(checkpoint=self.scored.checkpoint,
                       training=t.to_json() if t else None,
                       target_lang=self.scored.target_lang,
                       references=self.scored.references)  # fmt: skip
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Scores:
        buckets = data.get("length_buckets")
        boot = data.get("bootstrap")
        gaps = data.get("ngram_precision_gaps")
        scored = None
        if "checkpoint" in data:
            scored = Scored(
                str(data["checkpoint"]), TrainingRecord.from_json(data.get("training")),
                str(data.get("target_lang", "")), str(data.get("references", "")),
            )  # fmt: skip
        return cls(
            sentences=int(data["sentences"]),
            sacrebleu=BleuResult(**data["sacrebleu"]),
            tokenized_bleu=BleuResult(**data["tokenized_bleu"]),
            length_buckets=None if buckets is None else tuple(Bucket(**b) for b in buckets),
            length_unit=data.get("length_unit"),
            bootstrap=None if boot is None else BootstrapResult(**boot),
            ngram_precision_gaps=None if gaps is None else tuple(gaps),
            scored=scored,
        )

    def summary(self) -> str:
        """Human-readable lines."""
        lines = [f"SacreBLEU {self.bleu:.2f}  ({self.signature})",
                 f"tokenized BLEU {self.tokenized_bleu.score:.2f}"]  # fmt: skip
        if self.training is not None:
            lines.append(f"checkpoint {self.training.checkpoint}: {self.training.describe()}")
        if self.bootstrap is not None:
            b = self.bootstrap
            lines.append(f"vs baseline: {b.delta:+.2f} BLEU, p={b.p_value:.3f} {b.marker}")
            gaps = ", ".join(f"{g:+.2f}" for g in self.ngram_precision_gaps or ())
            lines.append(f"n-gram precision gaps (1..4): {gaps}")
        if self.length_unit is not None:
            lines.append(f"BLEU by source length ({self.length_unit}):")
        for b in self.length_buckets or ():
            bleu = "-" if b.bleu is None else f"{b.bleu:.2f}"
            lines.append(f"  source length {b.label}: {b.sentences} sentences, BLEU {bleu}")
        return "\n".join(lines)


@dataclass(frozen=True)
class MultiRefScores:
    """NIST Zh-En (Zhang & Feng 2021): case-insensitive BLEU of every set against its four
    references, their unweighted mean (the paper's "average"), and each set's
    single-reference :class:`Scores`."""

    average: float
    sets: dict[str, BleuResult]
    subsets: dict[str, str]
    signature: str
    references: str
    checkpoint: str
    training: TrainingRecord | None
    single_ref: dict[str, Scores] = field(default_factory=dict)

    @property
    def bleu(self) -> float:
        return self.average

    def to_json(self) -> dict[str, Any]:
        return {
            "scoring": "nist_multi_ref",
            "average": self.average,
            "sets": {k: v.to_dict() for k, v in self.sets.items()},
            "subsets": dict(self.subsets),
            "signature": self.signature,
            "references": self.references,
            "checkpoint": self.checkpoint,
            "training": self.training.to_json() if self.training else None,
            "single_ref": {k: v.to_json() for k, v in self.single_ref.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MultiRefScores:
        return cls(
            average=data["average"],
            sets={k: BleuResult(**v) for k, v in data["sets"].items()},
            subsets=dict(data["subsets"]),
            signature=data["signature"],
            references=data["references"],
            checkpoint=data["checkpoint"],
            training=TrainingRecord.from_json(data.get("training")),
            single_ref={k: Scores.from_json(v) for k, v in data.get("single_ref", {}).items()},
        )

    def summary(self) -> str:
        lines = [f"average multi-reference BLEU {self.average:.2f}  ({self.signature})"]
        lines += [f"  {name}: {r.score:.2f}" for name, r in self.sets.items()]
        if self.training is not None:
            lines.append(f"checkpoint {self.training.checkpoint}: {self.training.describe()}")
        return "\n".join(lines)


AnyScores = Scores | MultiRefScores


def scores_from_json(data: Mapping[str, Any]) -> AnyScores:
    """The typed scores of a ``scores.json`` document."""
    if data.get("scoring") == "nist_multi_ref":
        return MultiRefScores.from_json(data)
    return Scores.from_json(data)


def read_scores(path: Path) -> AnyScores:
    """The typed scores in ``path`` (a ``scores.json``)."""
    return scores_from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def write_scores(path: Path, scores: AnyScores) -> None:
    """Write ``scores.json`` (atomically; the file's format, indented)."""
    write_json(Path(path), scores.to_json())
