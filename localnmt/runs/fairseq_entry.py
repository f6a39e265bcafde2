"""Run fairseq's train/generate CLIs in-process with the torch>=2.6 checkpoint-loading fix.

``python -m localnmt.runs.fairseq_entry {train,generate} ARGS...`` behaves like
``fairseq-train ARGS`` / ``fairseq-generate ARGS`` but allow-lists ``argparse.Namespace`` for
``torch.load(weights_only=True)`` first, so checkpoints load (and runs resume) even with a
plain fairseq ``--arch`` and no ``--user-dir``. localnmt's architectures are registered
(:mod:`localnmt.fairseq_plugin`) whether or not ``--user-dir`` names the plugin. Never imports
torchaudio.

``python -m localnmt.runs.fairseq_entry generate-subsets test,test1 DIR ARGS...`` runs
fairseq-generate once per subset in one process (one start-up for several test sets, e.g.
NIST MT03–MT08), writing ``DIR/generate-<subset>.txt`` each (fairseq's ``--results-path``).

Freed memory stays in the process for the next update (:mod:`localnmt.heap`), and with
``--cpu`` each training and decoding sets its thread count from what else runs on the machine
(:mod:`localnmt.core_share`).

``train`` also takes ``--curve FILE`` (append each validation to FILE) and
``--validate-every-minutes M`` (validate and save every M minutes of training time), not
fairseq options (:mod:`localnmt.runs.timed_validation`), nor are ``--start-over`` and
``--accept-lost-updates`` (:mod:`localnmt.runs.resume_checks`). Ctrl-C ends a run with exit status
130 and no traceback; the last saved checkpoint is where the next run resumes.
"""

from __future__ import annotations

import os
import sys

from localnmt.errors import UsageError, entry_point


def allow_checkpoint_globals() -> None:
    """Let ``torch.load`` (weights only) unpickle fairseq's checkpoints and the training state
    rank 0 broadcasts to the other ranks on a resume (:mod:`localnmt.safe_load`'s list)."""
    from localnmt.safe_load import allow_checkpoint_globals as allow

    allow()


def rank() -> int:
    """This process's rank (0 outside a distributed launch)."""
    return int(os.environ.get("RANK", "0") or 0)


def cpu_distributed_arguments(argv: list[str]) -> list[str]:
    """For one of several CPU processes started by torchrun: its rank and env://
    initialisation (fairseq's own torchrun set-up assumes GPUs and divides by their count)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if "--cpu" not in argv or world < 2 or "RANK" not in os.environ:
        return []
    return ["--distributed-init-method", "env://", "--distributed-rank", str(rank()),
            "--distributed-no-spawn", "--device-id", "0"]  # fmt: skip


def fairseq_logging() -> None:
    """fairseq_cli's log format, even if importing the plugin configured logging first."""
    import logging
    import os

    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=os.environ.get("LOGLEVEL", "INFO").upper(),
        stream=sys.stdout,
        force=True,
    )


