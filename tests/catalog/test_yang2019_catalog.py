"""Yang et al. 2019 catalog: parameter deltas vs Table 1, and tiny train → generate runs."""

from __future__ import annotations

import pytest

from localnmt import testing
from localnmt.catalog import all_rows
from localnmt.catalog.params import count_parameters

ROWS = [r for r in all_rows() if r.paper == "yang2019"]
BASE = count_parameters("localnmt_base")
#: Our deltas (M) where they differ from the paper's; each row's note says why.
OURS = {"+ REL_POS": 0.013, "+ BLOCK": 4.73, "+ CNNs": 22.04}
SMALL = ["--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
         "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64"]  # fmt: skip


@pytest.mark.parametrize("row", [r for r in ROWS if r.table == "Table 1"], ids=lambda r: r.row)
def test_parameter_deltas(row):
    delta = (count_parameters(row.arch, row.args) - BASE) / 1e6
    printed = round(row.paper_params - 88.0, 1)
    if row.row in OURS:
        assert delta == pytest.approx(OURS[row.row], abs=0.01)
        assert row.note
    else:
        assert delta == pytest.approx(printed, abs=0.02)


def test_csans_parameter_free_big():
    assert count_parameters("yang2019_csan2d_big") == count_parameters("localnmt_big")


@pytest.mark.parametrize(
    "arch", ["yang2019_csan2d_base", "yang2019_cnns_base", "yang2019_block_base",
             "yang2019_local_hard_base"],
)  # fmt: skip
def test_train_generate(tiny_data, tmp_path, arch):
    """Arch layer/head counts (6 layers, 8 heads), dims 64: trains, reloads, beam-searches."""
    dims = [a for a in SMALL]
    extra = [*dims, "--encoder-layers", "6", "--decoder-layers", "6",
             "--encoder-attention-heads", "8", "--decoder-attention-heads", "8"]  # fmt: skip
    result = testing.train(tiny_data, tmp_path, arch, extra, max_update=4)
    assert result.losses and all(loss == loss for loss in result.losses)
    gen = testing.generate(tiny_data, result.checkpoint, beam=2)
    assert len(gen.hypotheses) == len(gen.references)
