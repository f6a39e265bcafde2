"""One training run: ``train_run(spec, layout, runner)`` (or a GLUE row's commands, each a
:class:`TrainCommand`, in place of ``spec``).

With a :class:`~localnmt.steps.StepRunner` (the quickstart, ``reproduce``) the training is a
step: a rerun with the same settings and data is skipped, changed ones retrain (the old
checkpoints are set aside in ``stale/``), an interrupted one resumes from
``checkpoint_last.pt``. Without one (``localnmt-train``) fairseq trains into the save
directory as it always does, resuming whatever ``checkpoint_last.pt`` it finds.

    from localnmt.runs.layout import RunLayout
    from localnmt.runs.run_specs import TrainSpec
    from localnmt.runs.train_run import train_run
    from localnmt.steps import StepRunner

    layout = RunLayout.under(run_dir)
    spec = TrainSpec(data=str(data_bin), save_dir=str(layout.checkpoints), arch="localnmt_base",
                     size="tiny", cpu=True, extra=("--seed", "2"))
    run = train_run(spec, layout, StepRunner(layout.root))
    run.checkpoint  # layout.last_checkpoint

The fingerprint covers everything that decides the trained model: the data-bin's contents
(:mod:`localnmt.digests`: dictionaries and binarised files, byte for byte), the architecture,
every fairseq-train argument the launch passes (the recipe's, hence learning rate, batch,
update-freq, ``--max-update``; the row's ``args`` and ``train_args``; any extra argument) and
the world size. Paths (data, save dir, ``--user-dir``, ``--curve``) are left out, so a moved
run directory is still recognised.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from localnmt import locks
from localnmt.atomic import write_json
from localnmt.errors import TrainFailed
from localnmt.runs.launch import (
    check_data_bin,
    launch_command,
    model_args,
    run_logged,
    world_size,
)
from localnmt.runs.layout import RunLayout
from localnmt.runs.preflight import check_training
from localnmt.runs.run_specs import TrainSpec
from localnmt.steps import Log, StepRunner, input_digests


@dataclass
class TrainRun:
    """Where a finished run lives and whether this call trained it."""

    layout: RunLayout
    #: the fingerprint of its (last) training step; None without a step runner
    fingerprint: str | None
    ran: bool
    #: the (last) training command
    command: list[str]
    #: the settings, when a :class:`TrainSpec` was trained (None: a GLUE row's commands)
    spec: TrainSpec | None = None
    #: seconds of wall clock its launch took in this call (None: reused, or no step runner)
    seconds: float | None = None
    #: whether its (last) launch went on from checkpoints already in its save dir
    resumed: bool = False

    @property
    def checkpoint_dir(self) -> Path:
        return self.layout.checkpoints

    @property
    def log(self) -> Path:
        return self.layout.train_log

    @property
    def checkpoint(self) -> Path:
        """The last checkpoint."""
        return self.layout.last_checkpoint


@dataclass(frozen=True)
class TrainCommand:
    """One training process as a step: its command, where it writes (``layout``: save dir,
    log, ``<name>.started.json``) and what its fingerprint covers (``params``, the contents
    of ``inputs``, the steps ``deps`` it follows)."""

    name: str
    cmd: list[str]
    layout: RunLayout
    params: object
    inputs: list[Path]
    outputs: list[Path]
    deps: tuple[str, ...] = ()
    #: what it is called in messages (``training``, ``finetune SST-2``)
    what: str = "training"
    #: the first message of a launch (None: ``what``)
    announce: str | None = None
    #: log the command line before it runs
    show_command: bool = False
    procs_per_node: int = 1


def run_params(spec: TrainSpec, gpus: int) -> dict:
    """What the fingerprint of a run covers besides the data (see the module docstring)."""
    return {
        "arch": spec.arch,
        "fairseq_args": model_args(spec, gpus),
        "world_size": world_size(spec, gpus),
    }


def claim_checkpoints(
    layout: RunLayout, fp: str, params: object, log: Log, extends: Collection[str] = ()
) -> bool:
    """Before a run of fingerprint ``fp`` writes its checkpoints: those left by other settings
    (``layout.started`` says whose they are) move to ``stale/<fingerprint>/``, never resumed,
    unless they are a run this one ``extends`` (the same training to fewer updates); then
    ``layout.started`` records ``fp``. True when an interrupted run of these settings, or the
    run it extends, left a ``checkpoint_last.pt`` to resume (fairseq reads it from the save
    dir)."""
    old = _stamp_fingerprint(layout.started)
    ckpt = layout.checkpoints
    if ckpt.exists() and any(ckpt.iterdir()) and old != fp and old not in extends:
        dest = layout.stale(old)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        ckpt.rename(dest)
        log(f"  settings changed: moved the previous run's checkpoints to {dest} "
            "(delete when unused)")  # fmt: skip
    write_json(layout.started, {"fingerprint": fp, "params": params})
    return layout.last_checkpoint.exists()


def launch_logged(
    cmd: list[str], log_path: Path, *, resume: bool, what: str = "training",
    announce: str | None = None, log: Log = print, echo: bool = False,
    on_line: Callable[[str], None] | None = None, procs_per_node: int = 1,
) -> None:  # fmt: skip
    """Run a training command into ``log_path`` (appending when it resumes); a failure is
    :class:`~localnmt.errors.TrainFailed` with the log's last lines."""
    log(f"  {announce or what} (log {log_path})")
    status = run_logged(cmd, log_path, append=resume, echo=echo, on_line=on_line,
                        procs_per_node=procs_per_node)  # fmt: skip
    if status != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace")
        raise TrainFailed(f"{what} exited with status {status}; see {log_path}:\n"
                          + "\n".join(tail.splitlines()[-15:]), status)  # fmt: skip


