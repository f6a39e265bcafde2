"""Run fairseq's train/generate CLIs in-process with the torch>=2.6 checkpoint-loading fix.

``python -m localnmt.evaluation.fairseq_entry {train,generate} ARGS...`` behaves like
``fairseq-train ARGS`` / ``fairseq-generate ARGS`` but allow-lists ``argparse.Namespace`` for
``torch.load(weights_only=True)`` first, so checkpoints load (and runs resume) even with a
plain fairseq ``--arch`` and no ``--user-dir``. Never imports torchaudio.
"""

from __future__ import annotations

import argparse
import sys


def allow_namespace_checkpoints() -> None:
    """Let ``torch.load`` (weights_only) unpickle argparse-trained fairseq checkpoints."""
    import torch

    torch.serialization.add_safe_globals([argparse.Namespace])


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


def main(argv: list[str] | None = None) -> None:
    """Dispatch to fairseq_cli.train or fairseq_cli.generate."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "generate"):
        raise SystemExit("usage: python -m localnmt.evaluation.fairseq_entry {train,generate} ...")
    command, rest = argv[0], argv[1:]
    allow_namespace_checkpoints()
    fairseq_logging()
    sys.argv = [f"fairseq-{command}", *rest]
    if command == "train":
        from fairseq_cli.train import cli_main
    else:
        from fairseq_cli.generate import cli_main
    cli_main()


if __name__ == "__main__":
    main()
