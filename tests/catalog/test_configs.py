"""configs/<paper>.yaml: the schema check on load, the rows as they were before they became
data, a row or a paper added by editing a config, and the CLI's errors for empty selections."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.catalog import PAPERS, all_rows, paper_rows
from localnmt.catalog.__main__ import main as catalog_main
from localnmt.catalog.files import paper_files, read_paper
from localnmt.config_files import ConfigError, config_dir

REPO = Path(__file__).resolve().parents[2]
#: ``python -m localnmt.catalog --json --no-params`` when the rows were Python literals
#: (localnmt/catalog/<paper>.py), captured before they moved to configs/.
BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "catalog" / "rows_before_configs.json"

GOOD_ROW = """\
  - table: Table 1
    row: Baseline
    size: base
    arch: localnmt_base
"""


def _paper_file(tmp_path: Path, rows: str, paper: str = "mypaper") -> Path:
    path = tmp_path / f"{paper}.yaml"
    path.write_text(f"paper: {paper}\nrows:\n{GOOD_ROW}{rows}")
    return path


def _env(config_dir: Path) -> dict[str, str]:
    return {**os.environ, "LOCALNMT_CONFIGS": str(config_dir), "PYTHONPATH": str(REPO)}


def test_rows_equal_the_former_python_literals():
    """Every row the Python modules defined is still there, field for field and in order; a
    deliberate change to one of them updates the fixture."""
    before = json.loads(BEFORE.read_text())
    now = {r.name: r.to_json() for r in all_rows()}
    assert len(before) == 147
    for item in before:
        del item["params"]  # null: captured with --no-params
        assert now.get(item["name"]) == item, item["name"]
    names = [r.name for r in all_rows()]
    assert [n for n in names if n in {i["name"] for i in before}] == [i["name"] for i in before]


def test_every_paper_has_a_config_file():
    assert set(paper_files()) == set(PAPERS)
    assert PAPERS[:2] == ("vaswani2017", "yang2018")  # the catalog's order, not file order
    assert config_dir() == REPO / "configs"


@pytest.mark.parametrize(
    "row, key",
    [
        ("    argz: [--foo]\n", "unknown key 'argz'"),
        ("    args: --encoder-attn-modifiers rel_pos\n", "key 'args' must be a list"),
        ("    args: [--lr, 0.5]\n", "key 'args', item 1: must be a string, got float 0.5"),
        ("    paper_params: big\n", "key 'paper_params' must be a number or null"),
        ("    size: huge\n", "key 'size': 'huge' is not one of base, big"),
        ("    task: wmt99\n", "key 'task': 'wmt99' is not one of wmt14_en_de"),
        ("    split: true\n", "key 'split' must be a string, got bool"),
    ],
)
def test_a_wrong_key_names_file_row_and_key(tmp_path, row, key):
    path = _paper_file(tmp_path, "  - table: Table 2\n    row: Mine\n    size: base\n"
                                 "    arch: localnmt_base\n" + row)  # fmt: skip
    with pytest.raises(ConfigError) as err:
        read_paper(path)
    message = str(err.value)
    assert message.startswith(f"{path}: rows[1] (Table 2 / Mine): ")
    assert key in message


def test_a_missing_key_and_a_wrong_file_key_name_the_file(tmp_path):
    path = _paper_file(tmp_path, "  - table: Table 2\n    row: Mine\n    size: base\n")
    with pytest.raises(ConfigError, match=r"rows\[1\] \(Table 2 / Mine\): missing key 'arch'"):
        read_paper(path)
    path.write_text(f"paper: mypaper\nrow:\n{GOOD_ROW}")
    with pytest.raises(ConfigError, match=rf"^{path}: unknown key 'row' \(valid keys: paper,"):
        read_paper(path)
    path.write_text(f"paper: other\nrows:\n{GOOD_ROW}")
    with pytest.raises(ConfigError, match="key 'paper' is 'other'.*named after its paper"):
        read_paper(path)
    path.write_text("paper: mypaper\nrows: [\n")
    with pytest.raises(ConfigError, match=rf"^{path}: not valid YAML"):
        read_paper(path)


def test_numbers_anchors_and_defaults(tmp_path):
    path = _paper_file(
        tmp_path,
        "  - table: Table 2\n    row: Mine\n    size: big\n    arch: localnmt_big\n"
        "    args: &mine [--encoder-attn-modifiers, 'localness[window=fixed]']\n"
        "    paper_params: 88\n"
        "  - table: Table 2\n    row: Again\n    size: big\n    arch: localnmt_big\n"
        "    args: *mine\n    task: wmt17_zh_en\n    split: valid\n",
    )
    rows = read_paper(path)["rows"]
    assert rows[1]["paper_params"] == 88.0 and isinstance(rows[1]["paper_params"], float)
    mine = ("--encoder-attn-modifiers", "localness[window=fixed]")
    assert rows[1]["args"] == rows[2]["args"] == mine
    assert "task" not in rows[0] and rows[2]["split"] == "valid"


def test_catalog_row_checks_name_the_file(tmp_path, monkeypatch):
    shutil.copy(config_dir() / "vaswani2017.yaml", tmp_path)
    _paper_file(tmp_path, GOOD_ROW)  # the same row twice
    monkeypatch.setenv("LOCALNMT_CONFIGS", str(tmp_path))
    first = paper_rows("vaswani2017")[0]
    assert first.name == "vaswani2017/table-3/transformer-base/base"
    dupe = r"duplicate catalog names: mypaper/table-1/baseline/base \(in configs/mypaper.yaml"
    with pytest.raises(ConfigError, match=dupe):
        all_rows()


def test_a_paper_added_as_a_yaml_file_is_listed(tmp_path):
    """A researcher's new paper: one file, no code."""
    shutil.copy(config_dir() / "vaswani2017.yaml", tmp_path)
    row = "  - table: Table 2\n    row: Mine\n    size: base\n    arch: localnmt_base\n"
    _paper_file(tmp_path, row + "    args: [--encoder-attn-modifiers, rel_pos]\n", "zz2025")
    cmd = [sys.executable, "-m", "localnmt.catalog", "--json", "--no-params", "--paper", "zz2025"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path), check=True)
    items = json.loads(out.stdout)
    names = [i["name"] for i in items]
    assert names == ["zz2025/table-1/baseline/base", "zz2025/table-2/mine/base"]
    assert items[1]["args"] == ["--encoder-attn-modifiers", "rel_pos"]


