"""Baselines: Transformer-base and -big (Vaswani et al. 2017), fairseq's presets."""

from localnmt.catalog import CatalogRow

ROWS = [
    CatalogRow("vaswani2017", "Table 3", "Transformer (base)", "base", "localnmt_base"),
    CatalogRow("vaswani2017", "Table 3", "Transformer (big)", "big", "localnmt_big"),
]
