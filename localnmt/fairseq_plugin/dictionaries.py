"""A stand-in fairseq ``Dictionary`` for building a model without its data."""

from __future__ import annotations

from typing import Any


def placeholder_dictionary(size: int) -> Any:
    """A fairseq ``Dictionary`` of ``size`` symbols (fairseq's four specials, then ``w0``,
    ``w1`` …): enough to build a model whose embeddings have ``size`` rows."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for i in range(size - len(dictionary)):
        dictionary.add_symbol(f"w{i}")
    return dictionary
