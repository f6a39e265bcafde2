"""Train one model with the papers' hyper-parameters (``localnmt-train``).

    localnmt-train --data BIN --save-dir DIR [--arch ARCH] [--size base|big|cpu|tiny]
        [--max-tokens N] [--max-update N] [--layers N] [--gpus N] [--cpu] [--fp16|--bf16]
        [--tokens-per-update N] [--separate-vocab]
        [--nnodes N --node-rank R --master-addr HOST --master-port PORT]
        [--user-dir DIR|auto|none] [--log FILE] [--dry-run] [-- EXTRA fairseq-train ARGS]

(also ``python -m localnmt.runs.train`` and ``scripts/train.sh``). One GPU: one process.
Several GPUs (or nodes): ``torch.distributed.run`` (torchrun), one process per GPU, fairseq's
env:// initialisation. No GPU: ``--cpu``. ``--update-freq`` is chosen so that
world_size x max_tokens x update_freq >= ``--tokens-per-update`` (default 8 GPUs x 4096 =
32768 tokens; base/big recipes, :func:`localnmt.runs.recipes.train_args`). ``--separate-vocab``:
separate source/target dictionaries (share the decoder's input/output embeddings only).
The fairseq process is :mod:`localnmt.runs.fairseq_entry` (fairseq-train with the torch >= 2.6
checkpoint fix); its output goes to the terminal and to ``--log`` (default DIR/train.log).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from localnmt.paths import resolve_user_dir
from localnmt.runs.errors import UsageError, cli

ENTRY = ["-m", "localnmt.runs.fairseq_entry", "train"]
PRECISIONS = ("--fp16", "--bf16")


@dataclass
class TrainSpec:
    """Everything that decides one training command (the options of ``localnmt-train``)."""

    data: str
    save_dir: str
    arch: str = "localnmt_base"
    size: str = "base"
    max_tokens: int | None = None
    max_update: int | None = None
    layers: int | None = None
    tokens_per_update: int | None = None
    separate_vocab: bool = False
    gpus: int | None = None  # GPUs per node; None: every visible GPU
    cpu: bool = False
    precision: str | None = None  # "--fp16" or "--bf16"
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int = 29500
    user_dir: str | None = "auto"  # "auto", "none" or a directory
    extra: list[str] = field(default_factory=list)  # fairseq-train arguments, last

    def gpus_per_node(self) -> int:
        """0 on CPU, else ``gpus`` or the number of visible GPUs."""
        if self.cpu:
            return 0
        if self.gpus is not None:
            return self.gpus
        import torch

        return torch.cuda.device_count()

    def to_argv(self) -> list[str]:
        """The ``localnmt-train`` options giving this spec (for printing and re-running)."""
        argv = ["--data", str(self.data), "--save-dir", str(self.save_dir), "--arch", self.arch,
                "--size", self.size]  # fmt: skip
        for name in ("max_tokens", "max_update", "layers", "tokens_per_update", "gpus"):
            if getattr(self, name) is not None:
                argv += ["--" + name.replace("_", "-"), str(getattr(self, name))]
        if self.nnodes != 1:
            argv += ["--nnodes", str(self.nnodes), "--node-rank", str(self.node_rank),
                     "--master-addr", str(self.master_addr),
                     "--master-port", str(self.master_port)]  # fmt: skip
        argv += ["--separate-vocab"] if self.separate_vocab else []
        argv += ["--cpu"] if self.cpu else []
        argv += [self.precision] if self.precision else []
        argv += ["--user-dir", self.user_dir or "none"] if self.user_dir != "auto" else []
        return argv + (["--", *self.extra] if self.extra else [])


def world_size(spec: TrainSpec, gpus: int) -> int:
    """Processes in the run: nodes x GPUs per node, or 1 on CPU."""
    return spec.nnodes * gpus if gpus > 0 else 1


def fairseq_args(spec: TrainSpec, gpus: int) -> list[str]:
    """fairseq-train's arguments: data, arch, save dir, the recipe, then ``spec.extra``."""
    from localnmt.runs.recipes import RECIPES, train_args

    if spec.size not in RECIPES:
        raise UsageError(f"unknown --size {spec.size!r}; choose from {', '.join(RECIPES)}")
    world = world_size(spec, gpus)
    args = [str(spec.data), "--arch", spec.arch, "--save-dir", str(spec.save_dir)]
    args += train_args(spec.size, world, spec.max_tokens, spec.max_update, spec.layers,
                       spec.tokens_per_update, spec.separate_vocab)  # fmt: skip
    user_dir = resolve_user_dir(spec.user_dir)
    if user_dir:
        args += ["--user-dir", user_dir]
    if gpus == 0:
        args.append("--cpu")
    if spec.precision:
        args.append(spec.precision)
    if world > 1:
        args += ["--distributed-world-size", str(world)]
    return args + list(spec.extra)


