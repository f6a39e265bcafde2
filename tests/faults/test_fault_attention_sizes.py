"""Size options of the attention methods: bounded by the model's positions, and refused when
what they imply in memory cannot fit, before anything trains (issue: ``gmm[k=100000]`` built
the model, trained, grew to 23 GB and was killed by the kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localnmt import machine
from localnmt.attention import SpecError
from localnmt.attention.context import AttentionSite
from localnmt.attention.spec import parse_spec, validate_specs
from localnmt.errors import UsageError
from localnmt.runs import preflight, train
from localnmt.runs.run_specs import TrainSpec
from localnmt.testing import exit_status

ENCODER = AttentionSite("encoder_self", 0, num_layers=1, embed_dim=64, num_heads=4)
CROSS = AttentionSite("cross", 0, num_layers=1, embed_dim=64, num_heads=4)


@pytest.mark.parametrize(
    ("spec", "site", "message"),
    [
        ("gmm[k=100000]", CROSS, "option 'k' of method 'gmm' is 100000, more than the 1024 max "
         "positions of cross attention; use at most 1024"),
        ("block[block=5000]", ENCODER, "option 'block' of method 'block' is 5000, more than"),
        ("localness[window=fixed,fixed_size=5000]", ENCODER,
         "option 'fixed_size' of method 'localness' is 5000, more than the 1024"),
        ("localness[head_max=1e6]", ENCODER, r"option 'head_max' of method 'localness' is 1e\+06"),
        ("local_hard[half_window=2000]", ENCODER,
         "option 'half_window' of method 'local_hard' is 2000, more than"),
        ("local_heads[masks=band5000*4]", ENCODER, "mask 'band5000' of method 'local_heads' "
         "reaches 5000 positions away, more than the 1024 max positions of encoder_self "
         "attention; use K <= 1024"),
        ("local_heads_renorm[masks=global*1000000000]", ENCODER,
         "repeat 'global\\*1000000000' in masks is more than 1024 heads"),
    ],
)  # fmt: skip
def test_a_size_option_beyond_the_model_is_refused_before_any_module(spec, site, message):
    with pytest.raises(SpecError, match=message):
        validate_specs(parse_spec(spec), site)


@pytest.mark.parametrize(
    "spec", ["gmm[k=1024]", "block[block=1024]", "local_heads[masks=band1024*4]"]
)
def test_the_largest_size_the_model_allows_is_accepted(spec) -> None:
    site = CROSS if spec.startswith("gmm") else ENCODER
    validate_specs(parse_spec(spec), site)


def _spec(data: Path, tmp_path: Path, flag: str, modifiers: str, **more) -> TrainSpec:
    save_dir = str(tmp_path / "ck")
    return TrainSpec(data=str(data), save_dir=save_dir, arch="localnmt_base", size="tiny",
                     cpu=True, max_update=2, extra=(flag, modifiers), **more)  # fmt: skip


def test_the_issue_case_stops_localnmt_train_in_one_line(tiny_data, tmp_path, capsys) -> None:
    argv = ["--data", str(tiny_data), "--save-dir", str(tmp_path / "ck"), "--cpu", "--size",
            "tiny", "--max-update", "2", "--", "--cross-attn-modifiers",
            "gmm[k=100000]"]  # fmt: skip
    assert exit_status(train.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "localnmt-train: error: option 'k' of method 'gmm' is 100000, more than the 1024 max "
        "positions of cross attention; use at most 1024"
    )
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_options_that_cannot_fit_in_memory_are_refused(tiny_data, tmp_path, monkeypatch):
    """``gmm[k=1000]`` is within the bounds, but with 200000-token batches its densities
    alone need 4 bytes x 1000 components x 4 heads x 200000 tokens x 15 keys (the longest
    sentence of the tiny data) in each of the tiny recipe's 6 decoder layers."""
    monkeypatch.setattr(machine, "available_memory", lambda: 20 * 10**9)
    spec = _spec(tiny_data, tmp_path, "--cross-attn-modifiers", "gmm[k=1000]", max_tokens=200000)
    with pytest.raises(UsageError) as err:
        preflight.check_training(spec, gpus=0)
    assert str(err.value) == (
        "gmm[k=1000] at cross attention needs at least 288.0 GB for a training batch of 200000 "
        "tokens (sentences up to 15 tokens), more than the 20.0 GB this machine has available; "
        "make the size options of gmm smaller, or --max-tokens"
    )


def test_a_predictor_of_a_billion_units_is_refused(tiny_data, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(machine, "available_memory", lambda: 20 * 10**9)
    spec = _spec(tiny_data, tmp_path, "--encoder-attn-modifiers", "neighbor[hidden=1000000000]")
    with pytest.raises(UsageError, match=r"^neighbor\[hidden=1000000000\] at encoder-self "
                       r"attention needs at least \d+\.\d GB"):  # fmt: skip
        preflight.check_training(spec, gpus=0)


def test_the_papers_sizes_pass_on_this_machine(tiny_data, tmp_path) -> None:
    assert machine.available_memory() > 0
    preflight.check_training(_spec(tiny_data, tmp_path, "--cross-attn-modifiers", "gmm"), gpus=0)


def test_more_cpu_processes_than_cores_are_refused(tiny_data, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(preflight.os, "cpu_count", lambda: 2)
    spec = _spec(tiny_data, tmp_path, "--cross-attn-modifiers", "gmm", procs=64)
    with pytest.raises(UsageError) as err:
        preflight.check_training(spec, gpus=0)
    assert str(err.value) == (
        "--procs 64 is more than the 2 cores of this machine: the processes would share them "
        "and train slower than --procs 2; use at most --procs 2"
    )


@pytest.mark.parametrize("spec", ["localness[window=head]", "localness[window=fixed]", "block",
                                  "local_hard", "gmm"])  # fmt: skip
def test_a_methods_defaults_pass_on_a_model_of_few_positions(spec) -> None:
    """A window default wider than a small model's positions is no error (it changes nothing)."""
    kind = "cross" if spec == "gmm" else "encoder_self"
    validate_specs(parse_spec(spec), AttentionSite(kind, 0, 1, 16, 4, max_positions=14))


def test_gpu_trainings_are_checked_against_their_gpus_memory(tiny_data, tmp_path, monkeypatch):
    """One process per GPU: the options' memory against the free memory of the GPU with the
    least (here a stand-in for a GPU with 2 GB free)."""
    monkeypatch.setattr(machine, "gpu_available_memory", lambda: 2 * 10**9)
    spec = _spec(tiny_data, tmp_path, "--cross-attn-modifiers", "gmm[k=1000]", max_tokens=200000)
    with pytest.raises(UsageError, match="more than the 2.0 GB its GPU has free"):
        preflight.check_training(spec, gpus=1)
    monkeypatch.setattr(machine, "gpu_available_memory", lambda: None)  # no GPU seen: no check
    preflight.check_training(spec, gpus=1)
