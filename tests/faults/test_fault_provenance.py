"""Every checkpoint knows where it came from, and every command that uses one checks it: the
resume fallback ranks by the updates a file holds (not its date), translate and evaluate
refuse another run's dictionaries (the same words in another order give a model of the same
shape and garbage), and a score says how far its checkpoint was trained."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from localnmt import provenance, testing, translate
from localnmt.data.parallel import prepare_parallel
from localnmt.errors import CheckpointError
from localnmt.runs import average_checkpoints, checkpoint_files, decode_and_score
from localnmt.testing import exit_status

# --- 1: the resume fallback ------------------------------------------------------------------


def _save(path: Path, updates: int, mtime: int) -> Path:
    history = [{"num_updates": updates}]
    torch.save({"model": {"w": torch.zeros(2)}, "args": None, "optimizer_history": history},
               path)  # fmt: skip
    os.utime(path, (mtime, mtime))
    return path


def _argv(save_dir: Path) -> list[str]:
    return ["data", "--save-dir", str(save_dir)]


def test_the_fallback_resumes_the_most_trained_checkpoint_not_the_newest_file(tmp_path) -> None:
    """A copy that kept dates and a ``touch`` made the 20-update file the newest."""
    most = _save(tmp_path / "checkpoint_134_400.pt", 400, 1_000)
    _save(tmp_path / "checkpoint_133_396.pt", 396, 3_000)  # what a plain cp -r ordered
    _save(tmp_path / "checkpoint_7_20.pt", 20, 5_000)  # touched
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    said: list[str] = []
    assert checkpoint_files.resume_arguments(_argv(tmp_path), said.append) == [
        "--restore-file", str(most)]  # fmt: skip
    assert said[0].endswith(f"resuming from {most} (400 updates; no update lost) instead, the "
                            "most trained checkpoint that loads")  # fmt: skip


def test_a_fallback_that_loses_many_updates_needs_to_be_asked_for(tmp_path) -> None:
    (tmp_path / "checkpoint_134_400.pt").write_bytes(b"junk")  # damaged: its name says 400
    older = _save(tmp_path / "checkpoint_7_20.pt", 20, 5_000)
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    with pytest.raises(CheckpointError) as refused:
        checkpoint_files.resume_arguments(_argv(tmp_path), print)
    assert str(refused.value) == (
        f"{tmp_path}/checkpoint_last.pt: damaged or not a checkpoint (the file is empty or cut "
        f"short); use another checkpoint of the run; the most trained checkpoint that loads, "
        f"{older}, is 380 updates behind {tmp_path}/checkpoint_134_400.pt (400 updates); "
        "restore the newer file, or give --accept-lost-updates to resume from what loads"
    )
    said: list[str] = []
    got = checkpoint_files.resume_arguments(_argv(tmp_path), said.append, accept_loss=True)
    assert got == ["--restore-file", str(older)] and "380 updates behind" in said[0]
    older.write_bytes(b"junk")  # nothing loads: starting afresh loses all 400
    with pytest.raises(CheckpointError, match="starting afresh would be 400 updates behind"):
        checkpoint_files.resume_arguments(_argv(tmp_path), print)


# --- 2 and 6: dictionaries, subword models, scores -------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny En→De corpus through the parallel pipeline (BPE, localnmt_data.json) and a
    model trained on it for a few updates."""
    root = tmp_path_factory.mktemp("provenance")
    raw = testing.make_tiny_corpus(root / "tiny", train=200, valid=8)
    for split in ("train", "valid", "test"):
        for old, lang in (("src", "en"), ("tgt", "de")):
            (raw / f"{split}.{lang}").write_text((raw / f"{split}.{old}").read_text())
    data_bin = prepare_parallel("en", "de", str(raw / "train"), str(raw / "valid"),
                                [str(raw / "test")], root / "work", bpe_merges=50,
                                log=lambda m: None)  # fmt: skip
    result = testing.train(data_bin, root / "ckpt", "localnmt_base", max_update=3)
    return data_bin, result.checkpoint


def _copy(data_bin: Path, dest: Path) -> Path:
    """Another run's data-bin: a copy (the raw references beside it, too)."""
    shutil.copytree(data_bin.parent, dest)
    return dest / data_bin.name


def _reorder(dictionary: Path) -> None:
    """The same entries, the first two swapped: the same size, other words."""
    lines = dictionary.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    dictionary.write_text("".join(lines), encoding="utf-8")


def test_the_checkpoint_records_its_data_bins_digests(trained) -> None:
    data_bin, ckpt = trained
    held = provenance.recorded(torch.load(ckpt, weights_only=False))
    assert held["dictionaries"] == {
        name: provenance.sha256_file(data_bin / name) for name in ("dict.de.txt", "dict.en.txt")
    }
    assert list(held["subword_models"]) and held["data_bin"] == str(data_bin.resolve())


def test_translate_refuses_a_reordered_dictionary(trained, tmp_path, capsys) -> None:
    data_bin, ckpt = trained
    other = _copy(data_bin, tmp_path / "other")
    _reorder(other / "dict.de.txt")
    argv = ["--data-bin", str(other), "--path", str(ckpt), "--input", str(other.parent / "raw"
            / "test.en"), "--output", str(tmp_path / "hyp"), "--cpu"]  # fmt: skip
    assert exit_status(translate.main, argv) == 2
    err = capsys.readouterr().err.strip()
    digest = provenance.sha256_file
    assert err == (
        f"localnmt-translate: error: {ckpt} was trained with the dictionary "
        f"{data_bin.resolve()}/dict.de.txt (sha256 {digest(data_bin / 'dict.de.txt')[:12]}), not "
        f"with {other}/dict.de.txt (sha256 {digest(other / 'dict.de.txt')[:12]}): another run's "
        "file maps tokens to other words; give the data-bin it was trained on"
    )
    assert not (tmp_path / "hyp").exists()


