"""Checkpoints a kill or a full disk cannot truncate, and a resume that survives a damaged
one: fairseq copied checkpoint_last.pt in place (a kill timed at the copy left 0 bytes in 4 of
4 tries, a full disk 872,448 of 1,352,095), and every rerun then failed on it."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from localnmt.errors import CheckpointError
from localnmt.runs import checkpoint_files


def _save(path: Path, value: float) -> Path:
    torch.save({"model": {"w": torch.full((4,), value)}, "args": None}, path)
    return path


def test_a_copy_killed_half_way_leaves_the_old_file(tmp_path, monkeypatch) -> None:
    src, dst = (
        _save(tmp_path / "checkpoint_1_8.pt", 2.0),
        _save(tmp_path / "checkpoint_last.pt", 1.0),
    )
    before = dst.read_bytes()

    def killed(a, b, **kwargs):
        Path(b).write_bytes(Path(a).read_bytes()[:100])  # part of the file, then the kill
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copyfile", killed)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_files.atomic_copy(str(src), str(dst))
    assert dst.read_bytes() == before and not list(tmp_path.glob(".*tmp*"))


def test_a_full_disk_while_saving_leaves_the_old_file(tmp_path) -> None:
    dst = _save(tmp_path / "checkpoint_last.pt", 1.0)
    before = dst.read_bytes()

    def full_disk(obj, f) -> None:
        f.write(b"PK\x03\x04 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        checkpoint_files.atomic_torch_save(full_disk)({"model": {}}, str(dst))
    assert dst.read_bytes() == before and not list(tmp_path.glob(".*tmp*"))


def test_fairseq_saves_through_the_atomic_writers(tmp_path) -> None:
    from fairseq import checkpoint_utils

    checkpoint_files.install()
    checkpoint_utils.torch_persistent_save({"model": {"w": torch.ones(2)}}, str(tmp_path / "a.pt"))
    assert checkpoint_utils.PathManager.copy(str(tmp_path / "a.pt"), str(tmp_path / "b.pt"), True)
    assert torch.equal(torch.load(tmp_path / "b.pt")["model"]["w"], torch.ones(2))
    assert checkpoint_utils.PathManager.isfile(str(tmp_path / "b.pt"))  # the rest is fairseq's


def test_resume_falls_back_to_the_newest_checkpoint_that_loads(tmp_path) -> None:
    _save(tmp_path / "checkpoint_1_4.pt", 1.0)
    newest = _save(tmp_path / "checkpoint_1_8.pt", 2.0)
    os.utime(tmp_path / "checkpoint_1_4.pt", (1, 1))
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")  # what the kill left
    said: list[str] = []
    argv = ["data", "--save-dir", str(tmp_path)]
    assert checkpoint_files.resume_arguments(argv, said.append) == ["--restore-file", str(newest)]
    assert said == [f"{tmp_path}/checkpoint_last.pt: damaged or not a checkpoint (the file is "
                    f"empty or cut short); use another checkpoint of the run; resuming from "
                    f"{newest} (8 updates; no update lost) instead, the most trained "
                    "checkpoint that loads"]  # fmt: skip
    for path in tmp_path.glob("checkpoint_1_*.pt"):
        path.write_bytes(b"junk")
    fresh = checkpoint_files.resume_arguments(argv, said.append, accept_loss=True)
    assert not Path(fresh[1]).exists() and "training starts from the beginning" in said[-1]
    with pytest.raises(CheckpointError, match="--restore-file: .*damaged"):
        checkpoint_files.resume_arguments([*argv, "--restore-file", str(newest)], said.append)


def test_a_rerun_after_a_truncated_checkpoint_last_resumes(tiny_data, tmp_path) -> None:
    """The case as users met it: a training, its checkpoint_last.pt cut to 0 bytes, the same
    command again with more updates."""
    save = tmp_path / "ck"

    def train(updates: int) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "localnmt.runs.train", "--data", str(tiny_data),
               "--save-dir", str(save), "--arch", "transformer", "--size", "tiny",
               "--layers", "1", "--cpu", "--max-update", str(updates), "--no-user-dir",
               "--", "--seed", "1"]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)

    assert train(2).returncode == 0
    (save / "checkpoint_last.pt").write_bytes(b"")
    again = train(4)
    assert again.returncode == 0, again.stderr[-2000:]
    said = again.stdout  # the trainer's output, as the log has it
    assert "checkpoint_last.pt: damaged or not a checkpoint" in said and "resuming from" in said
    assert "num_updates 4" in said.replace("=", " ")
