"""When a rank dies, the launcher echoes the rank's error, not torchrun's own traceback and
``ChildFailedError`` block (issue: they followed the one-line error); the log keeps all."""

from __future__ import annotations

import sys

from localnmt.runs.launch import run_logged
from localnmt.runs.torchrun_output import LauncherReport

FAILING_RANK = 'import os\nif os.environ["RANK"] == "1":\n    raise ValueError("rank one failed")\n'


def test_a_dead_rank_is_echoed_without_torchruns_report(tmp_path, capsys) -> None:
    script = tmp_path / "fail.py"
    script.write_text(FAILING_RANK)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc_per_node", "2", str(script)]  # fmt: skip
    status = run_logged(cmd, tmp_path / "train.log", echo=True, procs_per_node=2)
    echoed, log = capsys.readouterr().out, (tmp_path / "train.log").read_text()
    assert status != 0
    assert "ValueError: rank one failed" in echoed
    assert "ChildFailedError" not in echoed and "torch/distributed/run.py" not in echoed
    assert "Root Cause" not in echoed
    assert "ChildFailedError" in log and "ValueError: rank one failed" in log


def test_other_tracebacks_and_lines_pass_unchanged() -> None:
    lines = ["epoch 1 | loss 3.2\n", "Traceback (most recent call last):\n",
             '  File "train.py", line 3, in <module>\n', "KeyError: 'x'\n", "done\n"]  # fmt: skip
    report = LauncherReport()
    out = [echoed for line in lines for echoed in report.feed(line)]
    assert out + list(report.flush()) == lines
