"""The catalog is well formed and docs/catalog.md's table is generated from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from localnmt.catalog import PAPERS, all_rows
from localnmt.catalog.__main__ import main as catalog_main
from localnmt.catalog.__main__ import readme_block, render_table
from localnmt.catalog.params import count_parameters
from localnmt.catalog.tasks import TASKS

CATALOG_PAGE = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"


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


def test_catalog_page_is_generated_from_the_catalog():
    rows = all_rows()
    counts = {r.name: count_parameters(r.arch, r.args) for r in rows}
    expected = render_table(rows, counts, markdown=True)
    assert readme_block(CATALOG_PAGE.read_text()) == expected.strip(), (
        "docs/catalog.md is stale: run python -m localnmt.catalog --update-readme docs/catalog.md"
    )


def _column(paper: str, table: str, task: str) -> list:
    return [r for r in all_rows() if r.paper == paper and r.table == table and r.task == task]


def test_multi_language_tables_have_a_row_per_column_with_printed_params():
    # Yang 2018 Table 4: WMT17 Zh⇒En and WMT14 En⇒De columns
    zh = _column("yang2018", "Table 4", "wmt17_zh_en")
    de = _column("yang2018", "Table 4", "wmt14_en_de")
    assert [r.paper_params for r in zh] == [107.9, 108.0, 108.7, 108.8, 303.9, 307.2, 307.3]
    assert [(r.row, r.size, r.arch, r.args) for r in zh] == [
        (r.row, r.size, r.arch, r.args) for r in de
    ]
    assert zh[0].name == "yang2018/table-4/wmt17-zh-en/transformer-base/base"
    assert de[0].name == "yang2018/table-4/transformer-base/base"  # names of En⇒De rows kept
    # Zhang 2021 Table 2: NIST Zh→En, WMT14 En→De, WMT17 Zh→En
    cols = {t: _column("zhang2021", "Table 2", t) for t in ("nist_zh_en", "wmt17_zh_en")}
    assert [r.paper_params for r in cols["nist_zh_en"]] == [
        79.7, 79.6, 80.2, 79.8, 79.8, 79.8, 247.5, 247.6
    ]  # fmt: skip
    assert [r.paper_params for r in cols["wmt17_zh_en"]] == [
        83.6, 83.5, 84.1, 83.7, 83.7, 83.7, 255.2, 255.3
    ]  # fmt: skip
    # Yang 2019 Table 2: En⇒De, Zh⇒En, Ja⇒En (4 models each)
    for task in ("wmt14_en_de", "wmt17_zh_en", "wat17_ja_en"):
        rows = _column("yang2019", "Table 2", task)
        assert [r.arch for r in rows] == [
            "localnmt_base", "yang2019_csan2d_base", "localnmt_big", "yang2019_csan2d_big"
        ]  # fmt: skip
    # Pande Tables 1-3: EN-RU column next to EN-DE
    for table, n in (("Table 1", 6), ("Table 2", 5), ("Table 3", 3)):
        ru, de = (
            _column("pande2021", table, "wmt14_en_ru"),
            _column("pande2021", table, "wmt14_en_de"),
        )
        assert len(ru) == len(de) == n and [r.arch for r in ru] == [r.arch for r in de]
    assert TASKS["wmt14_en_ru"].tokens_per_update == 25_000
    assert TASKS["nist_zh_en"].scoring == "nist_multi_ref"
    # dev-set ablations keep their names, with the paper's task and split
    t1 = _column("yang2018", "Table 1", "wmt17_zh_en")
    assert len(t1) == 4 and all(r.split == "valid" for r in t1)
    assert t1[0].name == "yang2018/table-1/baseline/base"
    assert {r.task for r in all_rows() if r.table == "Figure 4"} == {"nist_zh_en"}


def test_glue_rows_count_bert_parameters():
    glue = _column("pande2021", "Table 4", "glue")
    counts = {r.arch: count_parameters(r.arch, r.args) for r in glue}
    base = counts["localnmt_roberta_base"]
    # BERT-base body 85.0M + 32K x 768 embeddings + 512 positions + LM head
    assert 110.0e6 < base < 111.0e6
    assert counts["pande2021_bert_band2_untied"] == counts["pande2021_bert_band6_untied"] == base
    # all 144 heads share one head-sized Wq/Wk (with biases): 12 x 2 x (768² + 768) saved,
    # 2 x (768 x 64 + 64) kept
    tied = 12 * 2 * (768 * 768 + 768) - 2 * (768 * 64 + 64)
    assert base - counts["pande2021_bert_band6_alltied"] == tied
    assert (
        counts["pande2021_bert_band6_alltied"]
        < counts["pande2021_bert_band6_132tied"]
        < counts["pande2021_bert_band6_120tied"]
        < base
    )


def test_cli_task_filter_and_column(capsys):
    assert catalog_main(["--task", "wat17_ja_en", "--no-params"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:4] == ["paper", "table", "task", "row"]
    assert len(lines) == 2 + 4 and all("WAT17 Ja→En" in line for line in lines[2:])
    assert catalog_main(["--json", "--task", "glue"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert [i["task"] for i in items] == ["glue"] * 6 and all(i["params"] for i in items)
    assert all(i["split"] == "valid" for i in items)
