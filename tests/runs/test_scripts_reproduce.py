"""Shell scripts: shellcheck, train.sh launch lines, reproduce.sh end to end on tiny data."""

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


def _dry(*args: str) -> str:
    cmd = [
        "bash",
        str(SCRIPTS / "train.sh"),
        "--data",
        "BIN",
        "--save-dir",
        "CK",
        "--dry-run",
        "--no-user-dir",
    ]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, check=True).stdout


def test_train_sh_launchers() -> None:
    cpu = _dry("--cpu", "--arch", "transformer")
    assert "fairseq_entry train BIN --arch transformer" in cpu and "--cpu" in cpu
    assert "--update-freq 8" in cpu and "torchrun" not in cpu
    multi = _dry("--gpus", "4", "--fp16")
    assert multi.startswith("torchrun --standalone --nnodes 1 --nproc_per_node 4")
    assert "--update-freq 2" in multi and "--distributed-world-size 4" in multi
    assert "--fp16" in multi and "--cpu" not in multi
    nodes = _dry(
        "--gpus", "8", "--nnodes", "2", "--master-addr", "h0", "--size", "big", "--", "--seed", "3"
    )
    assert "--node_rank 0" in nodes and "--master_addr h0" in nodes
    assert "--distributed-world-size 16" in nodes and "--update-freq 1" in nodes
    assert nodes.rstrip().endswith("--seed 3")


def test_train_sh_tokens_per_update_and_separate_vocab() -> None:
    default = _dry("--cpu")
    assert "--update-freq 8" in default and "--share-all-embeddings" in default  # 32768 tokens
    ru = _dry("--cpu", "--tokens-per-update", "25000")
    assert "--update-freq 7" in ru  # ceil(25000 / 4096): Pande et al.'s En-Ru batch
    assert "--update-freq 2" in _dry("--gpus", "4", "--tokens-per-update", "25000")
    assert "--update-freq 1" in _dry("--cpu", "--size", "tiny", "--tokens-per-update", "25000")
    sep = _dry("--cpu", "--separate-vocab")
    assert "--share-decoder-input-output-embed" in sep and "--share-all-embeddings" not in sep


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
    assert lines[2].startswith("| + pre-norm |") and "| 60.0M |" in lines[2]
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
