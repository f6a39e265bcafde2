"""Parameter deltas over the baseline vs Yang et al. (2018) Table 4 (En⇒De column).

The paper prints totals rounded to 0.1M, so the true delta lies within ±0.1M of the difference
of the printed totals; the exact formula is checked too. Rel_Pos follows the authors' code (tables
in the 18 self- and cross-attention layers): with self-attention only (Shaw et al.), big
"+ Localness + Rel_Pos" would be +3.298M, just outside the printed (3.3, 3.5)M.
"""

import pytest

from localnmt.catalog import all_rows
from localnmt.catalog.params import count_parameters


def _row(table: str, row: str, size: str):
    return next(
        r
        for r in all_rows()
        if r.paper == "yang2018" and r.table == table and r.row == row and r.size == size
    )


@pytest.mark.parametrize(
    "row,size",
    [("+ Rel_Pos", "base"), ("+ Localness", "base"), ("+ Localness + Rel_Pos", "base"),
     ("+ Localness", "big"), ("+ Localness + Rel_Pos", "big")],
)  # fmt: skip
def test_table4_deltas_match_paper(row, size):
    base = _row("Table 4", "Transformer-Base" if size == "base" else "Transformer-Big", size)
    this = _row("Table 4", row, size)
    ours = (count_parameters(this.arch, this.args) - count_parameters(base.arch, base.args)) / 1e6
    paper = this.paper_params - base.paper_params
    assert abs(ours - paper) < 0.1, (row, size, ours, paper)


def test_exact_counts():
    base = count_parameters("localnmt_base")
    big = count_parameters("localnmt_big")
    # per layer: W_p (d×d + d), U_p and U_d (d×H + H each); three encoder layers
    assert count_parameters("yang2018_localness_base") - base == 3 * (512 * 513 + 2 * 8 * 513)
    assert count_parameters("yang2018_localness_big") - big == 3 * (1024 * 1025 + 2 * 16 * 1025)
    # rel_pos: w^K and w^V, (2·16+1) × 64 each, per layer and site
    rel = ("--encoder-attn-modifiers", "rel_pos", "--decoder-attn-modifiers", "rel_pos")
    assert count_parameters("localnmt_base", rel) - base == 12 * 2 * 33 * 64
    row = _row("Table 4", "+ Rel_Pos", "base")
    assert count_parameters(row.arch, row.args) - base == 18 * 2 * 33 * 64