def launch_command(spec: TrainSpec, gpus: int | None = None) -> list[str]:
    """The full command: one Python process, or torchrun (one process per GPU, per node)."""
    gpus = spec.gpus_per_node() if gpus is None else gpus
    args = fairseq_args(spec, gpus)
    if world_size(spec, gpus) == 1:
        return [sys.executable, *ENTRY, *args]
    launch = [sys.executable, "-m", "torch.distributed.run"]
    if spec.nnodes > 1:
        if not spec.master_addr:
            raise UsageError("--master-addr is needed with --nnodes > 1")
        launch += ["--nnodes", str(spec.nnodes), "--node_rank", str(spec.node_rank),
                   "--nproc_per_node", str(gpus), "--master_addr", spec.master_addr,
                   "--master_port", str(spec.master_port)]  # fmt: skip
    else:
        launch += ["--standalone", "--nnodes", "1", "--nproc_per_node", str(gpus)]
    return [*launch, *ENTRY, *args]


def check_data_bin(data: str | Path) -> None:
    """Stop (exit 2) unless ``data`` is a fairseq data-bin (a folder with ``dict.*.txt``)."""
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
) -> int:
    """Run ``cmd`` with stdout and stderr streamed, line by line, to ``log_file`` (and to this
    process's stdout with ``echo``, and to ``on_line``, e.g. a progress display); returns the
    exit status."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "a" if append else "w", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(cmd)}\n")
        log.flush()
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", bufsize=1) as proc:  # fmt: skip
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if echo:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                if on_line is not None:
                    on_line(line.rstrip("\n"))
        return proc.returncode


def build_parser() -> argparse.ArgumentParser:
    """``localnmt-train``'s options (fairseq-train arguments go after ``--``)."""
    from localnmt.runs.recipes import RECIPES

    p = argparse.ArgumentParser(prog="localnmt-train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--data", required=True, help="fairseq data-bin")
    p.add_argument("--save-dir", required=True, help="checkpoint directory")
    p.add_argument("--arch", default="localnmt_base")
    p.add_argument("--size", default="base", choices=list(RECIPES), help="training recipe")
    p.add_argument("--max-tokens", type=int, help="tokens per GPU batch (default: recipe's)")
    p.add_argument("--max-update", type=int, help="updates (default: recipe's)")
    p.add_argument("--layers", type=int, help="encoder and decoder layers")
    p.add_argument(
        "--tokens-per-update",
        type=int,
        help="batch in tokens reached with --update-freq (default 32768)",
    )
    p.add_argument(
        "--separate-vocab",
        action="store_true",
        help="separate source/target dictionaries: share decoder embeddings only",
    )
    p.add_argument("--gpus", type=int, help="GPUs per node (default: all visible)")
    p.add_argument("--cpu", action="store_true", help="train on the CPU")
    precision = p.add_mutually_exclusive_group()
    for flag in PRECISIONS:
        precision.add_argument(flag, dest="precision", action="store_const", const=flag)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument(
        "--user-dir",
        default="auto",
        help="plugin directory for fairseq; auto: this package when it imports; none",
    )
    p.add_argument(
        "--no-user-dir",
        dest="user_dir",
        action="store_const",
        const="none",
        help="same as --user-dir none",
    )
    p.add_argument("--log", type=Path, help="log file (default: SAVE_DIR/train.log)")
    p.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    return p


def split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """Own options and the fairseq-train arguments after the first ``--``."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def parse_args(argv: list[str] | None = None) -> tuple[TrainSpec, argparse.Namespace]:
    """The spec and the launcher-only options (``log``, ``dry_run``)."""
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    ns = build_parser().parse_args(own)
    spec = TrainSpec(
        data=ns.data, save_dir=ns.save_dir, arch=ns.arch, size=ns.size,
        max_tokens=ns.max_tokens, max_update=ns.max_update, layers=ns.layers,
        tokens_per_update=ns.tokens_per_update, separate_vocab=ns.separate_vocab,
        gpus=ns.gpus, cpu=ns.cpu, precision=ns.precision, nnodes=ns.nnodes,
        node_rank=ns.node_rank, master_addr=ns.master_addr, master_port=ns.master_port,
        user_dir=ns.user_dir, extra=extra,
    )  # fmt: skip
    return spec, ns


@cli("localnmt-train")
def main(argv: list[str] | None = None) -> int:
    """CLI entry point (``localnmt-train``)."""
    spec, ns = parse_args(argv)
    gpus = spec.gpus_per_node()
    cmd = launch_command(spec, gpus)
    if ns.dry_run:
        print(shlex.join(cmd))
        return 0
    check_data_bin(spec.data)
    log = ns.log or Path(spec.save_dir) / "train.log"
    Path(spec.save_dir).mkdir(parents=True, exist_ok=True)
    print(f"localnmt-train: world size {world_size(spec, gpus)} (gpus/node {gpus}, nodes "
          f"{spec.nnodes}), log {log}", file=sys.stderr, flush=True)  # fmt: skip
    return run_logged(cmd, log, append=True)


if __name__ == "__main__":
    sys.exit(main())
