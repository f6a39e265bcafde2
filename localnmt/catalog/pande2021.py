"""Pande et al. 2021, On the Importance of Local Information in Transformer Based Models.

Tables 1–3 (Transformer-base, local and tied encoder heads) have two columns, EN-RU and EN-DE:
WMT'14 English-Russian and English-German evaluated on newstest2014 (Section 5.1), one row per
column and model. EN-RU trains with 25K tokens per update, EN-DE with 32K (task
``wmt14_en_ru`` carries the 25K). Tables 2 and 3 print the baseline (a) again; it is a row of
each table so that a table reproduces with its own Δ. Table 4 (GLUE dev accuracy of QQP,
SST-2, MNLI, QNLI; task ``glue``) fine-tunes the BERT-base archs of
``localnmt.fairseq_plugin.roberta_local``: the first row, plain BERT-base, is the reference.

The rows are data, in ``configs/pande2021.yaml``; this module keeps the code: the paper's
"Attn params" column (Tables 2, 3) counts the encoder self-attention weight matrices (no
biases), in millions, truncated to two decimals, and :func:`encoder_attention_params`
reproduces it (tests/catalog/test_pande_catalog.py checks every row).
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

import torch

from localnmt.catalog import paper_rows
from localnmt.catalog.files import paper_data

PAPER = "pande2021"

#: The rows of configs/pande2021.yaml.
ROWS = paper_rows(PAPER)

#: Paper's encoder self-attention parameter count (millions) per arch, where it prints one
#: (configs/pande2021.yaml, ``extra.encoder_attention_params``).
PAPER_ATTN_PARAMS: dict[str, float] = dict(
    paper_data(PAPER)["extra"].get("encoder_attention_params", {})
)

#: Section 5.1's optimiser flags, the ``train_args`` of the translation rows (Tables 1-3).
TRAIN_ARGS: tuple[str, ...] = next(r.train_args for r in ROWS if r.train_args)


@cache
def encoder_attention_params(
    arch: str, args: tuple[str, ...] = (), with_bias: bool = False, vocab: int = 1000
) -> int:
    """Encoder self-attention parameters of ``--arch arch args`` (shared tensors once; the
    paper's Tables 2–3 column counts weights only: ``with_bias=False``). Built on the meta
    device, so no memory is allocated."""
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_REGISTRY

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(parser, ["/nonexistent", "--arch", arch, *args])
    dictionary = Dictionary()
    for i in range(vocab):
        dictionary.add_symbol(f"w{i}")
    task = SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary)
    with torch.device("meta"):
        model = ARCH_MODEL_REGISTRY[arch].build_model(ns, task)
    seen: set[int] = set()
    total = 0
    for layer in model.encoder.layers:
        for name, p in layer.self_attn.named_parameters():
            if id(p) in seen or (not with_bias and name.endswith("bias")):
                continue
            seen.add(id(p))
            total += p.numel()
    return total


def paper_rounding(count: int) -> float:
    """The paper's display: millions truncated to two decimals (6,291,456 → 6.29)."""
    return int(count / 1e4) / 100


if __name__ == "__main__":
    for _row in ROWS:
        if _row.task != "wmt14_en_de":
            continue
        n = encoder_attention_params(_row.arch)
        _params = PAPER_ATTN_PARAMS.get(_row.arch)
        paper = "" if _params is None else f"{_params:.2f}M"
        print(f"{_row.table}  {_row.row:32s} {n:>10,d}  {paper_rounding(n):.2f}M  paper {paper}")
