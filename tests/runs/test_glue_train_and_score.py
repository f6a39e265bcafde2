"""A GLUE row goes through the same train-then-evaluate as a translation row:
train_and_score runs its commands as training steps (pre-training first), then its typed
evaluation reads each task's dev accuracy from the fine-tuning logs."""

from __future__ import annotations

from localnmt.catalog import all_rows
from localnmt.runs import train_run
from localnmt.runs.experiment import train_and_score
from localnmt.runs.glue_runs import GlueEvaluation, GlueTaskScore, plan_row, training_commands
from localnmt.runs.layout import RunLayout
from localnmt.steps import StepRunner

_VALID = "epoch 001 | valid on 'valid' subset | loss 0.7 | accuracy {} | num_updates 3\n"


def test_a_glue_row_trains_its_steps_then_reads_the_dev_accuracy(tmp_path, monkeypatch) -> None:
    data, run_dir = tmp_path / "glue", tmp_path / "work" / "row"
    for folder in ("pretrain", "SST-2"):
        (data / folder).mkdir(parents=True)
        (data / folder / "dict.txt").write_text(f"{folder} 1\n")
    row = next(r for r in all_rows() if r.arch == "pande2021_bert_band6_120tied")
    plan = plan_row(row, data, run_dir, tasks=("SST-2",), tiny=True, cpu=True)
    outputs = {tuple(step.cmd): step.output for step in plan.steps}
    launched: list[list[str]] = []

    def fake_training(cmd, log_path, **kwargs) -> int:
        """fairseq's training replaced: the step's checkpoint, a validation line."""
        outputs[tuple(cmd)].parent.mkdir(parents=True, exist_ok=True)
        outputs[tuple(cmd)].write_text("checkpoint")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(_VALID.format(71.5) if "glue_finetune" in " ".join(cmd) else "")
        launched.append(cmd)
        return 0

    monkeypatch.setattr(train_run, "run_logged", fake_training)
    messages: list[str] = []

    def run() -> dict[str, GlueTaskScore] | None:
        commands = training_commands(plan, run_dir, tmp_path / "work")
        runner = StepRunner(run_dir, log=messages.append)
        result = train_and_score(commands, RunLayout.under(run_dir), runner,
                                 evaluation=GlueEvaluation(plan), log=messages.append)  # fmt: skip
        return result.scores

    scores = run()
    assert launched == [s.cmd for s in plan.steps]  # pre-training, then SST-2
    assert scores is not None and scores["SST-2"].accuracy == 71.5
    assert scores["SST-2"].to_json() == {
        "accuracy": 71.5, "settings": [{"batch_size": 32, "lr": "1e-4", "valid": 71.5}],
        "batch_size": 32, "lr": "1e-4",
    }  # fmt: skip
    assert any(m.startswith("  finetune SST-2: $ ") for m in messages)
    assert run() == scores and len(launched) == 2  # unchanged: no step runs again
