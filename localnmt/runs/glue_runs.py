"""Pande et al. (2021) Table 4 runs: pre-train a BERT arch, fine-tune it per GLUE task, read
the dev accuracy.

Data layout (``--data``, default ``runs/data/glue``)::

    DATA/pretrain/   the pre-training text's data-bin (data_prep/prepare_pretrain_text.sh)
                     (dict.txt, train.*, valid.*), BPE-segmented
    DATA/<TASK>/     data_prep/prepare_glue.sh output for QQP, SST-2, MNLI, QNLI (built with
                     the pre-training dictionary)

Per row: ``python -m localnmt.runs.roberta_pretrain`` (short samples, then long ones), then
``python -m localnmt.runs.glue_finetune`` per task from the second phase's checkpoint: the
commands of :func:`training_commands`, trained and evaluated (:class:`GlueEvaluation`, the
dev accuracy) by :func:`localnmt.runs.experiment.train_and_score` like any catalog row. The paper
picks batch size and learning rate per task from a grid (``glue_finetune.grid`` of
configs/recipes.yaml): ``grid=True`` runs every setting and keeps the best dev accuracy, else
the recipe's ``batch_size`` and ``lr`` run alone. MNLI is validated on matched (``valid``, the
number reported) and mismatched (``valid1``) dev sets.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from localnmt.catalog import CatalogRow
from localnmt.catalog.tasks import GLUE_TASKS
from localnmt.runs.layout import RunLayout
from localnmt.runs.recipes import glue_finetune_recipe, lr_text, roberta_pretrain_recipe
from localnmt.runs.train_run import TrainCommand, TrainRun
from localnmt.steps import Log

PRETRAIN = [sys.executable, "-m", "localnmt.runs.roberta_pretrain"]
FINETUNE = [sys.executable, "-m", "localnmt.runs.glue_finetune"]


def grid_settings() -> tuple[tuple[int, str], ...]:
    """(batch size, learning rate) choices of the paper (Section 5.1), as command-line text."""
    return tuple((bsz, lr_text(lr)) for bsz, lr in glue_finetune_recipe().grid)


def default_setting() -> tuple[int, str]:
    """The setting run without the grid."""
    recipe = glue_finetune_recipe()
    return recipe.batch_size, lr_text(recipe.lr)


#: --tiny: 12 layers kept (the tying specs name layers 1-11 / 1-10), narrow and short.
TINY_MODEL = ["--encoder-embed-dim", "48", "--encoder-ffn-embed-dim", "64", "--num-workers", "0"]
TINY_PRETRAIN = ["--phase1-updates", "3", "--phase2-updates", "1", "--batch-per-gpu", "8"]
TINY_FINETUNE = ["--batch-size", "8", "--warmup", "1", "--max-epoch", "1"]

_VALID = re.compile(r"valid on '(\w+)' subset \|(.*)$")


@dataclass
class Step:
    """One command of a row's run; ``output`` is the checkpoint it leaves when it succeeds,
    ``save_dir`` the folder its checkpoints go to."""

    name: str
    cmd: list[str]
    log: Path
    output: Path
    save_dir: Path
    #: the data-bin it reads (the pre-training text, or the task's)
    data: Path
    task: str | None = None  # the GLUE task of a fine-tuning step
    setting: tuple[int, str] | None = None


@dataclass
class GluePlan:
    """All steps of one catalog row."""

    row: CatalogRow
    steps: list[Step] = field(default_factory=list)


def missing_data(data: Path, tasks: tuple[str, ...] = GLUE_TASKS) -> list[str]:
    """What is missing under a GLUE data folder (empty when it is complete)."""
    missing = [] if (data / "pretrain" / "dict.txt").is_file() else ["pretrain/dict.txt"]
    missing += [
        f"{t}/localnmt_glue.json" for t in tasks if not (data / t / "localnmt_glue.json").is_file()
    ]
    return missing


def plan_row(
    row: CatalogRow,
    data: Path,
    run_dir: Path,
    *,
    tasks: tuple[str, ...] = GLUE_TASKS,
    grid: bool = False,
    tiny: bool = False,
    cpu: bool = False,
    gpus: int | None = None,
    extra: list[str] | None = None,
) -> GluePlan:
    """The pre-training and fine-tuning commands of one row (nothing runs)."""
    arch = row.arch
    common = ["--arch", arch]
    if gpus is not None:
        common += ["--gpus", str(gpus)]
    if cpu:
        common.append("--cpu")
    if tiny:
        common += ["--optimizer", "adam"]  # no apex probing needed for a smoke test
    model_args = [*row.args, *(TINY_MODEL if tiny else []), *(extra or [])]
    pre_dir = run_dir / "pretrain"
    pretrain = [*PRETRAIN, "--data", str(data / "pretrain"), "--save-dir",
                str(pre_dir), *common, *(TINY_PRETRAIN if tiny else [])]  # fmt: skip
    # tiny: no 2K-sequence accumulation; keep the few packed blocks of a tiny corpus
    tiny_pre = ["--update-freq", "1", "--required-batch-size-multiple", "1"]
    pre_extra = [*model_args, *(tiny_pre if tiny else [])]
    if pre_extra:
        pretrain += ["--", *pre_extra]
    plan = GluePlan(row)
    long_samples = roberta_pretrain_recipe().phase2_tokens_per_sample
    restore = pre_dir / f"seq{long_samples}" / "checkpoint_last.pt"
    plan.steps.append(Step("pretrain", pretrain, pre_dir / "train.log", restore, pre_dir,
                           data / "pretrain"))  # fmt: skip
    for task in tasks:
        for bsz, lr in grid_settings() if grid else (default_setting(),):
            out = run_dir / task / (f"bsz{bsz}_lr{lr}" if grid else "")
            cmd = [*FINETUNE, "--data", str(data / task), "--save-dir",
                   str(out / "checkpoints"), "--restore-file", str(restore), *common]  # fmt: skip
            if tiny:
                cmd += TINY_FINETUNE
            else:
                cmd += ["--batch-size", str(bsz), "--lr", lr]
            ft_extra = list(model_args)
            if task == "MNLI":
                ft_extra = ["--valid-subset", "valid,valid1", *ft_extra]
            if tiny:
                ft_extra += ["--max-update", "3"]
            cmd += ["--", *ft_extra]
            ckpt = out / "checkpoints" / "checkpoint_last.pt"
            step = Step(f"finetune {task}", cmd, out / "train.log", ckpt, ckpt.parent,
                        data / task, task)  # fmt: skip
            step.setting = (bsz, lr)
            plan.steps.append(step)
    return plan


def glue_step_key(step: Step, run_dir: Path) -> str:
    """The step's marker name, one per output folder: ``pretrain``, ``SST-2`` or, with the
    grid, ``SST-2_bsz32_lr1e-4``."""
    return step.log.parent.relative_to(run_dir).as_posix().replace("/", "_")


def portable_command(cmd: list[str], root: Path) -> list[str]:
    """``cmd`` with every path under ``root`` written relative to it: the key of a GLUE step,
    so that a moved workdir is still recognised (its checkpoints resumed, not set aside)."""
    out = []
    for arg in cmd:
        path = Path(arg)
        if path.is_absolute() and path.is_relative_to(root):
            arg = path.relative_to(root).as_posix()
        out.append(arg)
    return out


def training_commands(plan: GluePlan, run_dir: Path, root: Path) -> list[TrainCommand]:
    """The row's training for :func:`~localnmt.runs.train_run.train_run`: each command a step
    keyed by its command line (paths under ``root``, the workdir, relative to it) and the
    contents of the data it reads, the fine-tunings after the pre-training (a changed
    setting or corpus reruns it and the steps after it). Pre-training's first phase resumes
    any ``checkpoint_last.pt`` in its save dir: those of other settings are moved aside
    first (the training step claims them)."""
    commands = []
    for step in plan.steps:
        key = glue_step_key(step, run_dir)
        commands.append(TrainCommand(
            key, step.cmd, RunLayout(run_dir, step.save_dir, step.log, name=key),
            params=portable_command(step.cmd, root), inputs=[step.data], outputs=[step.output],
            deps=() if key == "pretrain" else ("pretrain",), what=step.name, show_command=True,
        ))  # fmt: skip
    return commands


def setting_text(grid: bool) -> str:
    """The fine-tuning settings in words (``batch 32, lr 1e-4``; with the grid
    ``grid batch {32, 128} x lr {1e-4, 2e-4}`` when it is every pair of its values)."""
    if not grid:
        bsz, lr = default_setting()
        return f"batch {bsz}, lr {lr}"
    settings = grid_settings()
    sizes = list(dict.fromkeys(bsz for bsz, _ in settings))
    rates = list(dict.fromkeys(lr for _, lr in settings))
    if sorted(settings) == sorted((bsz, lr) for bsz in sizes for lr in rates):
        return f"grid batch {{{', '.join(map(str, sizes))}}} x lr {{{', '.join(rates)}}}"
    return "grid (batch, lr) in " + ", ".join(f"({bsz}, {lr})" for bsz, lr in settings)


def dev_accuracy(log_text: str) -> dict[str, float]:
    """Best dev accuracy per validation subset (``valid``, ``valid1``) of a fine-tuning log."""
    best: dict[str, float] = {}
    for line in log_text.splitlines():
        match = _VALID.search(line)
        if not match:
            continue
        for item in match.group(2).split(" | "):
            parts = item.split()
            if len(parts) == 2 and parts[0] == "accuracy":
                value = float(parts[1])
                best[match.group(1)] = max(value, best.get(match.group(1), value))
    return best


@dataclass
class GlueTaskScore:
    """A GLUE task's evaluation: the best dev accuracy (matched for MNLI, ``mismatched``
    beside it) and the setting that gave it, and every setting's accuracies."""

    accuracy: float | None = None
    settings: list[dict] = field(default_factory=list)
    batch_size: int | None = None
    lr: str | None = None
    mismatched: float | None = None

    def to_json(self) -> dict:
        """The results page's JSON (keys as before: the best setting only once known)."""
        out: dict = {"accuracy": self.accuracy, "settings": self.settings}
        if self.batch_size is not None:
            out.update(batch_size=self.batch_size, lr=self.lr)
        if self.mismatched is not None:
            out["mismatched"] = self.mismatched
        return out


