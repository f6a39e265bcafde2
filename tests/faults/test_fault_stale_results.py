"""Reruns after the data changed: two lines of the training data swapped (every file keeps its
size) used to be reported as `[skip] train ... already done`, and after the references changed
the BLEU column stayed cached while the p-value was computed anew. Now every step is keyed by
the contents of what it reads, so a rerun retrains or rescores exactly what depends on the
change, and a report comes from one set of runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localnmt.evaluation.metrics import BleuResult
from localnmt.evaluation.results import Scored, Scores, write_scores
from localnmt.runs import experiment, train_run
from localnmt.runs.experiment import TestSet, TranslationEvaluation, train_and_score
from localnmt.runs.layout import RunLayout
from localnmt.runs.run_specs import TrainSpec
from localnmt.steps import StepRunner
from localnmt.testing import make_tiny_corpus, preprocess


@pytest.fixture()
def calls(monkeypatch) -> dict[str, list]:
    """fairseq's training and the translation replaced by recorders (what matters here is
    which steps run, not what they compute)."""
    seen: dict[str, list] = {"train": [], "evaluate": []}

    def fake_training(cmd, log_path, **kwargs):
        save = Path(cmd[cmd.index("--save-dir") + 1])
        save.mkdir(parents=True, exist_ok=True)
        (save / "checkpoint_last.pt").write_text(f"model {len(seen['train'])}")
        seen["train"].append(cmd)
        return 0

    def fake_scoring(data_bin, checkpoint, out_dir, test, decode, *, user_dir) -> Scores:
        out_dir.mkdir(parents=True, exist_ok=True)
        refs = Path(test.ref).read_text()
        bleu = BleuResult(1.0, [1.0] * 4, 1.0, 1, 1, "sig", "BLEU = 1.0")
        scores = Scores(1, bleu, bleu, scored=Scored(checkpoint.read_text(), None, "de", refs))
        write_scores(out_dir / "scores.json", scores)
        seen["evaluate"].append(scores)
        return scores

    monkeypatch.setattr(train_run, "run_logged", fake_training)
    monkeypatch.setattr(experiment, "score_checkpoint", fake_scoring)
    return seen


def _corpus(root: Path) -> tuple[Path, Path]:
    raw = make_tiny_corpus(root / "raw", train=60, valid=6)
    return raw, preprocess(raw, root / "data-bin")


def _run(data: Path, ref: Path, run_dir: Path) -> Scores:
    layout = RunLayout.under(run_dir)
    spec = TrainSpec(data=str(data), save_dir=str(layout.checkpoints), arch="transformer",
                     size="tiny", cpu=True, user_dir="none")  # fmt: skip
    result = train_and_score(spec, layout, StepRunner(run_dir, log=lambda m: None),
                             evaluation=TranslationEvaluation(TestSet("test", ref=ref)),
                             log=lambda m: None)  # fmt: skip
    return result.scores


def test_swapped_training_lines_retrain_and_rescore(tmp_path, calls) -> None:
    raw, data = _corpus(tmp_path)
    ref = raw / "test.tgt"
    first = _run(data, ref, tmp_path / "run")
    assert _run(data, ref, tmp_path / "run") == first  # unchanged: nothing runs again
    assert len(calls["train"]) == 1 and len(calls["evaluate"]) == 1
    lines = (raw / "train.src").read_text().splitlines()
    i = next(i for i in range(len(lines) - 1) if lines[i] != lines[i + 1])
    lines[i], lines[i + 1] = lines[i + 1], lines[i]  # same bytes, other order
    (raw / "train.src").write_text("\n".join(lines) + "\n")
    sizes = {p.name: p.stat().st_size for p in data.iterdir()}
    shutil.rmtree(data)
    preprocess(raw, data)
    assert {p.name: p.stat().st_size for p in data.iterdir()} == sizes  # no size changed
    again = _run(data, ref, tmp_path / "run")
    assert len(calls["train"]) == 2 and len(calls["evaluate"]) == 2  # retrained, rescored
    assert again.scored.checkpoint == "model 1"


def test_changed_references_rescore_without_retraining(tmp_path, calls) -> None:
    raw, data = _corpus(tmp_path)
    ref = raw / "test.tgt"
    _run(data, ref, tmp_path / "run")
    ref.write_text(ref.read_text().replace("t1", "t2", 1))
    again = _run(data, ref, tmp_path / "run")
    assert len(calls["train"]) == 1 and len(calls["evaluate"]) == 2
    assert (
        again.scored.references == ref.read_text()
    )  # scored against the references as they are now


def test_a_moved_data_bin_is_still_the_same_data(tmp_path, calls) -> None:
    raw, data = _corpus(tmp_path)
    _run(data, raw / "test.tgt", tmp_path / "run")
    moved = Path(shutil.copytree(data, tmp_path / "elsewhere"))
    _run(moved, raw / "test.tgt", tmp_path / "run")
    assert len(calls["train"]) == 1 and len(calls["evaluate"]) == 1
