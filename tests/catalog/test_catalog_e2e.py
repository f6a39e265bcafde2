"""Every catalog row trains, saves, reloads, beam-searches and scores, at tiny width.

Rows keep their architecture's layer and head counts (specs name layers and heads) with
embedding and FFN dims shrunk to 64. Rows with the same arch and args run once (the columns
of a multi-language table share their configurations). GLUE rows (Pande et al. Table 4, BERT
encoders) are not translation models: tests/data/test_glue.py and the reproduce tests run them.
"""

from __future__ import annotations

import math

import pytest

from localnmt import testing
from localnmt.catalog import all_rows
from localnmt.catalog.tasks import TASKS

SHRINK = [
    "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
]  # fmt: skip
UPDATES = 12


def _unique_rows():
    seen: dict[tuple, str] = {}
    for row in all_rows():
        if not TASKS[row.task].is_translation:
            continue
        key = (row.arch, row.args)
        if key not in seen:
            seen[key] = row.name
    return sorted(seen.items(), key=lambda item: item[1])


ROWS = _unique_rows()


def test_catalog_has_baselines():
    names = {row.name for row in all_rows()}
    assert "vaswani2017/table-3/transformer-base/base" in names
    assert "vaswani2017/table-3/transformer-big/big" in names


@pytest.mark.parametrize("key", [k for k, _ in ROWS], ids=[n for _, n in ROWS])
def test_row_trains_and_translates(key, tiny_data, tmp_path):
    arch, args = key
    result = testing.train(
        tiny_data, tmp_path / "ckpt", arch, list(args), max_update=UPDATES, dims=SHRINK
    )
    losses = result.losses
    assert len(losses) >= UPDATES - 1, "training stopped early"
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3, f"loss did not fall: {losses}"
    # bounded output length: a barely trained model would otherwise run to fairseq's 200 tokens
    gen = testing.generate(
        tiny_data, result.checkpoint, beam=4, extra=["--max-len-a", "1.2", "--max-len-b", "4"]
    )
    assert len(gen.hypotheses) == len(gen.references) > 0
    assert any(h.strip() for h in gen.hypotheses)
    assert all(tok.startswith("t") for h in gen.hypotheses for tok in h.split())
    assert 0.0 <= gen.bleu <= 100.0
