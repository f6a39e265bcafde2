"""Shaw et al. (2018), "Self-Attention with Relative Position Representations": Rel_Pos alone.

Relative key/value embeddings with clipping distance k = 16 in every encoder and decoder
self-attention layer. fairseq's sinusoidal absolute positions are kept (as in Yang et al.
2018's Table 4 re-implementation); add ``--no-token-positional-embeddings`` for the
relative-only variant of Shaw et al.'s ablation.
"""

from localnmt.catalog import CatalogRow

REL_POS = (
    "--encoder-attn-modifiers",
    "rel_pos[clip=16]",
    "--decoder-attn-modifiers",
    "rel_pos[clip=16]",
)

ROWS = [
    CatalogRow("shaw2018", "Table 1", "Relative (k=16)", "base", "localnmt_base", REL_POS),
    CatalogRow("shaw2018", "Table 1", "Relative (k=16)", "big", "localnmt_big", REL_POS),
]
