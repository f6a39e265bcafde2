"""train_run: a training run is a fingerprinted step. Identical settings and data skip it, a
changed setting or a changed byte of the data retrains (the old checkpoints set aside, never
resumed), an interrupted run resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from localnmt.errors import UsageError
from localnmt.runs.layout import RunLayout
from localnmt.runs.run_specs import TrainSpec
from localnmt.runs.train_run import claim_checkpoints, run_params, train_run
from localnmt.safe_load import load_checkpoint
from localnmt.steps import StepRunner
from localnmt.testing import make_tiny_corpus, preprocess


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    raw = make_tiny_corpus(root / "raw", train=120, valid=8)
    return preprocess(raw, root / "data-bin")


def _params(data: Path, **changes) -> dict:
    spec = dict(data=str(data), save_dir="/a/checkpoints", arch="transformer", size="tiny",
                max_update=3, cpu=True, user_dir="none", extra=["--seed", "1"])  # fmt: skip
    spec.update(changes)
    return run_params(TrainSpec(**spec), 0)


def _fingerprint(data: Path, tmp_path: Path, **changes) -> str:
    """The fingerprint the training step of these settings has on ``data`` now."""
    return StepRunner(tmp_path).step_fingerprint(_params(data, **changes), inputs=[data])


def test_fingerprint_covers_settings_not_paths(data_bin, tmp_path) -> None:
    base = _params(data_bin)
    assert _params(data_bin, save_dir="/elsewhere", user_dir="/plugin") == base
    curve = ["--seed", "1", "--curve"]  # the quickstart passes its run directory's curve file
    assert _params(data_bin, extra=[*curve, "/a/curve.jsonl"]) == _params(
        data_bin, extra=[*curve, "/b/curve.jsonl"]
    )
    for change in (dict(arch="localnmt_base"), dict(max_update=4), dict(size="cpu"),
                   dict(extra=["--seed", "2"]), dict(layers=1), dict(separate_vocab=True),
                   dict(extra=["--seed", "1", "--stop-time-hours", "1"])):  # fmt: skip
        assert _params(data_bin, **change) != base, change
    assert base["fairseq_args"][base["fairseq_args"].index("--max-update") + 1] == "3"


def test_fingerprint_covers_the_data_bytes_not_its_place(data_bin, tmp_path) -> None:
    base = _fingerprint(data_bin, tmp_path)
    moved = tmp_path / "moved"
    shutil.copytree(data_bin, moved)
    assert _fingerprint(moved, tmp_path) == base  # same content, other place
    dictionary = next(moved.glob("dict.*.txt"))
    dictionary.write_text(dictionary.read_text() + "extra 1\n")
    assert _fingerprint(moved, tmp_path) != base
    # two sentences swapped: every file keeps its size, the bytes differ
    swapped = tmp_path / "swapped"
    shutil.copytree(data_bin, swapped)
    binary = next(swapped.glob("train.*.bin"))
    data = bytearray(binary.read_bytes())
    data[:4], data[4:8] = data[4:8], data[:4]
    assert bytes(data) != binary.read_bytes()
    binary.write_bytes(bytes(data))
    assert _fingerprint(swapped, tmp_path) != base


def _train(run_dir: Path, data_bin: Path, max_update: int, messages: list[str], **step):
    layout = RunLayout.under(run_dir)
    spec = TrainSpec(data=str(data_bin), save_dir=str(layout.checkpoints), arch="transformer",
                     size="tiny", layers=1, cpu=True, user_dir="none", max_update=max_update,
                     extra=("--seed", "1"))  # fmt: skip
    return train_run(spec, layout, StepRunner(run_dir, log=messages.append), log=messages.append,
                     **step)  # fmt: skip


def test_rerun_skips_changed_setting_retrains_interrupted_resumes(data_bin, tmp_path) -> None:
    run_dir = tmp_path / "run"
    messages: list[str] = []

    first = _train(run_dir, data_bin, 3, messages)
    assert first.ran and first.checkpoint.is_file()
    assert "| INFO | fairseq_cli.train | done training" in first.log.read_text()
    mtime = first.checkpoint.stat().st_mtime_ns

    same = _train(run_dir, data_bin, 3, messages)
    assert not same.ran and same.fingerprint == first.fingerprint
    assert same.checkpoint.stat().st_mtime_ns == mtime and "[skip] train: already done" in messages

    changed = _train(run_dir, data_bin, 4, messages)
    assert changed.ran and changed.fingerprint != first.fingerprint
    stale = run_dir / "stale" / first.fingerprint / "checkpoint_last.pt"
    assert stale.is_file()  # set aside, not resumed
    log = changed.log.read_text()
    assert "num_updates 4" in log.split("done training")[0] and "Loaded checkpoint" not in log
    stamp = json.loads((run_dir / "train.started.json").read_text())
    assert stamp["fingerprint"] == changed.fingerprint

    (run_dir / ".done" / "train.json").unlink()  # as if interrupted after the last checkpoint
    messages.clear()
    resumed = _train(run_dir, data_bin, 4, messages)
    assert resumed.ran and any(m.startswith("  resuming from") for m in messages)
    assert "Loaded checkpoint" in resumed.log.read_text()
    assert [p.name for p in (run_dir / "stale").iterdir()] == [first.fingerprint]


def test_missing_data_bin_is_one_message(tmp_path) -> None:
    layout = RunLayout.under(tmp_path / "run")
    spec = TrainSpec(data=str(tmp_path / "nope"), save_dir=str(layout.checkpoints),
                     arch="transformer", cpu=True)  # fmt: skip
    with pytest.raises(UsageError) as err:
        train_run(spec, layout, StepRunner(layout.root))
    assert "data directory" in str(err.value)
    assert not (tmp_path / "run").exists()


def test_claim_checkpoints_moves_other_settings_and_keeps_an_interrupted_run(tmp_path) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "run" / "ck"
    layout, stamp = RunLayout(run, ckpt, run / "train.log", name="a"), run / "a.started.json"
    ckpt.mkdir(parents=True)
    (ckpt / "checkpoint_last.pt").write_text("settings A")
    said: list[str] = []
    assert claim_checkpoints(layout, "A", ["a"], said.append) is False  # unknown owner
    assert (run / "stale" / "unknown" / "checkpoint_last.pt").read_text() == "settings A"
    assert not ckpt.exists() or not any(ckpt.iterdir())
    ckpt.mkdir(exist_ok=True)
    (ckpt / "checkpoint_last.pt").write_text("interrupted A")
    assert claim_checkpoints(layout, "A", ["a"], said.append) is True  # resumes
    assert (ckpt / "checkpoint_last.pt").read_text() == "interrupted A"
    assert claim_checkpoints(layout, "B", ["b"], said.append) is False  # changed
    assert (run / "stale" / "A" / "checkpoint_last.pt").read_text() == "interrupted A"
    assert json.loads(stamp.read_text())["fingerprint"] == "B"
    assert len(said) == 2 and all("settings changed" in m for m in said)


def test_a_longer_run_goes_on_from_the_run_it_extends_only(tmp_path) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "run" / "ck"
    layout, stamp = RunLayout(run, ckpt, run / "train.log", name="a"), run / "a.started.json"
    said: list[str] = []
    assert claim_checkpoints(layout, "A-to-600", ["a"], said.append) is False  # a first part
    ckpt.mkdir(parents=True)
    (ckpt / "checkpoint_last.pt").write_text("A at 600 updates")
    # the same training to 800 updates goes on from the first part's checkpoint
    assert claim_checkpoints(layout, "A-to-800", ["a"], said.append, ("A-to-600",)) is True
    assert (ckpt / "checkpoint_last.pt").read_text() == "A at 600 updates" and not said
    assert json.loads(stamp.read_text())["fingerprint"] == "A-to-800"
    # a run that extends another fingerprint still sets these checkpoints aside
    assert claim_checkpoints(layout, "B-to-800", ["b"], said.append, ("B-to-600",)) is False
    assert (run / "stale" / "A-to-800" / "checkpoint_last.pt").read_text() == "A at 600 updates"
    assert len(said) == 1 and "settings changed" in said[0]


def test_a_run_goes_on_from_its_first_part(data_bin, tmp_path) -> None:
    """The quickstart's first part, then the rest (``extends``): the part is the run's first
    updates, and the rest loads its weights, optimizer and schedule. (Not bitwise the run in
    one: fairseq builds a resumed run's batches anew, breaking ties between sentences of one
    length with a seed that counts the epoch, so later batches group other sentences.)"""
    straight = _train(tmp_path / "straight", data_bin, 4, [])
    messages: list[str] = []
    part = _train(tmp_path / "split", data_bin, 4, messages, name="train-part")
    assert part.ran and not part.resumed and part.seconds is not None
    at_part = load_checkpoint(part.checkpoint)
    for name, weight in load_checkpoint(straight.checkpoint)["model"].items():
        assert torch.equal(weight, at_part["model"][name]), name
    rest = _train(tmp_path / "split", data_bin, 7, messages, extends=(part.fingerprint,))
    assert rest.ran and rest.resumed and rest.fingerprint != part.fingerprint
    assert not any("settings changed" in m for m in messages)
    assert "@ 4 updates)" in rest.log.read_text().split("Loaded checkpoint")[1].splitlines()[0]
    final = load_checkpoint(rest.checkpoint)
    assert final["optimizer_history"][-1]["num_updates"] == 7
    adam = final["last_optimizer_state"]["state"]
    assert {int(state["step"]) for state in adam.values()} == {7}  # Adam went on, not anew
