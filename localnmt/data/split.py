"""Deterministic hash-based train/valid/test split."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

Pair = tuple[str, str]


def pair_key(src: str, seed: str) -> str:
    """Sort key of a pair: sha256 of the seed and the source sentence."""
    return hashlib.sha256(f"{seed}\t{src}".encode()).hexdigest()


def hash_split(
    pairs: Sequence[Pair], *, n_valid: int, n_test: int, seed: str
) -> dict[str, list[Pair]]:
    """Order pairs by hash of their source; the first ``n_test`` are test, the next valid.

    Independent of input order; train keeps the (pseudo-random) hash order. If the corpus
    is small, valid and test shrink to at most a tenth of it each.
    """
    ordered = sorted(pairs, key=lambda p: (pair_key(p[0], seed), p))
    cap = max(1, len(ordered) // 10)
    n_test, n_valid = min(n_test, cap), min(n_valid, cap)
    return {
        "test": ordered[:n_test],
        "valid": ordered[n_test : n_test + n_valid],
        "train": ordered[n_test + n_valid :],
    }
