"""Offline quickstart: a corpus → the baseline and locality methods, each trained for an equal
share of a wall-clock budget → beam search → SacreBLEU with bootstrap intervals → a report.

    python -m localnmt.quickstart [--workdir runs/quickstart] [--budget-minutes N] [--data BIN]

Without ``--data`` the English→German corpus is built from the gettext catalogs on this
machine. Model sizes, vocabulary, batch and systems follow the device
(:mod:`localnmt.quickstart.sizing`). Every step (corpus, each training, each translation) is
resumable and fingerprinted: an unchanged rerun reuses finished work, a changed option redoes
what depends on it, Ctrl-C keeps the last checkpoints. Writes ``report.json``, ``report.md``
and ``report.png`` in the workdir.
"""

from localnmt.quickstart.cli import main

__all__ = ["main"]
