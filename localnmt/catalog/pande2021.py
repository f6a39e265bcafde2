"""Pande et al. 2021, On the Importance of Local Information in Transformer Based Models.

Tables 1–3 (Transformer-base, local and tied encoder heads) have two columns, EN-RU and EN-DE:
WMT'14 English-Russian and English-German evaluated on newstest2014 (Section 5.1), one row per
column and model. EN-RU trains with 25K tokens per update, EN-DE with 32K (task
``wmt14_en_ru`` carries the 25K). Tables 2 and 3 print the baseline (a) again; it is a row of
each table so that a table reproduces with its own Δ. Table 4 (GLUE dev accuracy of QQP,
SST-2, MNLI, QNLI; task ``glue``) fine-tunes the BERT-base archs of
``localnmt.models.roberta_local``: the first row, plain BERT-base, is the reference.

The paper's "Attn params" column (Tables 2, 3) counts the encoder self-attention weight
matrices (no biases), in millions, truncated to two decimals: :func:`encoder_attention_params`
reproduces it (tests/test_pande_catalog.py checks every row).
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

import torch

from localnmt.catalog import CatalogRow

PAPER = "pande2021"

#: row label → (table, arch, paper's encoder attention parameters in millions or None)
_ROWS = [
    ("Table 1", "Baseline (a)", "localnmt_base", 6.29),
    ("Table 1", "2LocHeads All6 (b)", "pande2021_2lochead_all6", None),
    ("Table 1", "4LocHeads All6 (c)", "pande2021_4lochead_all6", None),
    ("Table 1", "8LocHeads First3 (d)", "pande2021_8lochead_first3", None),
    ("Table 1", "8LocHeads Last3 (e)", "pande2021_8lochead_last3", None),
    ("Table 1", "8LocHeads All6 (f)", "pande2021_8lochead_all6", None),
    ("Table 2", "Baseline (a)", "localnmt_base", 6.29),
    ("Table 2", "4LocHeads 4TiedLoc All6 (g)", "pande2021_4lochead_4tiedloc_all6", 4.71),
    ("Table 2", "2LocHeads 6TiedLoc All6 (h)", "pande2021_2lochead_6tiedloc_all6", 3.93),
    ("Table 2", "1LocHead 7TiedLoc All6 (i)", "pande2021_1lochead_7tiedloc_all6", 3.53),
    ("Table 2", "1LocHead 7TiedLoc First3 (j)", "pande2021_1lochead_7tiedloc_first3", 4.91),
    ("Table 3", "Baseline (a)", "localnmt_base", 6.29),
    ("Table 3", "Half Tied (k)", "pande2021_half_tied", 4.78),
    ("Table 3", "Fully Tied (l)", "pande2021_fully_tied", 3.21),
]

#: Paper's encoder self-attention parameter count (millions) per arch, where it prints one.
PAPER_ATTN_PARAMS = {arch: params for _, _, arch, params in _ROWS if params is not None}


def _note(params: float | None) -> str:
    base = (
        "local/tied heads in the encoder only; decoder is Transformer-base; paper sizes train "
        "with Section 5.1's Adam β2 0.997, ε 1e-9, 16k warm-up (train_args)"
    )
    if params is None:
        return base
    return f"{base}; paper encoder self-attention params {params:.2f}M (weights, no biases)"


#: Section 5.1: Adam β = (0.9, 0.997), ε = 1e-9, Vaswani et al.'s schedule with 16k warm-up
#: steps, whose peak is 512^-0.5 · 16000^-0.5 = 3.49e-4 (fairseq's inverse_sqrt takes the peak)
TRAIN_ARGS = (
    "--adam-betas", "(0.9,0.997)", "--adam-eps", "1e-09", "--warmup-updates", "16000",
    "--lr", "0.000349",
)  # fmt: skip

ROWS = [
    CatalogRow(
        PAPER, table, row, "base", arch, note=_note(params), task=task, train_args=TRAIN_ARGS
    )
    for table in ("Table 1", "Table 2", "Table 3")
    for task in ("wmt14_en_de", "wmt14_en_ru")
    for t, row, arch, params in _ROWS
    if t == table
]

#: Table 4: BERT-base (reference) and the five local-attention BERT configurations.
GLUE_ROWS = [
    ("BERT-base", "localnmt_roberta_base", "reference: BERT-base without local attention"),
    ("All Band2 Untied", "pande2021_bert_band2_untied", "band2 on all 144 heads"),
    ("All Band6 Untied", "pande2021_bert_band6_untied", "band6 on all 144 heads"),
    ("All Band6 AllTied", "pande2021_bert_band6_alltied",
     "band6; one Wq/Wk shared by all heads of all 12 layers"),
    ("All Band6 132Tied", "pande2021_bert_band6_132tied",
     "band6; Wq/Wk shared by the 132 heads of layers 1-11"),
    ("All Band6 120Tied", "pande2021_bert_band6_120tied",
     "band6; Wq/Wk shared by the 120 heads of layers 1-10"),
]  # fmt: skip
ROWS += [
    CatalogRow(PAPER, "Table 4", row, "base", arch, note=note, task="glue", split="valid")
    for row, arch, note in GLUE_ROWS
]


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

    import localnmt  # noqa: F401  (registers archs)

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
    for _table, _row, _arch, _params in _ROWS:
        n = encoder_attention_params(_arch)
        paper = "" if _params is None else f"{_params:.2f}M"
        print(f"{_table}  {_row:32s} {n:>10,d}  {paper_rounding(n):.2f}M  paper {paper}")
