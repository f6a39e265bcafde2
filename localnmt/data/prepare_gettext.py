"""CLI: ``python -m localnmt.data.prepare_gettext --pair en-de --workdir DIR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localnmt.data.bpe import BPE_KINDS
from localnmt.data.command import run_data_command
from localnmt.data.fs_errors import writing_to
from localnmt.data.gettext_corpus import PAIRS, prepare_gettext_pair


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the corpus, print the data-bin path last."""
    ap = argparse.ArgumentParser(prog="python -m localnmt.data.prepare_gettext",
                                 description=__doc__)  # fmt: skip
    ap.add_argument("--pair", choices=sorted(PAIRS), required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--bpe", choices=BPE_KINDS, default="subword_nmt")
    ap.add_argument("--bpe-merges", type=int, default=8000,
                    help="subword-nmt merges, or sentencepiece vocabulary size")  # fmt: skip
    ap.add_argument("--max-train", type=int, default=None)
    ap.add_argument("--locale-root", type=Path, default=None, help="default /usr/share/locale")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--no-target-normalize", action="store_true",
                    help="no Moses punctuation normalisation of the target side")  # fmt: skip
    args = ap.parse_args(argv)

    def build() -> Path:
        with writing_to(args.workdir) as workdir:
            return prepare_gettext_pair(
                args.pair, workdir, bpe=args.bpe, bpe_merges=args.bpe_merges,
                max_train=args.max_train, locale_root=args.locale_root, workers=args.workers,
                normalize_target=not args.no_target_normalize,
                log=lambda m: print(m, flush=True),
            )  # fmt: skip

    return run_data_command(ap.prog, build)


if __name__ == "__main__":
    sys.exit(main())
