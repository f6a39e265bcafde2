"""Weights-only loading (localnmt.safe_load): its allow-list covers what fairseq checkpoints
hold, argparse-era, hydra-era and with numpy metrics, and nothing else is needed."""

from __future__ import annotations

import argparse
import collections
import fractions
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from localnmt import convert_checkpoint
from localnmt.safe_load import load_checkpoint


def test_a_real_checkpoint_converts_weights_only(tiny_data, tmp_path) -> None:
    from localnmt import testing

    ckpt = testing.train(tiny_data, tmp_path / "ck", "transformer", max_update=1).checkpoint
    out = tmp_path / "converted.pt"
    convert_checkpoint.main([str(ckpt), str(out), "--arch", "localnmt_base"])
    assert load_checkpoint(Path(out))["cfg"]["model"].arch == "localnmt_base"


def test_hydra_era_configs_and_numpy_metrics_load(tmp_path) -> None:
    """A DictConfig ``cfg`` (fairseq 0.10-style checkpoints) and the numpy arrays and scalars
    of ``--eval-bleu`` metrics: every global they name is on the list, and they load."""
    cfg = OmegaConf.create({"model": {"_name": "transformer", "max_source_positions": 1024,
                                      "layers": [1, 2]}, "task": {"data": "bin"}})  # fmt: skip
    metrics = collections.OrderedDict(
        valid={"_bleu_counts": np.array([3, 2, 1, 0], dtype=np.int64),
               "_bleu_totals": np.array([4.0, 3.0, 2.0, 1.0]), "best": np.float64(0.5)},
    )  # fmt: skip
    state = {"cfg": cfg, "args": argparse.Namespace(arch="transformer"),
             "model": {"w": torch.ones(2)}, "extra_state": {"metrics": metrics}}  # fmt: skip
    path = tmp_path / "old_style.pt"
    torch.save(state, path)
    unsafe = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)  # >= 2.5
    if unsafe is not None:  # globals not yet allowed (importing localnmt registered them): none
        assert unsafe(str(path)) == []
    loaded = load_checkpoint(path)
    assert loaded["cfg"].model.layers[1] == 2
    assert loaded["extra_state"]["metrics"]["valid"]["_bleu_counts"].tolist() == [3, 2, 1, 0]


@pytest.mark.skipif(
    not hasattr(torch.serialization, "add_safe_globals"),
    reason="torch < 2.4 has no allow-list (and fairseq's loads are not weights-only before 2.6)",
)
def test_loading_keeps_the_globals_registered_for_fairseq(tmp_path) -> None:
    """After a check, fairseq's own (default weights-only) loads still accept Namespace."""
    path = tmp_path / "ns.pt"
    torch.save({"args": argparse.Namespace(arch="x"), "model": {}}, path)
    load_checkpoint(path)
    assert torch.load(path, weights_only=True)["args"].arch == "x"


def test_the_allow_list_holds_on_a_torch_without_one(tmp_path, monkeypatch) -> None:
    """The unpickler used before torch 2.4 (no ``add_safe_globals``) loads what the list
    allows and refuses anything else, on whichever torch runs the test."""
    from localnmt import safe_load

    monkeypatch.delattr(torch.serialization, "add_safe_globals", raising=False)
    ok, bad = tmp_path / "ok.pt", tmp_path / "bad.pt"
    torch.save({"args": argparse.Namespace(arch="x"), "model": {"w": torch.ones(2)}}, ok)
    torch.save({"model": {}, "cfg": fractions.Fraction(1, 3)}, bad)
    assert load_checkpoint(ok)["args"].arch == "x"
    with pytest.raises(safe_load.CheckpointError, match="its pickle asks for fractions.Fraction"):
        load_checkpoint(bad)
