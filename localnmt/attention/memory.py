"""What the attention options of a model imply in memory, before any module is built.

Some options make a training step's memory grow without bound: GMM cross-attention keeps its
mixture's densities per component, head and (sentence, query, key) triple, so ``gmm[k=100000]``
needs tens of GB for a batch that plain attention handles in MBs; a predictor's ``hidden``
size is weights, gradients and optimizer state. Each method says what its options cost
(:meth:`~localnmt.attention.modifier.AttentionModifier.memory_bytes`); this module adds them
up over the layers a spec applies to (training keeps every layer's tensors for the backward
pass) and names the largest, so that a launcher can refuse a configuration that cannot fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from localnmt.attention.context import AttentionSite
from localnmt.attention.spec import ModifierSpec


@dataclass(frozen=True)
class MethodMemory:
    """What one spec item costs at one site kind, over all the layers it applies to."""

    kind: str
    method: str
    text: str  # the item as written, e.g. "gmm[k=100000]"
    nbytes: int


def item_text(spec: ModifierSpec) -> str:
    """``method[key=value,...]`` of a parsed item (its size options as written)."""
    options = ",".join(f"{k}={v}" for k, v in spec.options.items())
    return f"{spec.method}[{options}]" if options else spec.method


def method_memory(
    specs: dict[str, list[ModifierSpec]], sites: dict[str, list[AttentionSite]], pairs: int
) -> list[MethodMemory]:
    """Each spec item's training memory beyond plain attention, largest first: ``specs`` and
    ``sites`` (every layer's) by site kind, ``pairs`` the most (sentence, query, key) triples
    one batch holds (:func:`batch_pairs`)."""
    found = []
    for kind, items in specs.items():
        for spec in items:
            total = sum(
                spec.modifier.memory_bytes(spec.values, site, pairs)
                for site in sites.get(kind, [])
                if spec.applies_to(site.layer)
            )
            if total:
                found.append(MethodMemory(kind, spec.method, item_text(spec), total))
    return sorted(found, key=lambda m: -m.nbytes)


def batch_pairs(max_tokens: int, longest: int) -> int:
    """The most (sentence, query, key) triples of one batch: fairseq's batches hold at most
    ``max_tokens`` tokens counting each sentence at its longer side, so sentences × query
    length <= ``max_tokens``, and no key row is longer than ``longest``."""
    return max_tokens * min(longest, max_tokens)


def gigabytes(nbytes: float) -> str:
    """``23.4 GB`` (decimal)."""
    return f"{nbytes / 1e9:.1f} GB"
