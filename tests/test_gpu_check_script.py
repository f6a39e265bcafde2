"""scripts/gpu_check.sh in its dry mode, on any machine: every step's command exists and parses
the options the GPU run would give it, and the step limits fit the 9-minute budget."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_check.sh"


def test_dry_run_checks_every_step(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=1500)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("\t") for line in (tmp_path / "summary.tsv").read_text().splitlines()]
    assert rows[0] == ["step", "status", "exit", "seconds"]
    steps = {row[0]: row[1] for row in rows[1:]}
    assert steps == dict.fromkeys(
        ["setup", "check", "cuda_tests", "bench_fp16", "bench_bf16", "quickstart"], "PASS"
    )
    assert "step limits: 540 s of 540 s" in done.stdout
    assert "26 layer cases, 17 method families" in (tmp_path / "check.log").read_text()
    bench = (tmp_path / "bench_bf16.log").read_text()
    assert "dtype bfloat16" in bench and "12 rows: vaswani2017/table-3" in bench
    assert "4096 target tokens per batch" in bench
    assert "test_flex_attention_forward_and_backward" in (tmp_path / "cuda_tests.log").read_text()
    assert "quickstart options ok" in (tmp_path / "quickstart.log").read_text()


def test_dry_run_fails_on_what_it_cannot_run(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path),
                           "--wheels", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and "no wheels in" in done.stderr
    unknown = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True)
    assert unknown.returncode == 2 and "unknown option --nope" in unknown.stderr
