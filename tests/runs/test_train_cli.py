"""localnmt-train: launch lines for CPU, one GPU, several GPUs and several nodes (dry runs, no
GPU needed), update-freq from tokens per update, and the errors a user meets first."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.runs import train

REPO = Path(__file__).resolve().parents[2]


def _dry(capsys, *args: str) -> list[str]:
    argv = ["--data", "BIN", "--save-dir", "CK", "--dry-run", "--no-user-dir", *args]
    assert train.main(argv) == 0
    return shlex.split(capsys.readouterr().out)


def _value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_cpu_is_one_process(capsys) -> None:
    cmd = _dry(capsys, "--cpu", "--arch", "transformer")
    assert cmd[:4] == [sys.executable, "-m", "localnmt.runs.fairseq_entry", "train"]
    assert cmd[4:9] == ["BIN", "--arch", "transformer", "--save-dir", "CK"]
    assert "--cpu" in cmd and "--distributed-world-size" not in cmd and "--user-dir" not in cmd
    assert _value(cmd, "--update-freq") == "8"  # ceil(32768 / 4096) on one device


def test_one_gpu_is_one_process(capsys) -> None:
    cmd = _dry(capsys, "--gpus", "1", "--bf16")
    assert cmd[1:3] == ["-m", "localnmt.runs.fairseq_entry"] and "--cpu" not in cmd
    assert "--bf16" in cmd and _value(cmd, "--update-freq") == "8"


def test_several_gpus_use_torchrun(capsys) -> None:
    cmd = _dry(capsys, "--gpus", "4", "--fp16")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc_per_node", "4", "-m", "localnmt.runs.fairseq_entry", "train"]  # fmt: skip
    assert cmd[: len(launcher)] == launcher
    assert _value(cmd, "--update-freq") == "2" and _value(cmd, "--distributed-world-size") == "4"
    assert "--fp16" in cmd and "--cpu" not in cmd


def test_several_nodes(capsys) -> None:
    cmd = _dry(capsys, "--gpus", "8", "--nnodes", "2", "--node-rank", "1", "--master-addr", "h0",
               "--size", "big", "--", "--seed", "3")  # fmt: skip
    assert cmd[3:13] == ["--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "8",
                         "--master_addr", "h0", "--master_port", "29500"]  # fmt: skip
    assert _value(cmd, "--distributed-world-size") == "16" and _value(cmd, "--update-freq") == "1"
    assert _value(cmd, "--lr") == "0.0005" and cmd[-2:] == ["--seed", "3"]  # extras come last


def test_tokens_per_update_and_separate_vocab(capsys) -> None:
    assert "--share-all-embeddings" in _dry(capsys, "--cpu")
    assert _value(_dry(capsys, "--cpu", "--tokens-per-update", "25000"), "--update-freq") == "7"
    assert _value(_dry(capsys, "--gpus", "4", "--tokens-per-update", "25000"),
                  "--update-freq") == "2"  # fmt: skip
    tiny = _dry(capsys, "--cpu", "--size", "tiny", "--tokens-per-update", "25000")
    assert _value(tiny, "--update-freq") == "1"  # the tiny recipe does not scale its batch
    sep = _dry(capsys, "--cpu", "--separate-vocab")
    assert "--share-decoder-input-output-embed" in sep and "--share-all-embeddings" not in sep


def test_user_dir_auto_and_explicit(capsys) -> None:
    from localnmt.paths import PLUGIN_DIR

    argv = ["--data", "BIN", "--save-dir", "CK", "--dry-run", "--cpu"]
    train.main(argv)
    assert _value(shlex.split(capsys.readouterr().out), "--user-dir") == str(PLUGIN_DIR)
    train.main([*argv, "--user-dir", "/plug"])
    assert _value(shlex.split(capsys.readouterr().out), "--user-dir") == "/plug"


def test_spec_round_trips_through_argv() -> None:
    spec = train.TrainSpec(data="B", save_dir="C", arch="a", size="tiny", max_update=3, gpus=2,
                           precision="fp16", user_dir="none", extra=["--seed", "2"])  # fmt: skip
    again, _ = train.parse_args(spec.to_argv())
    assert again == spec


def test_errors_exit_2_before_fairseq(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as err:
        train.main(["--data", str(tmp_path / "nope"), "--save-dir", str(tmp_path / "ck"), "--cpu"])
    assert err.value.code == 2
    message = capsys.readouterr().err
    assert message.startswith(
        f"localnmt-train: error: data directory {tmp_path}/nope does not exist"
    )
    assert "data_prep/" in message and not (tmp_path / "ck").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as err:
        train.main(["--data", str(tmp_path / "empty"), "--save-dir", "ck", "--cpu"])
    assert err.value.code == 2 and "has no dict.*.txt" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        train.main(["--data", "B", "--save-dir", "C", "--gpus", "2", "--nnodes", "2", "--dry-run"])
    assert err.value.code == 2 and "--master-addr is needed" in capsys.readouterr().err


def test_train_sh_is_a_wrapper(tmp_path) -> None:
    res = subprocess.run(["bash", str(REPO / "scripts" / "train.sh"), "--data", str(tmp_path / "x"),
                          "--save-dir", str(tmp_path / "ck"), "--cpu"],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 2 and "localnmt-train: error: data directory" in res.stderr
    assert "Traceback" not in res.stderr


def test_slurm_template_launches_localnmt_train(tmp_path) -> None:
    """The sbatch script on a fake two-node allocation (stub srun/scontrol): node 1's line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'node-a\\nnode-b\\n'\n")
    (bin_dir / "srun").write_text('#!/bin/sh\nshift\nexec "$@"\n')  # drop --kill-on-bad-exit
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_SUBMIT_DIR": str(REPO),
           "SLURM_GPUS_PER_NODE": "h100:4", "SLURM_JOB_NODELIST": "node-[a-b]",
           "SLURM_NNODES": "2", "SLURM_NODEID": "1", "PYTHON": sys.executable}  # fmt: skip
    res = subprocess.run(["bash", str(REPO / "scripts" / "slurm_multinode.sbatch"), "BIN", "CK",
                          "--no-user-dir", "--dry-run"], capture_output=True, text=True,
                         env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    cmd = shlex.split(res.stdout)
    assert cmd[3:13] == ["--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "4",
                         "--master_addr", "node-a", "--master_port", "29500"]  # fmt: skip
    assert _value(cmd, "--distributed-world-size") == "8" and _value(cmd, "--update-freq") == "1"


def test_cpu_processes_use_torchrun_and_gloo(capsys) -> None:
    cmd = _dry(capsys, "--cpu", "--procs", "2")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc_per_node", "2", "-m", "localnmt.runs.fairseq_entry", "train"]  # fmt: skip
    assert cmd[: len(launcher)] == launcher and "--cpu" in cmd
    assert _value(cmd, "--distributed-world-size") == "2"
    assert _value(cmd, "--distributed-backend") == "gloo"
    assert _value(cmd, "--ddp-backend") == "legacy_ddp"
    assert _value(cmd, "--update-freq") == "4"  # 32768 tokens over 2 processes x 4096
    nodes = _dry(capsys, "--cpu", "--procs", "2", "--nnodes", "2", "--node-rank", "1",
                 "--master-addr", "h0")  # fmt: skip
    assert nodes[3:13] == ["--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "2",
                           "--master_addr", "h0", "--master_port", "29500"]  # fmt: skip
    assert _value(nodes, "--distributed-world-size") == "4"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--cpu", "--gpus", "2"],
            "--gpus 2 means nothing: for several processes on CPUs give --procs N",
        ),  # fmt: skip
        (["--cpu", "--nnodes", "2", "--master-addr", "h"], "needs --procs N"),
        (["--procs", "2"], "--procs is for --cpu"),
        (["--cpu", "--layers", "0"], "--layers must be at least 1, got 0"),
        (["--cpu", "--max-update", "-3"], "--max-update must be at least 1, got -3"),
        (["--cpu", "--size", "huge"], "unknown recipe (--size) 'huge'; choose from base, big"),
    ],
)
def test_impossible_settings_stop_with_one_line(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as err:
        train.main(["--data", "B", "--save-dir", "C", "--dry-run", *argv])
    assert err.value.code == 2
    assert message in capsys.readouterr().err
