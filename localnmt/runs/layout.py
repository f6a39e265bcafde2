"""Every path of one run, in one place.

A run directory made by the quickstart or ``reproduce`` (``RunLayout.under(run_dir)``)::

    <run_dir>/
      checkpoints/            fairseq's --save-dir: checkpoint_last.pt, checkpoint_best.pt,
                              checkpoint_<epoch>_<update>.pt, curve.jsonl (timed validations)
      train.log               fairseq-train's output (appended when a run resumes)
      train.started.json      the fingerprint of the run the checkpoints belong to
      stale/<fingerprint>/    checkpoints of earlier settings, set aside, never resumed
      eval/                   generate.out, hyp.txt, ref.txt, scores.json
      .done/<step>.json       finished steps (localnmt.steps.StepRunner)
      .lock                   the process working in the directory (localnmt.runs.lock)

``localnmt-train --save-dir DIR`` (``RunLayout.for_save_dir``) writes checkpoints into DIR
itself, as fairseq does, with ``DIR/train.log`` beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def system_slug(name: str) -> str:
    """A directory name for a catalog name (``yang2018/table-4/localness/base`` →
    ``yang2018__table-4__localness__base``)."""
    return name.replace("/", "__")


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run: ``root`` holds logs, markers and evaluation,
    ``checkpoints`` is fairseq's ``--save-dir``."""

    root: Path
    checkpoints: Path
    train_log: Path
    #: the training's name in the run directory (GLUE rows train several: ``pretrain``,
    #: ``SST-2``, ...), which names its ``<name>.started.json``
    name: str = "train"

    @classmethod
    def under(cls, run_dir: Path) -> RunLayout:
        """The layout of a run directory (checkpoints in ``run_dir/checkpoints``)."""
        run_dir = Path(run_dir)
        return cls(run_dir, run_dir / "checkpoints", run_dir / "train.log")

    @classmethod
    def for_save_dir(cls, save_dir: Path, log: Path | None = None) -> RunLayout:
        """``localnmt-train``'s layout: checkpoints and log in ``save_dir``."""
        save_dir = Path(save_dir)
        return cls(save_dir, save_dir, Path(log) if log else save_dir / "train.log")

    @classmethod
    def for_system(cls, workdir: Path, name: str, seed: int = 1) -> RunLayout:
        """A quickstart system's run of one seed:
        ``workdir/runs/<slug of its catalog name>/seed<seed>``."""
        return cls.under(Path(workdir) / "runs" / system_slug(name) / f"seed{seed}")

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoints / "checkpoint_last.pt"

    @property
    def started(self) -> Path:
        """Whose checkpoints these are (the fingerprint of the run that wrote them)."""
        return self.root / f"{self.name}.started.json"

    @property
    def curve(self) -> Path:
        """The learning curve of timed validations, kept with its checkpoints."""
        return self.checkpoints / "curve.jsonl"

    def stale(self, fingerprint: str | None) -> Path:
        """Where the checkpoints of other settings are set aside."""
        return self.root / "stale" / (fingerprint or "unknown")

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    @property
    def hypotheses(self) -> Path:
        return self.eval_dir / "hyp.txt"

    @property
    def scores(self) -> Path:
        return self.eval_dir / "scores.json"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"
