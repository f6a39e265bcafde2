"""One training run as a resumable step: rerun with the same settings skips it, changed
settings retrain, an interrupted run resumes from ``checkpoint_last.pt``.

    from localnmt.runs.train_run import train_run
    run = train_run(run_dir, data_bin, "localnmt_base", ["--seed", "2"], size="tiny", cpu=True)
    run.checkpoint_dir / "checkpoint_last.pt"

Layout of ``run_dir``: ``checkpoints/`` (fairseq's ``--save-dir``), ``train.log`` (the
process's output), ``train.started.json`` (the fingerprint of the run the checkpoints belong
to) and ``.done/<name>.json`` (:class:`localnmt.data.steps.StepRunner`'s marker).

The fingerprint covers everything that decides the trained model: the data-bin (its
dictionaries' contents and the sizes of its binarised files), the architecture, every
fairseq-train argument the launch passes (the recipe's, hence learning rate, batch,
update-freq, ``--max-update``; the row's ``args`` and ``train_args``; ``--stop-time-hours``
and any other extra argument) and the world size. Paths (data, save dir, ``--user-dir``,
``--curve``) are left out, so a moved run directory is still recognised.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from localnmt.data.steps import Log, StepRunner, fingerprint, write_json
from localnmt.runs.train import (
    TrainSpec,
    check_data_bin,
    fairseq_args,
    launch_command,
    run_logged,
    world_size,
)

#: fairseq-train options whose value is a path that does not change the model (``--curve``:
#: where the wall-clock validations' learning curve is written, runs/timed_validation.py)
PATH_OPTIONS = ("--save-dir", "--user-dir", "--curve")


class TrainFailed(RuntimeError):
    """fairseq-train exited with an error (its log names the cause)."""


@dataclass
class TrainRun:
    """Where a finished run lives and whether this call trained it."""

    run_dir: Path
    checkpoint_dir: Path
    log: Path
    fingerprint: str
    ran: bool
    command: list[str]

    @property
    def checkpoint(self) -> Path:
        """The last checkpoint."""
        return self.checkpoint_dir / "checkpoint_last.pt"


def data_fingerprint(data_bin: Path) -> dict[str, str]:
    """Contents of the dictionaries and sizes of the binarised files of a data-bin."""
    out: dict[str, str] = {}
    for path in sorted(Path(data_bin).iterdir()):
        if path.name.startswith("dict.") and path.suffix == ".txt":
            out[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        elif path.suffix in (".bin", ".idx"):
            out[path.name] = str(path.stat().st_size)
    return out


def run_params(spec: TrainSpec, gpus: int) -> dict:
    """What the fingerprint of a run covers (see the module docstring)."""
    args = fairseq_args(spec, gpus)[1:]  # without the data path
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in PATH_OPTIONS:
            skip = True
            continue
        kept.append(arg)
    return {
        "data": data_fingerprint(Path(spec.data)),
        "arch": spec.arch,
        "fairseq_args": kept,
        "world_size": world_size(spec, gpus),
    }


def claim_checkpoints(
    checkpoint_dir: Path, run_dir: Path, stamp: Path, fp: str, params: object, log: Log
) -> bool:
    """Before a run of fingerprint ``fp`` writes into ``checkpoint_dir``: checkpoints left by
    other settings (``stamp`` says whose they are) move to ``run_dir/stale/<fingerprint>/``,
    never resumed; then ``stamp`` records ``fp``. True when an interrupted run of these
    settings left a ``checkpoint_last.pt`` to resume (fairseq reads it from the save dir)."""
    old = _stamp_fingerprint(stamp)
    if checkpoint_dir.exists() and any(checkpoint_dir.iterdir()) and old != fp:
        dest = run_dir / "stale" / (old or "unknown")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        checkpoint_dir.rename(dest)
        log(f"  settings changed: moved the previous run's checkpoints to {dest} "
            "(delete when unused)")  # fmt: skip
    write_json(stamp, {"fingerprint": fp, "params": params})
    return (checkpoint_dir / "checkpoint_last.pt").exists()


def train_run(
    run_dir: Path,
    data_bin: Path,
    arch: str,
    args: Sequence[str] = (),
    *,
    size: str = "base",
    max_update: int | None = None,
    max_tokens: int | None = None,
    layers: int | None = None,
    tokens_per_update: int | None = None,
    separate_vocab: bool = False,
    gpus: int | None = None,
    cpu: bool = False,
    precision: str | None = None,
    user_dir: str | None = "auto",
    runner: StepRunner | None = None,
    name: str = "train",
    log: Log = print,
    echo: bool = False,
    on_line: Callable[[str], None] | None = None,
) -> TrainRun:
    """Train ``arch`` on ``data_bin`` into ``run_dir/checkpoints`` unless an identical run is
    done; ``args`` are extra fairseq-train arguments (after the recipe's, so they win).

    ``runner``: the :class:`StepRunner` whose markers record the step (default: one on
    ``run_dir``); ``name`` its step name. ``echo`` also copies fairseq's output to stdout,
    ``on_line`` receives each of its lines (progress displays).
    Raises :class:`localnmt.runs.errors.UsageError` (exit 2) when ``data_bin`` is no data-bin,
    :class:`TrainFailed` when fairseq fails."""
    run_dir = Path(run_dir)
    check_data_bin(data_bin)
    spec = TrainSpec(
        data=str(data_bin), save_dir=str(run_dir / "checkpoints"), arch=arch, size=size,
        max_tokens=max_tokens, max_update=max_update, layers=layers,
        tokens_per_update=tokens_per_update, separate_vocab=separate_vocab, gpus=gpus, cpu=cpu,
        precision=precision, user_dir=user_dir, extra=list(args),
    )  # fmt: skip
    n_gpus = spec.gpus_per_node()
    cmd = launch_command(spec, n_gpus)
    params = run_params(spec, n_gpus)
    fp = fingerprint(params)
    ckpt_dir = run_dir / "checkpoints"
    train_log = run_dir / "train.log"
    stamp = run_dir / "train.started.json"

    def train() -> None:
        resume = claim_checkpoints(ckpt_dir, run_dir, stamp, fp, params, log)
        if resume:
            log(f"  resuming from {ckpt_dir / 'checkpoint_last.pt'}")
        log(f"  training {arch} (log {train_log})")
        status = run_logged(cmd, train_log, append=resume, echo=echo, on_line=on_line)
        if status != 0:
            tail = train_log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            raise TrainFailed(
                f"training exited with status {status}; see {train_log}:\n" + "\n".join(tail)
            )

    runner = runner or StepRunner(run_dir, log=log)
    ran = runner.run(name, train, outputs=[ckpt_dir / "checkpoint_last.pt"], params=params)
    return TrainRun(run_dir, ckpt_dir, train_log, fp, ran, cmd)


def _stamp_fingerprint(stamp: Path) -> str | None:
    try:
        return json.loads(stamp.read_text(encoding="utf-8"))["fingerprint"]
    except (OSError, ValueError, KeyError):
        return None
