"""Pande et al. 2021 catalog rows: encoder attention parameters equal the paper's column."""

from __future__ import annotations

import pytest

from localnmt.catalog import all_rows
from localnmt.catalog.pande2021 import (
    PAPER_ATTN_PARAMS,
    encoder_attention_params,
    paper_rounding,
)

ROWS = [r for r in all_rows() if r.paper == "pande2021"]


def test_every_table_row_is_there():
    for task in ("wmt14_en_de", "wmt14_en_ru"):  # the EN-DE and EN-RU columns
        tables = [r.table for r in ROWS if r.task == task]
        assert tables.count("Table 1") == 6
        assert tables.count("Table 2") == 5  # the baseline (a) is printed in Tables 1-3
        assert tables.count("Table 3") == 3
    glue = [r for r in ROWS if r.task == "glue"]
    assert [r.table for r in glue] == ["Table 4"] * 6
    assert glue[0].arch == "localnmt_roberta_base" and glue[0].row == "BERT-base"
    assert {r.arch for r in glue[1:]} == {
        f"pande2021_bert_{c}"
        for c in ("band2_untied", "band6_untied", "band6_alltied", "band6_132tied", "band6_120tied")
    }


@pytest.mark.parametrize("arch", sorted(PAPER_ATTN_PARAMS))
def test_encoder_attention_params_match_paper(arch):
    count = encoder_attention_params(arch)
    assert paper_rounding(count) == PAPER_ATTN_PARAMS[arch]
    row = next(r for r in ROWS if r.arch == arch)
    assert f"{PAPER_ATTN_PARAMS[arch]:.2f}M" in row.note


def test_exact_counts_by_hand():
    base = 6 * 4 * 512 * 512  # Wq, Wk, Wv, Wo per layer, no biases
    head_qk = 2 * 512 * 64  # one head-sized Wq, Wk
    assert encoder_attention_params("localnmt_base") == base
    assert encoder_attention_params("pande2021_1lochead_7tiedloc_all6") == 6 * (
        head_qk + 2 * 512 * 512
    )
    assert encoder_attention_params("pande2021_fully_tied") == head_qk + 6 * 2 * 512 * 512
    # Table 1 masks add no parameters
    assert encoder_attention_params("pande2021_8lochead_all6") == base
