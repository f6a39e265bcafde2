"""Fixtures of the fault tests: crafted and damaged checkpoints, a model with few positions."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch


class Payload:
    """Unpickling this runs ``touch MARKER`` (what a crafted checkpoint would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def write_crafted(path: Path, marker: Path, *, legacy: bool = False) -> Path:
    """A file that looks like a fairseq checkpoint and runs ``touch marker`` when unpickled:
    in torch's zip format, or (``legacy``) a bare pickle as old ``torch.save`` wrote."""
    if legacy:  # no tensors: a bare pickle of one would name torch.storage._load_from_bytes
        with open(path, "wb") as f:
            pickle.dump({"model": {}, "args": None, "cfg": {"model": Payload(marker)}}, f, 2)
    else:
        model = {"w": torch.zeros(2)}
        torch.save({"model": model, "args": None, "cfg": {"model": Payload(marker)}}, path)
    return path


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Where a crafted checkpoint's payload would leave its trace."""
    return tmp_path / "MARKER"


@pytest.fixture(scope="session")
def few_positions_model(tiny_data, tmp_path_factory) -> Path:
    """A tiny model trained with 10 source and target positions: some sentences of the tiny
    test set (up to 15 tokens) are longer than that."""
    from localnmt import testing

    save_dir = tmp_path_factory.mktemp("few_positions")
    extra = ["--max-source-positions", "10", "--max-target-positions", "10"]
    return testing.train(tiny_data, save_dir, "localnmt_base", extra, max_update=2).checkpoint