def pop_option(argv: list[str], name: str) -> str | None:
    """Remove ``name VALUE`` (or ``name=VALUE``) from ``argv``; return VALUE or None."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
            del argv[i : i + 2]
            return value
        if arg.startswith(name + "="):
            del argv[i]
            return arg.split("=", 1)[1]
    return None


def start_checks(rest: list[str], say) -> list[str]:
    """Before training: ``--start-over`` (the save directory's checkpoints set aside), the
    resume fallback (``--accept-lost-updates`` accepts a large loss), then the checkpoint
    to be loaded checked against the data-bin and the model asked for; returns the
    arguments to add. Loading failures fairseq meets anyway are said in one line
    (:func:`localnmt.runs.model_fit.install`)."""
    from localnmt.runs import checkpoint_files, model_fit, resume_checks

    accept = pop_flag(rest, checkpoint_files.ACCEPT_LOSS)
    if pop_flag(rest, resume_checks.START_OVER) and rank() == 0:
        save_dir = checkpoint_files._option(rest, "--save-dir", "checkpoints")
        if (aside := resume_checks.start_over(save_dir)) is not None:
            say(f"--start-over: moved the checkpoints of {save_dir} to {aside}")
    added = checkpoint_files.resume_arguments(rest, say, accept)
    resume_checks.check_start([*rest, *added], note=say if rank() == 0 else None)
    model_fit.install()
    return added


def pop_flag(argv: list[str], name: str) -> bool:
    """Remove every ``name`` from ``argv``; whether there was one."""
    found = name in argv
    argv[:] = [a for a in argv if a != name]
    return found


def share_cores(argv: list[str]) -> None:
    """With ``--cpu``: look up this process's share of the cores (:mod:`localnmt.core_share`)
    before each training update and each decoded batch."""
    if "--cpu" not in argv:
        return
    from localnmt.core_share import install_in_process

    share = install_in_process()
    if share is None:
        return
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.trainer import Trainer

    for cls, name in ((Trainer, "train_step"), (SequenceGenerator, "generate")):
        original = getattr(cls, name)

        def shared(*args, _original=original, **kwargs):
            share.tick()
            return _original(*args, **kwargs)

        setattr(cls, name, shared)


USAGE = (
    "usage: python -m localnmt.runs.fairseq_entry {train,generate} ... | "
    "generate-subsets SUBSET[,SUBSET...] RESULTS_DIR ..."
)


def main(argv: list[str] | None = None) -> None:
    """Dispatch to fairseq_cli.train or fairseq_cli.generate; the command ends through
    :func:`~localnmt.errors.entry_point` as ``fairseq-train`` / ``fairseq-generate`` (a
    checkpoint that does not fit: one line, exit 2; Ctrl-C: 130)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("train", "generate", "generate-subsets")
    if not argv or argv[0] not in commands or (argv[0] == "generate-subsets" and len(argv) < 3):
        entry_point("fairseq_entry")(_usage)()
    command = "generate" if argv[0] == "generate-subsets" else argv[0]
    entry_point(f"fairseq-{command}")(run)(argv[0], argv[1:])


def _usage() -> None:
    raise UsageError(USAGE)


def run(command: str, rest: list[str]) -> None:
    """One fairseq command in this process (``generate-subsets``: fairseq-generate once per
    subset)."""
    from localnmt.heap import keep_freed_memory

    keep_freed_memory()  # before the first large block (:mod:`localnmt.heap`)
    import localnmt.fairseq_plugin  # noqa: F401  (localnmt's archs, with or without --user-dir)

    allow_checkpoint_globals()
    fairseq_logging()
    share_cores(rest)
    if command == "generate-subsets":
        from fairseq_cli.generate import cli_main

        subsets, results, rest = rest[0].split(","), rest[1], rest[2:]
        for subset in subsets:
            sys.argv = ["fairseq-generate", *rest, "--gen-subset", subset,
                        "--results-path", results]  # fmt: skip
            cli_main()
        return
    if command == "train":
        from fairseq_cli.train import cli_main

        from localnmt.runs import checkpoint_files

        every, curve = pop_option(rest, "--validate-every-minutes"), pop_option(rest, "--curve")
        if every or curve:
            from localnmt.runs.timed_validation import install

            install(curve or "curve.jsonl", float(every) if every else None)
        rest += cpu_distributed_arguments(rest)
        checkpoint_files.install()
        say = (
            (lambda m: print(f"fairseq-train: {m}", file=sys.stderr, flush=True))
            if rank() == 0
            else (lambda m: None)
        )
        rest += start_checks(rest, say)  # a CheckpointError ends it: one line, exit 2
    else:
        from fairseq_cli.generate import cli_main
    sys.argv = [f"fairseq-{command}", *rest]
    cli_main()  # a checkpoint that does not fit (model_fit.install): CheckpointError


if __name__ == "__main__":
    main()