def test_translate_refuses_another_subword_model(trained, tmp_path, capsys) -> None:
    data_bin, ckpt = trained
    other = _copy(data_bin, tmp_path / "other")
    model = next(p for p in other.iterdir() if p.name in provenance.recorded(
        torch.load(ckpt, weights_only=False))["subword_models"])  # fmt: skip
    _reorder(model)
    argv = [
        "--data-bin",
        str(other),
        "--path",
        str(ckpt),
        "--cpu",
        "--input",
        str(other.parent / "raw" / "test.en"),
    ]
    assert exit_status(translate.main, argv) == 2
    assert f"with the subword model {data_bin.resolve()}/{model.name}" in capsys.readouterr().err


def test_evaluate_refuses_a_reordered_dictionary(trained, tmp_path, capsys) -> None:
    data_bin, ckpt = trained
    other = _copy(data_bin, tmp_path / "other")
    _reorder(other / "dict.en.txt")
    argv = ["--data-bin", str(other), "--checkpoint", str(ckpt), "--out", str(tmp_path / "ev")]
    assert exit_status(decode_and_score.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(
            f"evaluate: error: {ckpt} was trained with "
            f"the dictionary {data_bin.resolve()}/dict.en.txt"
        )
        and "\n" not in err
    )
    assert f"not with {other}/dict.en.txt" in err
    assert not (tmp_path / "ev" / "scores.json").exists()


def test_a_checkpoint_without_digests_still_loads_with_a_note(trained, tmp_path, capsys) -> None:
    data_bin, ckpt = trained
    state = torch.load(ckpt, weights_only=False)
    del state[provenance.KEY]
    old = tmp_path / "old.pt"
    torch.save(state, old)
    argv = [
        "--data-bin",
        str(data_bin),
        "--path",
        str(old),
        "--cpu",
        "--input",
        str(data_bin.parent / "raw" / "test.en"),
        "--output",
        str(tmp_path / "hyp"),
    ]
    assert exit_status(translate.main, argv) == 0
    assert capsys.readouterr().err.splitlines()[0] == (
        f"note: {old} records no digests of its dictionaries (written before checkpoints "
        f"did): {data_bin}'s are not checked against it"
    )
    assert (tmp_path / "hyp").read_text().count("\n") == 8


def test_averaging_refuses_checkpoints_of_other_dictionaries(trained, tmp_path, capsys) -> None:
    _, ckpt = trained
    state = torch.load(ckpt, weights_only=False)
    state[provenance.KEY]["dictionaries"]["dict.de.txt"] = "0" * 64
    other = tmp_path / "other.pt"
    torch.save(state, other)
    argv = ["--inputs", str(ckpt), str(other), "--output", str(tmp_path / "avg.pt")]
    assert exit_status(average_checkpoints.main, argv) == 2
    err = capsys.readouterr().err
    assert f"error: {other} was trained with another dict.de.txt (sha256 000000000000) than "\
           f"{ckpt}" in err and not (tmp_path / "avg.pt").exists()  # fmt: skip


def test_scores_say_how_far_the_checkpoint_was_trained(trained, tmp_path, capsys) -> None:
    """A run stopped at 3 of 2000 updates: scored, and marked unfinished."""
    data_bin, ckpt = trained
    state = torch.load(ckpt, weights_only=False)
    state["cfg"]["optimization"]["max_update"] = 2000
    stopped = tmp_path / "run" / "checkpoint_best.pt"
    stopped.parent.mkdir()
    torch.save(state, stopped)
    out = tmp_path / "ev"
    argv = ["--data-bin", str(data_bin), "--checkpoint", str(stopped), "--out", str(out)]
    assert exit_status(decode_and_score.main, argv) == 0
    scores = json.loads((out / "scores.json").read_text())
    assert scores["training"] == {"checkpoint": str(stopped), "updates": 3, "max_update": 2000,
                                  "finished": False}  # fmt: skip
    assert f"checkpoint {stopped}: 3 of 2000 updates, UNFINISHED run" in capsys.readouterr().out
    finished = provenance.training_record(ckpt, torch.load(ckpt, weights_only=False))
    assert finished["finished"] is True and finished["max_update"] == 3


def test_reports_mark_a_checkpoint_of_an_unfinished_run() -> None:
    from localnmt.evaluation.results import TrainingRecord
    from localnmt.quickstart.report import SeedRun, SystemResult
    from localnmt.runs.reproduce.results_markdown import RowResult, results_table

    stopped = {"checkpoint": "c.pt", "updates": 95, "max_update": 2000, "finished": False}
    record = TrainingRecord.from_json(stopped)
    table = results_table([RowResult(name="a", row="Baseline", bleu=1.0, training=record)])
    assert "| Baseline (unfinished: 95 of 2000 updates) |" in table
    run = SeedRun(1, 1.0, 95, 1.0, None, None, training=TrainingRecord.from_json(stopped))
    system = SystemResult("a", "Baseline", "transformer", [], 1.0, [0.5, 1.5], None, 95, None,
                          None, seeds=[run])  # fmt: skip
    assert system.unfinished == [run] and system.to_dict()["seeds"][0]["training"] == stopped
