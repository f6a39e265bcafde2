"""Run fairseq's train/generate CLIs in-process with the torch>=2.6 checkpoint-loading fix.

``python -m localnmt.runs.fairseq_entry {train,generate} ARGS...`` behaves like
``fairseq-train ARGS`` / ``fairseq-generate ARGS`` but allow-lists ``argparse.Namespace`` for
``torch.load(weights_only=True)`` first, so checkpoints load (and runs resume) even with a
plain fairseq ``--arch`` and no ``--user-dir``. Never imports torchaudio.

``python -m localnmt.runs.fairseq_entry generate-subsets test,test1 DIR ARGS...`` runs
fairseq-generate once per subset in one process (one start-up for several test sets, e.g.
NIST MT03–MT08), writing ``DIR/generate-<subset>.txt`` each (fairseq's ``--results-path``).

``train`` also takes ``--validate-every-minutes M --curve FILE`` (not fairseq options): validate
and save every M minutes of training time and append each validation to FILE
(:mod:`localnmt.runs.timed_validation`). Ctrl-C ends a run with exit status 130 and no traceback;
the last saved checkpoint is where the next run resumes.
"""

from __future__ import annotations

import sys


def allow_namespace_checkpoints() -> None:
    """Let ``torch.load`` (weights_only) unpickle argparse-trained fairseq checkpoints (a
    no-op before torch 2.4, whose ``torch.load`` needs no allow-list)."""
    from localnmt import torch_compat

    torch_compat.allow_namespace_checkpoints()


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


def main(argv: list[str] | None = None) -> None:
    """Dispatch to fairseq_cli.train or fairseq_cli.generate."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("train", "generate", "generate-subsets")
    if not argv or argv[0] not in commands or (argv[0] == "generate-subsets" and len(argv) < 3):
        raise SystemExit(
            "usage: python -m localnmt.runs.fairseq_entry {train,generate} ... | "
            "generate-subsets SUBSET[,SUBSET...] RESULTS_DIR ..."
        )
    command, rest = argv[0], argv[1:]
    allow_namespace_checkpoints()
    fairseq_logging()
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

        every, curve = pop_option(rest, "--validate-every-minutes"), pop_option(rest, "--curve")
        if every:
            from localnmt.runs.timed_validation import install

            install(float(every), curve or "curve.jsonl")
    else:
        from fairseq_cli.generate import cli_main
    sys.argv = [f"fairseq-{command}", *rest]
    try:
        cli_main()
    except KeyboardInterrupt:
        print(f"fairseq-{command}: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
