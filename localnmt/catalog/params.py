"""Parameter counts of catalog rows, without allocating the model (meta device)."""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

import torch

#: Joined BPE vocabulary used for counts (the papers' 32K merges give ~32K-37K symbols).
COUNT_VOCAB = 32000


def _dictionary(size: int):
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(size - len(d)):
        d.add_symbol(f"w{i}")
    return d


@cache
def count_parameters(arch: str, args: tuple[str, ...] = (), vocab: int = COUNT_VOCAB) -> int:
    """Trainable parameters (shared tensors counted once) of ``--arch arch args`` with a
    joined vocabulary of ``vocab`` symbols and shared embeddings."""
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY

    import localnmt  # noqa: F401  (registers archs)

    parser = options.get_training_parser()
    argv = ["/nonexistent", "--arch", arch, "--share-all-embeddings", *args]
    ns = options.parse_args_and_arch(parser, argv)
    dictionary = _dictionary(vocab)
    task = SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)
    with torch.device("meta"):
        model = ARCH_MODEL_REGISTRY[arch].build_model(ns, task)
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen and p.requires_grad:
            seen.add(id(p))
            total += p.numel()
    return total
