"""How a :class:`~localnmt.runs.run_specs.TrainSpec` becomes fairseq-train processes.

One GPU or one CPU process: one Python process running :mod:`localnmt.runs.fairseq_entry`.
Several GPUs, several CPU processes (``--cpu --procs N``) or several nodes:
``torch.distributed.run`` (torchrun), one process per GPU or per ``--procs``, fairseq's env://
initialisation (NCCL on GPUs, gloo on CPUs: the entry point fills in each process's rank).
The output is streamed, line by line, to the run's log.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from localnmt.errors import UsageError
from localnmt.paths import resolve_user_dir
from localnmt.runs.recipes import effective_recipe, train_args
from localnmt.runs.run_specs import TrainSpec
from localnmt.runs.streaming import stream_lines
from localnmt.runs.torchrun_output import LauncherReport

ENTRY = ["-m", "localnmt.runs.fairseq_entry", "train"]
#: fairseq-train options whose value is a path that does not change the model (``--curve``:
#: where the timed validations' learning curve is written, runs/timed_validation.py)
PATH_OPTIONS = ("--save-dir", "--user-dir", "--curve")


def world_size(spec: TrainSpec, gpus: int) -> int:
    """Processes in the run: nodes x (GPUs, or CPU processes) per node."""
    return spec.nnodes * spec.procs_per_node(gpus)


def fairseq_args(spec: TrainSpec, gpus: int) -> list[str]:
    """fairseq-train's arguments: data, arch, save dir, the recipe, then ``spec.extra``."""
    world = world_size(spec, gpus)
    recipe = effective_recipe(spec.size, spec.recipe_overrides)
    args = [str(spec.data), "--arch", spec.arch, "--save-dir", str(spec.save_dir)]
    args += train_args(recipe, world, spec.max_tokens, spec.max_update, spec.layers,
                       spec.tokens_per_update, spec.separate_vocab)  # fmt: skip
    user_dir = resolve_user_dir(spec.user_dir)
    if user_dir:
        args += ["--user-dir", user_dir]
    if gpus == 0:
        args.append("--cpu")
    if spec.precision:
        args.append(f"--{spec.precision}")
    if world > 1:
        args += ["--distributed-world-size", str(world)]
        if gpus == 0:  # CPU processes: gloo, and fairseq's own data-parallel wrapper
            args += ["--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp"]
    return args + list(spec.extra)


def model_args(spec: TrainSpec, gpus: int) -> list[str]:
    """:func:`fairseq_args` without the data path and the options naming paths: what decides
    the trained model (a training step's fingerprint)."""
    kept: list[str] = []
    skip = False
    for arg in fairseq_args(spec, gpus)[1:]:
        if skip:
            skip = False
        elif arg in PATH_OPTIONS:
            skip = True
        else:
            kept.append(arg)
    return kept


def launch_command(spec: TrainSpec, gpus: int | None = None) -> list[str]:
    """The full command: one Python process, or torchrun (one process per GPU, or per
    ``--procs`` on CPUs, on each node)."""
    gpus = spec.gpus_per_node() if gpus is None else gpus
    args = fairseq_args(spec, gpus)
    if world_size(spec, gpus) == 1:
        return [sys.executable, *ENTRY, *args]
    per_node = spec.procs_per_node(gpus)
    launch = [sys.executable, "-m", "torch.distributed.run"]
    if spec.nnodes > 1:
        if not spec.master_addr:
            raise UsageError("--master-addr is needed with --nnodes > 1")
        launch += ["--nnodes", str(spec.nnodes), "--node_rank", str(spec.node_rank),
                   "--nproc_per_node", str(per_node), "--master_addr", spec.master_addr,
                   "--master_port", str(spec.master_port)]  # fmt: skip
    else:
        launch += ["--standalone", "--nnodes", "1", "--nproc_per_node", str(per_node)]
    return [*launch, *ENTRY, *args]


def check_data_bin(data: str | Path) -> None:
    """Stop (:class:`UsageError`) unless ``data`` is a fairseq data-bin (``dict.*.txt``)."""
    path = Path(data)
    hint = ("build it with a data_prep/ script (e.g. data_prep/prepare_gettext.sh --pair "
            "en-de --workdir DIR prints its data-bin) or pass the right --data")  # fmt: skip
    if not path.is_dir():
        raise UsageError(f"data directory {path} does not exist; {hint}")
    if not any(path.glob("dict.*.txt")):
        raise UsageError(f"{path} has no dict.*.txt, so it is no fairseq data-bin; {hint}")


def run_logged(
    cmd: list[str],
    log_file: Path,
    *,
    append: bool = False,
    echo: bool = True,
    on_line: Callable[[str], None] | None = None,
    procs_per_node: int = 1,
    env: dict[str, str] | None = None,
) -> int:
    """Run ``cmd`` with stdout and stderr streamed, line by line, to ``log_file`` (and to this
    process's stdout with ``echo``, and to ``on_line``, e.g. a progress display); returns the
    exit status. The child runs under :func:`localnmt.runs.streaming.stream_lines` (threads
    that sleep when idle; ``procs_per_node`` CPU processes share the cores; ``env``: another
    environment, for measurements); if this process is interrupted (Ctrl-C, SIGTERM, an
    error of ``on_line``) the child is stopped and waited for before the interruption goes
    on; if this process dies, the child is sent SIGTERM."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    report = LauncherReport()  # torchrun's own traceback is in the log, not echoed
    with open(log_file, "a" if append else "w", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(cmd)}\n")
        log.flush()

        def each_line(line: str) -> None:
            log.write(line)
            log.flush()
            if echo:
                sys.stdout.writelines(report.feed(line))
                sys.stdout.flush()
            if on_line is not None:
                on_line(line.rstrip("\n"))

        status = stream_lines(cmd, each_line, procs_per_node=procs_per_node, env=env)
    if echo:
        sys.stdout.writelines(report.flush())
    return status
