"""Checks on what is scored: the same number of lines everywhere, and not none at all."""

from __future__ import annotations

from collections.abc import Sequence

from localnmt.errors import DataError


class ScoringInputError(DataError, ValueError):
    """Hypotheses, references or sources that cannot be scored together (a
    :class:`~localnmt.errors.DataError`, and a ``ValueError`` as before)."""


def require_parallel(hyps: Sequence, refs: Sequence, *, system: str | None = None) -> None:
    """``hyps`` and ``refs`` have the same, non-zero number of lines (``system``: whose
    hypotheses, for the message)."""
    whose = f"{system}: " if system else ""
    if len(hyps) != len(refs):
        raise ScoringInputError(f"{whose}{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise ScoringInputError(f"{whose}no hypotheses and no references: nothing to score")