def test_cli_broken_config_is_one_message_and_exit_2(tmp_path):
    _paper_file(tmp_path, "  - table: Table 2\n    row: Mine\n    size: base\n"
                          "    arch: localnmt_base\n    noet: typo\n")  # fmt: skip
    cmd = [sys.executable, "-m", "localnmt.catalog", "--no-params"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path))
    assert out.returncode == 2 and out.stdout == ""
    assert f"error: {tmp_path / 'mypaper.yaml'}: rows[1] (Table 2 / Mine): unknown key 'noet'" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--paper", "nosuch"], "invalid choice: 'nosuch' (choose from 'vaswani2017', 'yang2018'"),
        (["--task", "nosuch"], "invalid choice: 'nosuch' (choose from 'glue'"),
        (["--table", "Table 9"], "no rows with table 'Table 9' (valid: Figure 2, Figure 2a,"),
        (["--paper", "shaw2018", "--table", "Table 9"],
         "no rows with table 'Table 9' of paper shaw2018 (valid: Table 1)"),
        (["--paper", "shaw2018", "--task", "glue"],
         "no rows with task 'glue' of paper shaw2018 (valid: wmt14_en_de)"),
    ],
)  # fmt: skip
def test_cli_empty_selection_names_the_valid_choices(capsys, argv, expected):
    with pytest.raises(SystemExit) as exit_:
        catalog_main([*argv, "--no-params"])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert expected in captured.err and captured.out == ""


def test_cli_table_is_read_as_reproduce_reads_it(capsys):
    """Any case, with or without the space or the word: the same rule as reproduce."""
    for table, count in (("figure 2A", 8), ("fig2a", 8), ("table4", 14), ("4", 14)):
        argv = ["--paper", "yang2019" if "2" in table else "yang2018", "--table", table,
                "--json", "--no-params"]  # fmt: skip
        assert catalog_main(argv) == 0, table
        assert len(json.loads(capsys.readouterr().out)) == count, table
