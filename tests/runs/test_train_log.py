"""Reading fairseq-generate output, fairseq-train logs, catalog rows and reports."""

from types import SimpleNamespace

import pytest

from localnmt.catalog.tables import baseline_of, select_table, table_key
from localnmt.runs.generate import ordered, parse_generate
from localnmt.runs.reproduce.results_markdown import RowResult, results_table
from localnmt.runs.train_log import parse_train_log

GEN = (
    "S-1\tb\nT-1\tB\nH-1\t-0.5\tzwei\nD-1\t-0.5\tzwei\nS-0\ta\nT-0\tA\nH-0\t-0.2\t\nH-0\t-0.9\tx\n"
)

LOG = """\
00:00 | INFO | fairseq_cli.train | num. shared model params: 44,160 (num. trained: 44,160)
00:01 | INFO | train_inner | epoch 001:     10 / 30 loss=9.1, wps=100, ups=2.0, num_updates=10
INFO:train_inner:epoch 001:     20 / 30 loss=9.0, wps=300, ups=4.0, num_updates=20
00:02 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.5 | num_updates 30
00:02 | INFO | train | epoch 001 | loss 9.0 | wps 250 | ups 3.5 | num_updates 30
00:03 | INFO | fairseq_cli.train | done training in 3.0 seconds
"""


def test_parse_generate_orders_and_checks_ids() -> None:
    assert ordered(parse_generate(GEN, "H")) == ["", "zwei"]
    assert ordered(parse_generate(GEN, "T"), 2) == ["A", "B"]
    with pytest.raises(ValueError):
        ordered(parse_generate(GEN, "H"), 3)


def test_parse_train_log() -> None:
    log = parse_train_log(LOG)
    assert log.params == 44160
    assert log.ups == 3.0 and log.wps == 200
    assert log.num_updates == 30 and log.valid == [(30, 8.5)] and log.finished


_ROWS = [
    {
        "name": "b",
        "paper": "p",
        "table": "Table 4",
        "row": "TRANSFORMER-BASE",
        "size": "base",
        "arch": "localnmt_base",
        "args": [],
    },
    {
        "name": "l",
        "paper": "p",
        "table": "Table 4",
        "row": "+ Localness",
        "size": "base",
        "arch": "yang2018_localness",
        "args": [],
    },
    {
        "name": "B",
        "paper": "p",
        "table": "table 4",
        "row": "TRANSFORMER-BIG",
        "size": "big",
        "arch": "localnmt_big",
        "args": [],
    },
    {
        "name": "L",
        "paper": "p",
        "table": "4",
        "row": "+ Localness",
        "size": "big",
        "arch": "yang2018_localness_big",
        "args": [],
    },
    {"name": "x", "paper": "q", "table": "Table 4", "row": "x", "size": "base", "arch": "a"},
]
#: catalog rows as the table functions read them (attributes of a CatalogRow)
ROWS = [SimpleNamespace(**{"args": (), **row}) for row in _ROWS]


def test_rows_and_baseline_per_size() -> None:
    assert table_key("Table 2") == table_key("table2") == table_key("2") == "2"
    rows = select_table(ROWS, "p", "Table 4")
    assert [r.name for r in rows] == ["b", "l", "B", "L"]
    assert baseline_of(rows, rows[1]).name == "b"
    assert baseline_of(rows, rows[3]).name == "B"
    assert baseline_of(rows, rows[3], "b").name == "b"


def test_results_table_layout() -> None:
    table = results_table(
        [
            RowResult(
                "b", "Base", 27.31, 27.9, params=88_000_000, ups=1.28, wps=9000, is_baseline=True
            ),
            RowResult(
                "c",
                "+ CSAN",
                28.18,
                28.7,
                delta=0.87,
                marker="⇑",
                p_value=0.004,
                params=88_000_000,
                ups=1.22,
                wps=8800,
            ),
        ]
    )
    lines = table.splitlines()
    assert lines[0].startswith("| Model | #Params | Speed")
    assert lines[2] == "| Base | 88.0M | 1.28 | 9000 | 27.31 | 27.90 | - | - |"
    assert lines[3] == "| + CSAN | 88.0M | 1.22 | 8800 | 28.18 ⇑ | 28.70 | +0.87 | 0.004 |"