def training_step(
    runner: StepRunner,
    layout: RunLayout,
    launch: Callable[[bool], None],
    *,
    name: str,
    params: object,
    inputs: list[Path],
    outputs: list[Path],
    deps: tuple[str, ...] = (),
    log: Log = print,
    extends: Collection[str] = (),
) -> tuple[str, bool]:
    """A training as a step of ``runner``: skipped when an identical run is done; else the
    checkpoints of other settings (but those of a run it ``extends``) are set aside
    (:func:`claim_checkpoints`) and ``launch`` runs, told whether an interrupted run of these
    settings (or the run it extends) is resumed. Returns the step's fingerprint and whether it
    ran."""
    fp = runner.step_fingerprint(params, deps, inputs)

    def train() -> None:
        data = input_digests(inputs, runner.digest_cache)
        stamp = {**params, "data": data} if isinstance(params, dict) else {
            "params": params, "data": data}  # fmt: skip
        resume = claim_checkpoints(layout, fp, stamp, log, extends)
        if resume:
            log(f"  resuming from {layout.last_checkpoint}")
        launch(resume)

    ran = runner.run(name, train, outputs=outputs, params=params, deps=deps, inputs=inputs)
    return fp, ran


def spec_command(spec: TrainSpec, layout: RunLayout, name: str = "train") -> TrainCommand:
    """The one training command of ``spec`` (``spec.save_dir`` must be ``layout.checkpoints``),
    checked before anything runs: :class:`~localnmt.errors.UsageError` when ``spec.data`` is
    no data-bin or a damaged one, or the attention options do not fit
    (:mod:`localnmt.runs.preflight`)."""
    check_data_bin(spec.data)
    if Path(spec.save_dir).resolve() != layout.checkpoints.resolve():
        raise ValueError(f"spec.save_dir {spec.save_dir} is not {layout.checkpoints}")
    gpus = spec.gpus_per_node()
    check_training(spec, gpus)  # data-bin files, attention options and their memory
    return TrainCommand(name, launch_command(spec, gpus), layout, run_params(spec, gpus),
                        inputs=[Path(spec.data)], outputs=[layout.last_checkpoint],
                        announce=f"training {spec.arch}",
                        procs_per_node=spec.procs_per_node(gpus))  # fmt: skip


def train_run(
    training: TrainSpec | Sequence[TrainCommand],
    layout: RunLayout,
    runner: StepRunner | None = None,
    *,
    name: str = "train",
    log: Log = print,
    echo: bool = False,
    on_line: Callable[[str], None] | None = None,
    extends: Collection[str] = (),
) -> TrainRun:
    """Train a :class:`TrainSpec` (:func:`spec_command`, the step ``name``) or a row's
    commands in order (a GLUE row: pre-training, then each fine-tuning), into ``layout``.

    With ``runner``: each command is a step (skipped when an identical run is done); one
    whose save dir holds the checkpoints of a run of fingerprint in ``extends`` (the same
    training with a lower ``--max-update``, under a schedule that does not depend on it)
    resumes them instead of setting them aside. Without: each runs, appending to its log.
    ``echo`` also copies fairseq's output to stdout, ``on_line`` receives each of its lines
    (progress displays).
    Raises :class:`~localnmt.errors.TrainFailed` when fairseq fails."""
    spec = training if isinstance(training, TrainSpec) else None
    commands = [spec_command(spec, layout, name)] if spec is not None else list(training)

    resumed = False

    def launch(command: TrainCommand, resume: bool) -> None:
        nonlocal resumed
        resumed = resume
        if command.show_command:
            log(f"  {command.what}: $ {shlex.join(command.cmd)}")
        launch_logged(command.cmd, command.layout.train_log, resume=resume, what=command.what,
                      announce=command.announce, log=log, echo=echo, on_line=on_line,
                      procs_per_node=command.procs_per_node)  # fmt: skip

    if runner is None:
        with locks.hold(layout.root):
            for command in commands:
                command.layout.checkpoints.mkdir(parents=True, exist_ok=True)
                launch(command, resume=True)
        return TrainRun(layout, None, True, commands[-1].cmd, spec)

    fp, ran, seconds = None, False, 0.0
    for command in commands:
        start = time.monotonic()
        fp, ran_now = training_step(runner, command.layout, partial(launch, command),
                                    name=command.name, params=command.params,
                                    inputs=command.inputs, outputs=command.outputs,
                                    deps=command.deps, log=log, extends=extends)  # fmt: skip
        seconds += time.monotonic() - start
        ran = ran or ran_now
    return TrainRun(layout, fp, ran, commands[-1].cmd, spec, seconds if ran else None, resumed)


def _stamp_fingerprint(stamp: Path) -> str | None:
    try:
        return json.loads(stamp.read_text(encoding="utf-8"))["fingerprint"]
    except (OSError, ValueError, KeyError):
        return None
