"""Shaw et al. (2018), "Self-Attention with Relative Position Representations": Rel_Pos alone.

Relative key/value embeddings with clipping distance k = 16 in every encoder and decoder
self-attention layer, replacing the absolute position encodings (Shaw et al. report no gain
from combining both), hence ``--no-token-positional-embeddings``. Yang et al.'s Table 4
"+ Rel_Pos" rows (catalog/yang2018.py) are the authors' variant: absolute positions kept and
relative tables in cross-attention too.
"""

from localnmt.catalog import CatalogRow

REL_POS = (
    "--encoder-attn-modifiers",
    "rel_pos[clip=16]",
    "--decoder-attn-modifiers",
    "rel_pos[clip=16]",
    "--no-token-positional-embeddings",
)

ROWS = [
    CatalogRow("shaw2018", "Table 1", "Relative (k=16)", "base", "localnmt_base", REL_POS),
    CatalogRow("shaw2018", "Table 1", "Relative (k=16)", "big", "localnmt_big", REL_POS),
]
