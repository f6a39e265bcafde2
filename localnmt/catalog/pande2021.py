"""Pande et al. 2021, On the Importance of Local Information in Transformer Based Models:
Tables 1–3 (Transformer-base, local and tied encoder heads). Table 4 (BERT) lives in
``localnmt.models.roberta_local`` as archs: it is not a translation row.

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
    ("Table 2", "4LocHeads 4TiedLoc All6 (g)", "pande2021_4lochead_4tiedloc_all6", 4.71),
    ("Table 2", "2LocHeads 6TiedLoc All6 (h)", "pande2021_2lochead_6tiedloc_all6", 3.93),
    ("Table 2", "1LocHead 7TiedLoc All6 (i)", "pande2021_1lochead_7tiedloc_all6", 3.53),
    ("Table 2", "1LocHead 7TiedLoc First3 (j)", "pande2021_1lochead_7tiedloc_first3", 4.91),
    ("Table 3", "Half Tied (k)", "pande2021_half_tied", 4.78),
    ("Table 3", "Fully Tied (l)", "pande2021_fully_tied", 3.21),
]

#: Paper's encoder self-attention parameter count (millions) per arch, where it prints one.
PAPER_ATTN_PARAMS = {arch: params for _, _, arch, params in _ROWS if params is not None}


def _note(params: float | None) -> str:
    base = "local/tied heads in the encoder only; decoder is Transformer-base"
    if params is None:
        return base
    return f"{base}; paper encoder self-attention params {params:.2f}M (weights, no biases)"


ROWS = [
    CatalogRow(PAPER, table, row, "base", arch, note=_note(params))
    for table, row, arch, params in _ROWS
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
