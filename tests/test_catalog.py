"""The catalog is well formed and the README's table is generated from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from localnmt.catalog import PAPERS, all_rows
from localnmt.catalog.__main__ import readme_block, render_table
from localnmt.catalog.params import count_parameters

README = Path(__file__).resolve().parents[1] / "README.md"


def test_rows_are_unique_and_valid():
    rows = all_rows()
    assert len({r.name for r in rows}) == len(rows)
    assert {r.paper for r in rows} <= set(PAPERS)
    assert all(r.size in ("base", "big") for r in rows)


def test_json_output_has_the_documented_keys():
    out = subprocess.run(
        [sys.executable, "-m", "localnmt.catalog", "--json", "--no-params"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    items = json.loads(out.stdout)
    assert len(items) == len(all_rows())
    for item in items:
        assert {"paper", "table", "row", "size", "arch", "args"} <= set(item)
        assert isinstance(item["args"], list)


def test_baseline_parameter_counts():
    base = count_parameters("localnmt_base")
    big = count_parameters("localnmt_big")
    # 32K shared vocabulary: 44.1M body + 16.4M embeddings (base), 176.3M + 32.8M (big)
    assert 60.4e6 < base < 60.6e6
    assert 209.0e6 < big < 209.3e6


def test_readme_table_is_generated_from_the_catalog():
    rows = all_rows()
    counts = {r.name: count_parameters(r.arch, r.args) for r in rows}
    expected = render_table(rows, counts, markdown=True)
    assert readme_block(README.read_text()) == expected.strip(), (
        "README catalog table is stale: run python -m localnmt.catalog --update-readme README.md"
    )
