"""Checkpoint averaging."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from localnmt.runs.average_checkpoints import average_checkpoints, last_n_checkpoints


def _save(path: Path, value: float, step: int) -> None:
    model = {
        "w": torch.full((2, 2), value),
        "h": torch.full((2,), value).half(),
        "n": torch.tensor([step]),
    }
    torch.save({"model": model, "extra_state": {"step": step}, "args": None}, path)


def test_average_epoch_checkpoints(tmp_path: Path) -> None:
    for epoch in range(1, 5):
        _save(tmp_path / f"checkpoint{epoch}.pt", float(epoch), epoch * 10)
    paths = last_n_checkpoints(tmp_path, 3)
    assert [p.name for p in paths] == ["checkpoint4.pt", "checkpoint3.pt", "checkpoint2.pt"]
    state = average_checkpoints(paths)
    assert torch.equal(state["model"]["w"], torch.full((2, 2), 3.0))
    assert state["model"]["h"].dtype == torch.float32
    assert torch.equal(state["model"]["n"], torch.tensor([30]))
    assert state["extra_state"]["step"] == 40  # metadata of the newest
    with pytest.raises(ValueError):
        last_n_checkpoints(tmp_path, 5)


def test_average_update_checkpoints_cli(tmp_path: Path) -> None:
    for i, (epoch, update) in enumerate([(1, 500), (2, 1000), (2, 1500)]):
        _save(tmp_path / f"checkpoint_{epoch}_{update}.pt", float(i), update)
    _save(tmp_path / "checkpoint9.pt", 100.0, 0)  # epoch file: ignored by update mode
    out = tmp_path / "avg.pt"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "localnmt.runs.average_checkpoints",
            "--inputs",
            str(tmp_path),
            "--num-update-checkpoints",
            "2",
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    state = torch.load(out, weights_only=False)
    assert torch.equal(state["model"]["w"], torch.full((2, 2), 1.5))


def test_interrupted_save_leaves_no_average(tmp_path: Path, monkeypatch) -> None:
    """A save that fails half-way (a full disk, Ctrl-C) leaves no file a later run could read
    as a finished average; a save that succeeds leaves exactly the average."""
    from localnmt.runs import average_checkpoints as module

    for epoch in (1, 2):
        _save(tmp_path / f"checkpoint{epoch}.pt", float(epoch), epoch)
    paths = last_n_checkpoints(tmp_path, 2)
    out = tmp_path / "checkpoint_avg2.pt"

    def broken_save(obj, path) -> None:
        Path(path).write_bytes(b"truncated")
        raise OSError("No space left on device")

    monkeypatch.setattr(module.torch, "save", broken_save)
    with pytest.raises(OSError):
        module.write_average(paths, out)
    assert not out.exists() and list(tmp_path.glob(".checkpoint_avg2*")) == []
    monkeypatch.undo()
    module.write_average(paths, out)
    state = torch.load(out, weights_only=False)
    assert torch.equal(state["model"]["w"], torch.full((2, 2), 1.5))


def test_reproduce_averages_again_after_more_training(tmp_path: Path) -> None:
    """The evaluation's pick_checkpoint writes the average of the current last N every time;
    an earlier checkpoint_avgN.pt is replaced, never read back."""
    from localnmt.runs.experiment import pick_checkpoint
    from localnmt.runs.layout import RunLayout

    layout = RunLayout(tmp_path, tmp_path, tmp_path / "train.log")
    name = "checkpoint_1_{}.pt"
    for i in (1, 2):
        _save(tmp_path / name.format(i), float(i), i)
    first = pick_checkpoint(layout, 2, by_update=True, log=lambda m: None)
    assert first.name == "checkpoint_avg2.pt"
    assert torch.equal(torch.load(first, weights_only=False)["model"]["w"], torch.full((2, 2), 1.5))
    _save(tmp_path / name.format(3), 3.0, 3)  # training went on
    again = pick_checkpoint(layout, 2, by_update=True, log=lambda m: None)
    assert again == first
    assert torch.equal(torch.load(again, weights_only=False)["model"]["w"], torch.full((2, 2), 2.5))