#: a GLUE row's result: each task's dev accuracy
GlueScores = dict[str, GlueTaskScore]


@dataclass(frozen=True)
class GlueEvaluation:
    """The evaluation of a GLUE row for :func:`~localnmt.runs.experiment.train_and_score`:
    fairseq's validation during fine-tuning measured the metric, so this step reads it from
    the logs every time (no step of its own, nothing written)."""

    plan: GluePlan

    def step(self, trained: TrainRun) -> None:
        """Not a step: the logs are read afresh."""
        return None

    def evaluate(self, trained: TrainRun, log: Log) -> None:
        """Nothing to compute after training."""

    def result(self, trained: TrainRun) -> GlueScores:
        """:func:`row_scores` of the plan."""
        return row_scores(self.plan)


def row_scores(plan: GluePlan) -> GlueScores:
    """The evaluation step of a GLUE row: per task, the dev accuracy read from its
    fine-tuning logs (matched for MNLI), the setting that gave it, all settings."""
    out: GlueScores = {}
    for step in plan.steps:
        if step.task is None:
            continue
        acc = dev_accuracy(step.log.read_text()) if step.log.exists() else {}
        entry = out.setdefault(step.task, GlueTaskScore())
        bsz, lr = step.setting or default_setting()
        entry.settings.append({"batch_size": bsz, "lr": lr, **acc})
        if acc.get("valid") is not None and (
            entry.accuracy is None or acc["valid"] > entry.accuracy
        ):
            entry.accuracy, entry.batch_size, entry.lr = acc["valid"], bsz, lr
            if "valid1" in acc:
                entry.mismatched = acc["valid1"]
    return out
