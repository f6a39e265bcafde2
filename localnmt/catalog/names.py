"""Names of catalog rows that a reader of a report understands: what the system is (its
methods), then where it comes from (``GMM cross-attention (Zhang & Feng 2021, Table 2: Our
Method)``), where the paper's own row label alone (``Our Method``) says nothing."""

from __future__ import annotations

from localnmt.attention.attention_specs import SITES, AttentionSpecs
from localnmt.catalog import CatalogRow

#: Each method's name in prose (docs/design.md names the same).
METHOD_NAMES = {
    "localness": "Localness",
    "rel_pos": "relative positions",
    "gmm": "GMM cross-attention",
    "hardcoded_gaussian": "hard-coded Gaussian cross-attention",
    "csan_1d": "1D-CSAN",
    "csan_2d": "2D-CSAN",
    "bi_direct": "BI_DIRECT masking",
    "neighbor": "NEIGHBOR",
    "local_hard": "LOCAL_HARD",
    "block": "BLOCK",
    "local_heads": "local heads",
    "local_heads_renorm": "local heads (renormalised)",
    "tied_qk": "tied Wq/Wk",
}
#: Model flags that are methods too (not attention specs), and architectures named for them.
FLAG_NAMES = {"--encoder-tie-attn": "attention tied across layers", "--encoder-cnn": "CNN layers"}
ARCH_NAMES = {"_cnns_": "CNN layers"}
#: The papers as a reader cites them.
CITATIONS = {
    "vaswani2017": "Vaswani et al. 2017",
    "shaw2018": "Shaw et al. 2018",
    "yang2018": "Yang et al. 2018",
    "yang2019": "Yang et al. 2019",
    "zhang2021": "Zhang & Feng 2021",
    "pande2021": "Pande et al.",
}


def methods_of(row: CatalogRow) -> list[str]:
    """The prose names of the row's methods, in model order, each once."""
    specs = row.attention.over(_preset(row.arch))
    names = [METHOD_NAMES.get(m, m) for kind in SITES for m in specs.site(kind).methods]
    names += [name for prefix, name in FLAG_NAMES.items()
              if any(arg.startswith(prefix) for arg in row.model_args)]  # fmt: skip
    names += [name for part, name in ARCH_NAMES.items() if part in f"_{row.arch}_"]
    return list(dict.fromkeys(names))


def system_name(row: CatalogRow) -> str:
    """``<methods> (<paper>, <table>: <row>)``; ``Transformer baseline (...)`` without any."""
    what = " + ".join(methods_of(row)) or "Transformer baseline"
    return f"{what} ({CITATIONS.get(row.paper, row.paper)}, {row.table}: {row.row})"


def _preset(arch: str) -> AttentionSpecs:
    """The specs ``arch`` sets (none where fairseq, which holds the presets, is missing)."""
    try:
        from localnmt.fairseq_plugin.architectures import preset_specs
    except ImportError:
        return AttentionSpecs()
    return preset_specs(arch)
