"""Shell scripts: shellcheck, thin wrappers with --help, reproduce.sh end to end on tiny data
(launch lines of localnmt-train: test_train_cli.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval"
sys.path.insert(0, str(FIXTURES))

from tinydata import build_data_bin  # noqa: E402


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean() -> None:
    files = sorted(str(p) for p in SCRIPTS.glob("*.sh")) + [str(SCRIPTS / "slurm_multinode.sbatch")]
    files = [f for f in files if not f.endswith("/test.sh")]
    result = subprocess.run(["shellcheck", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_wrappers_are_thin() -> None:
    """Every training/evaluation script only calls its Python entry point (argparse there)."""
    for script in ("train", "evaluate", "reproduce", "roberta_pretrain", "glue_finetune"):
        text = (SCRIPTS / f"{script}.sh").read_text()
        assert len(text.splitlines()) <= 12 and "while" not in text and "case" not in text
        assert text.rstrip().endswith(f'-m localnmt.runs.{script} "$@"')


@pytest.mark.parametrize(
    "script, usage", [("evaluate.sh", "--average-dir"), ("reproduce.sh", "--score-against")]
)
def test_wrappers_print_usage(script: str, usage: str) -> None:
    res = subprocess.run(["bash", str(SCRIPTS / script), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "usage:" in res.stdout and usage in res.stdout


def test_reproduce_dry_run() -> None:
    out = subprocess.run(
        [
            "bash",
            str(SCRIPTS / "reproduce.sh"),
            "vaswani2017",
            "Table 1",
            "--dry-run",
            "--catalog-json",
            str(FIXTURES / "catalog.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "# Transformer-Base (baseline: Transformer-Base)" in out
    assert "-- --encoder-normalize-before" in out
    assert "other" not in out


def test_reproduce_tiny_end_to_end(tmp_path: Path) -> None:
    data = build_data_bin(tmp_path / "data")
    cmd = [
        "bash",
        str(SCRIPTS / "reproduce.sh"),
        "vaswani2017",
        "Table 1",
        "--tiny",
        "--data",
        str(data),
        "--catalog-json",
        str(FIXTURES / "catalog.json"),
        "--workdir",
        str(tmp_path / "work"),
        "--results-dir",
        str(tmp_path / "results"),
        "--layers",
        "1",
        "--max-update",
        "12",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    page = (tmp_path / "results" / "vaswani2017_table1.md").read_text()
    lines = [line for line in page.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Model | #Params")
    assert lines[1].startswith("| Transformer-Base |") and lines[1].endswith(" - | - |")
    # the paper-size count of the row, counted when the page is written
    assert lines[2].startswith("| + pre-norm |") and "| 60.5M |" in lines[2]
    results = json.loads((tmp_path / "results" / "vaswani2017_table1.json").read_text())
    base, pre = results["rows"]
    assert base["is_baseline"] and not pre["is_baseline"]
    assert base["params"] > 0 and base["ups"] > 0 and base["wps"] > 0
    assert pre["p_value"] is not None and pre["delta"] is not None
    assert results["scores"]["fixture_base"]["sentences"] == 12  # no test sentence dropped
    run = tmp_path / "work" / "vaswani2017_table1" / "fixture_prenorm"
    assert (run / "checkpoints" / "checkpoint_avg2.pt").exists()
    assert "encoder_normalize_before=True" in (run / "train.log").read_text()
    assert len((run / "eval" / "hyp.txt").read_text().splitlines()) == 12
