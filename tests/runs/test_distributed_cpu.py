"""Several training processes on the CPU (``localnmt-train --cpu --procs 2``: torchrun, gloo),
run for real: two ranks train, stop, resume from the checkpoint rank 0 wrote and finish, with
the losses of one process that accumulates two batches per update (``--update-freq 2``).
The plain Transformer, Localness and GMM cross-attention each run on two ranks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.testing import make_tiny_corpus, preprocess

#: the largest difference allowed between the training losses of 2 ranks and of 1 process
#: with --update-freq 2 at the same update. The batches are the same and dropout is off (each
#: rank would draw its own masks), so only the order of the sums differs (gloo's all-reduce):
#: fairseq prints the loss with 3 decimals, and the gap stays in the last of them
LOSS_TOLERANCE = 0.005
_INNER = re.compile(r"train_inner \| .*? loss=([\d.]+), .*?num_updates=(\d+)")


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    return preprocess(make_tiny_corpus(root / "raw", train=160, valid=8), root / "data-bin")


def _train(data: Path, save: Path, arch: str, updates: int, *extra: str) -> str:
    cmd = [sys.executable, "-m", "localnmt.runs.train", "--data", str(data), "--save-dir",
           str(save), "--arch", arch, "--size", "tiny", "--layers", "3", "--cpu",
           "--max-update", str(updates), *extra[:extra.index("--")],
           "--", "--seed", "3", "--log-interval", "1", "--max-tokens", "300", "--dropout", "0",
           *extra[extra.index("--") + 1:]]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return (save / "train.log").read_text(encoding="utf-8")


def _losses(log: str) -> dict[int, float]:
    return {int(u): float(loss) for loss, u in _INNER.findall(log)}


def test_two_ranks_train_stop_resume_and_match_one_process(data_bin, tmp_path) -> None:
    two = tmp_path / "two"
    first = _train(data_bin, two, "localnmt_base", 3, "--procs", "2", "--")
    assert "distributed init (rank 1): env://" in first  # two processes really ran
    assert sorted(_losses(first)) == [1, 2, 3]
    resumed = _train(data_bin, two, "localnmt_base", 6, "--procs", "2", "--")
    # the second run is a resume: rank 0 loaded the checkpoint and broadcast it to rank 1
    assert "Loaded checkpoint" in resumed.split("$ ")[-1]
    assert "WeightsUnpickler" not in resumed and "Unsupported global" not in resumed
    ranks = _losses(resumed)
    one = _losses(_train(data_bin, tmp_path / "one", "localnmt_base", 6, "--", "--update-freq",
                         "2"))  # fmt: skip
    assert sorted(ranks) == sorted(one) == list(range(1, 7))
    for update, loss in one.items():
        assert abs(ranks[update] - loss) <= LOSS_TOLERANCE, (update, ranks[update], loss)
    # rank 0 alone writes checkpoints: one set of files, no second writer's temporaries
    names = sorted(p.name for p in two.iterdir() if p.suffix == ".pt")
    assert "checkpoint_last.pt" in names and not list(two.glob(".*.tmp*"))


@pytest.mark.parametrize("arch", ["yang2018_localness_base", "zhang2021_gmm_base"])
def test_locality_methods_train_on_two_ranks(data_bin, tmp_path, arch) -> None:
    ranks = _losses(_train(data_bin, tmp_path / "two", arch, 3, "--procs", "2", "--"))
    one = _losses(_train(data_bin, tmp_path / "one", arch, 3, "--", "--update-freq", "2"))
    assert sorted(ranks) == sorted(one) == [1, 2, 3]
    for update, loss in one.items():
        assert abs(ranks[update] - loss) <= LOSS_TOLERANCE, (arch, update, ranks[update], loss)
