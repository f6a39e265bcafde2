"""Parameter counts of catalog rows, without allocating the model (meta device).

Translation archs: ``--share-all-embeddings`` with a joined 32K vocabulary. Encoder-only archs
(``localnmt_roberta`` / ``pande2021_bert_*``, Pande et al. Table 4): the masked-LM model
(encoder, LM head tied to the embeddings, no classification head) with the same vocabulary.
"""

from __future__ import annotations

import contextlib
from functools import cache
from types import SimpleNamespace

import torch

#: Joined BPE vocabulary used for counts (the papers' 32K merges give ~32K-37K symbols).
COUNT_VOCAB = 32000


@cache
def count_parameters(arch: str, args: tuple[str, ...] = (), vocab: int = COUNT_VOCAB) -> int:
    """Trainable parameters (shared tensors counted once) of ``--arch arch args`` with a
    joined vocabulary of ``vocab`` symbols and shared embeddings."""
    from fairseq import options
    from fairseq.models import ARCH_MODEL_REGISTRY, FairseqEncoderModel

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)
    from localnmt.fairseq_plugin.dictionaries import placeholder_dictionary

    model_cls = ARCH_MODEL_REGISTRY[arch]
    encoder_only = issubclass(model_cls, FairseqEncoderModel)
    parser = options.get_training_parser()
    share = [] if encoder_only else ["--share-all-embeddings"]
    ns = options.parse_args_and_arch(parser, ["/nonexistent", "--arch", arch, *share, *args])
    dictionary = placeholder_dictionary(vocab)
    task = SimpleNamespace(
        source_dictionary=dictionary, target_dictionary=dictionary, max_positions=lambda: 512
    )
    with torch.device("meta"), _no_bert_init():
        model = model_cls.build_model(ns, task)
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen and p.requires_grad:
            seen.add(id(p))
            total += p.numel()
    return total


@contextlib.contextmanager
def _no_bert_init():
    """Skip RoBERTa's ``init_bert_params`` (it copies weights through the CPU, which meta
    tensors cannot do); initialisation does not change the count."""
    import fairseq.models.roberta.model as roberta_model

    import localnmt.fairseq_plugin.roberta_local as roberta_local

    def noop(module) -> None:
        return None

    saved = roberta_model.init_bert_params, roberta_local.init_bert_params
    roberta_model.init_bert_params = roberta_local.init_bert_params = noop
    try:
        yield
    finally:
        roberta_model.init_bert_params, roberta_local.init_bert_params = saved
