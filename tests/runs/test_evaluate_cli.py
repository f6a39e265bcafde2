"""python -m localnmt.runs.evaluate (scripts/evaluate.sh): checkpoint averaging options and
their errors (one message, exit 2)."""

from __future__ import annotations

import pytest

from localnmt.runs import evaluate


def test_average_dir_without_checkpoints_is_a_usage_error(tmp_path, capsys) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "checkpoint_last.pt").write_bytes(b"")
    argv = ["--average-dir", str(tmp_path / "ck"), "--average", "3", "--data-bin", "B",
            "--out", str(tmp_path / "out")]  # fmt: skip
    with pytest.raises(SystemExit) as err:
        evaluate.main(argv)
    assert err.value.code == 2
    assert f"found 0 epoch checkpoints in {tmp_path}/ck, need 3" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        evaluate.main([*argv, "--by-update"])
    assert err.value.code == 2 and "found 0 update checkpoints" in capsys.readouterr().err
