"""Yang et al. (2018), "Modeling Localness for Self-Attention Networks": every table row.

Tables 1–3 and 5 and Figure 2 are Transformer-base ablations on the WMT17 Zh⇒En *development*
set (newsdev2017; Section 4.2 and 5: "All the results are reported on Zh⇒En development set"),
so their rows are task ``wmt17_zh_en`` with ``split="valid"`` (no parameter counts printed).
Table 4 has two columns, WMT17 Zh⇒En and WMT14 En⇒De test sets, with a row per column and
model: ``paper_params`` holds the column's printed "# Para." (En⇒De 88.0M base / 264.1M big;
Zh⇒En 107.9M / 303.9M, a larger vocabulary); the deltas over the baseline are what our counts
must match (tests/test_localness_params.py). Table 1 and the Figure 2 / Figure 3 models apply
localness to all six encoder layers (Table 1's query-specific row equals Table 2 row 1);
Tables 2–5 use the main setting, the lower three encoder layers.
"""

from dataclasses import replace

from localnmt.catalog import CatalogRow

P = "yang2018"
ENC = "--encoder-attn-modifiers"
DEC = "--decoder-attn-modifiers"
CROSS = "--cross-attn-modifiers"
#: Rel_Pos as in the authors' code (THUMT ``transformer_pos``): k = 16 in encoder self-, decoder
#: self- and encoder-decoder attention, sinusoidal absolute positions kept.
REL_POS = (ENC, "rel_pos", DEC, "rel_pos", CROSS, "rel_pos")
LOCAL_REL = (ENC, "localness[layers=1-3,window=query] + rel_pos", DEC, "rel_pos", CROSS, "rel_pos")
ONE_HEAD = (
    "--encoder-attention-heads",
    "1",
    "--decoder-attention-heads",
    "1",
)

ROWS = [
    # Table 1: window strategies, encoder self-attention, all six layers.
    CatalogRow(P, "Table 1", "Baseline", "base", "localnmt_base"),
    CatalogRow(P, "Table 1", "Fixed", "base", "localnmt_base", (ENC, "localness[window=fixed]")),
    CatalogRow(
        P, "Table 1", "Layer-Spec.", "base", "localnmt_base", (ENC, "localness[window=layer]")
    ),
    CatalogRow(
        P, "Table 1", "Query-Spec.", "base", "localnmt_base", (ENC, "localness[window=query]")
    ),
    # Table 2: which encoder layers (query-specific).
    *(
        CatalogRow(
            P, "Table 2", layers, "base", "localnmt_base", (ENC, f"localness[layers={span}]")
        )
        for layers, span in (
            ("[1-6]", "1-6"),
            ("[1-1]", "1"),
            ("[1-2]", "1-2"),
            ("[1-3]", "1-3"),
            ("[1-4]", "1-4"),
            ("[4-6]", "4-6"),
        )
    ),
    # Table 3: which attention networks (layers 1-3 of each).
    CatalogRow(P, "Table 3", "Enc", "base", "yang2018_localness_base"),
    CatalogRow(
        P, "Table 3", "Enc+Dec", "base", "yang2018_localness_base", (DEC, "localness[layers=1-3]")
    ),
    CatalogRow(
        P,
        "Table 3",
        "Enc+Enc-Dec",
        "base",
        "yang2018_localness_base",
        (CROSS, "localness[layers=1-3]"),
    ),
    CatalogRow(
        P,
        "Table 3",
        "Enc+Dec+Enc-Dec",
        "base",
        "yang2018_localness_base",
        (DEC, "localness[layers=1-3]", CROSS, "localness[layers=1-3]"),
    ),
    # Table 4: main results (En⇒De parameter counts).
    CatalogRow(P, "Table 4", "Transformer-Base", "base", "localnmt_base", paper_params=88.0),
    CatalogRow(
        P,
        "Table 4",
        "+ Rel_Pos",
        "base",
        "localnmt_base",
        REL_POS,
        paper_params=88.1,
        note="Shaw et al. (2018) relative positions, k = 16, at all three sites (authors' code)",
    ),
    CatalogRow(P, "Table 4", "+ Localness", "base", "yang2018_localness_base", paper_params=88.8),
    CatalogRow(
        P,
        "Table 4",
        "+ Localness + Rel_Pos",
        "base",
        "localnmt_base",
        LOCAL_REL,
        paper_params=88.9,
    ),
    CatalogRow(P, "Table 4", "Transformer-Big", "big", "localnmt_big", paper_params=264.1),
    CatalogRow(P, "Table 4", "+ Localness", "big", "yang2018_localness_big", paper_params=267.4),
    CatalogRow(
        P,
        "Table 4",
        "+ Localness + Rel_Pos",
        "big",
        "localnmt_big",
        LOCAL_REL,
        paper_params=267.5,
    ),
    # Table 5: single head (one 512-dim head everywhere) vs eight heads.
    CatalogRow(P, "Table 5", "Base 1-Head", "base", "localnmt_base", ONE_HEAD),
    CatalogRow(P, "Table 5", "Ours 1-Head", "base", "yang2018_localness_base", ONE_HEAD),
    CatalogRow(P, "Table 5", "Base 8-Head", "base", "localnmt_base"),
    CatalogRow(P, "Table 5", "Ours 8-Head", "base", "yang2018_localness_base"),
    # Figure 2: head-specific window (eq. 11, N = 50) in every encoder layer.
    CatalogRow(
        P,
        "Figure 2",
        "Head-Spec.",
        "base",
        "localnmt_base",
        (ENC, "localness[window=head]"),
        note="analyse with python -m localnmt.analysis.localness_windows",
    ),
]

#: Tables and figures the paper reports on the Zh⇒En development set (names kept as they were).
DEV_TABLES = ("Table 1", "Table 2", "Table 3", "Table 5", "Figure 2")
ROWS = [replace(r, task="wmt17_zh_en", split="valid") if r.table in DEV_TABLES else r for r in ROWS]

#: Table 4, WMT17 Zh⇒En column: "# Para." as printed, by (row, size).
ZH_EN_PARAMS = {
    ("Transformer-Base", "base"): 107.9,
    ("+ Rel_Pos", "base"): 108.0,
    ("+ Localness", "base"): 108.7,
    ("+ Localness + Rel_Pos", "base"): 108.8,
    ("Transformer-Big", "big"): 303.9,
    ("+ Localness", "big"): 307.2,
    ("+ Localness + Rel_Pos", "big"): 307.3,
}
_ZH_EN = [
    replace(r, task="wmt17_zh_en", name="", paper_params=ZH_EN_PARAMS[(r.row, r.size)])
    for r in ROWS
    if r.table == "Table 4"
]
_AFTER = max(i for i, r in enumerate(ROWS) if r.table == "Table 4") + 1
ROWS = ROWS[:_AFTER] + _ZH_EN + ROWS[_AFTER:]  # the Zh⇒En column next to the En⇒De one
