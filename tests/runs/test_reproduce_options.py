"""reproduce's command line, typed: parse_args gives a ReproduceOptions, the training and
decoding options reach their specs, a bad decoding option stops at parsing, and no module
below the command line takes an argparse Namespace."""

import inspect
from pathlib import Path

import pytest

from localnmt.catalog import CatalogRow
from localnmt.catalog.tasks import GLUE_TASKS
from localnmt.runs import reproduce
from localnmt.runs.reproduce import page, plan, reproduce_cli, table_runs
from localnmt.runs.reproduce.reproduce_options import (
    DECODE_OPTIONS,
    TRAIN_OPTIONS,
    ReproduceOptions,
)
from localnmt.runs.run_specs import DecodeSpec, TrainSpec


def test_every_option_lands_in_its_field() -> None:
    argv = ["yang2018", "Table 4", "--tiny", "--task", "all", "--data", "D", "--data-root", "R",
            "--pair", "en-zh", "--max-train", "50", "--bpe-merges", "300", "--subset", "valid",
            "--ref", "ref.de", "--src", "src.en", "--score-against-targets", "--refs-dir", "rd",
            "--catalog-json", "c.json", "--baseline", "b", "--workdir", "W", "--results-dir",
            "O", "--max-update", "7", "--max-tokens", "900", "--layers", "2", "--gpus", "3",
            "--bf16", "--average", "5", "--beam", "6", "--lenpen", "1.5", "--max-len-a", "1.2",
            "--max-len-b", "10", "--bpe", "sentencepiece", "--detok", "none", "--rescore",
            "--glue-tasks", "SST-2", "QQP", "--glue-grid", "--", "--seed", "3"]  # fmt: skip
    assert reproduce.parse_args(argv) == ReproduceOptions(
        paper="yang2018", table="Table 4", tiny=True, task="all", data="D", data_root="R",
        pair="en-zh", max_train=50, bpe_merges=300, subset="valid", ref="ref.de",
        src="src.en", score_against_targets=True, refs_dir="rd", catalog_json=Path("c.json"),
        baseline="b", workdir="W", results_dir="O", max_update=7, max_tokens=900, layers=2,
        gpus=3, cpu=False, precision="bf16", average=5,
        decode=DecodeSpec(beam=6, lenpen=1.5, max_len_a=1.2, max_len_b=10,
                          bpe="sentencepiece", detok="none"),
        rescore=True, glue_tasks=("SST-2", "QQP"), glue_grid=True, extra=("--seed", "3"),
    )  # fmt: skip


def test_defaults() -> None:
    opts = reproduce.parse_args(["vaswani2017", "Table 3", "--dry-run", "--cpu"])
    assert opts == ReproduceOptions("vaswani2017", "Table 3", dry_run=True, cpu=True)
    assert (opts.data_root, opts.workdir, opts.results_dir) == (
        "runs/data", "runs/reproduce", "results")  # fmt: skip
    assert opts.decode == DecodeSpec() and opts.glue_tasks == GLUE_TASKS and opts.extra == ()


def test_training_options_reach_the_row_spec(tmp_path) -> None:
    row = CatalogRow.from_args(("--x", "1"), paper="yang2018", table="T", name="n", row="N",
                               size="base", arch="localnmt_base")  # fmt: skip
    argv = ["yang2018", "T", "--max-update", "7", "--max-tokens", "900", "--layers", "2",
            "--gpus", "3", "--fp16", "--", "--y"]  # fmt: skip
    spec = reproduce.row_spec(row, "BIN", tmp_path, "tiny", reproduce.parse_args(argv))
    assert spec == TrainSpec(
        data="BIN", save_dir=str(tmp_path / "checkpoints"), arch="localnmt_base", size="tiny",
        max_update=7, max_tokens=900, layers=2, gpus=3, precision="fp16",
        extra=("--x", "1", "--y"),
    )  # fmt: skip
    opts = reproduce.parse_args(argv)
    assert set(TRAIN_OPTIONS) <= set(vars(opts))
    assert set(DECODE_OPTIONS) <= set(vars(opts.decode))


def test_a_bad_decoding_option_stops_at_parsing(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        reproduce_cli.main(["vaswani2017", "Table 3", "--dry-run", "--cpu", "--beam", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr()
    assert err.err.strip() == "reproduce: error: --beam must be at least 1, got 0"
    assert err.out == ""  # no command printed


def test_single_task_flags() -> None:
    opts = ReproduceOptions("p", "T", data="D", refs_dir="r", pair="en-de")
    assert opts.single_task_flags() == ["--data", "--refs-dir", "--pair"]
    assert ReproduceOptions("p", "T", tiny=True, subset="valid").single_task_flags() == []


def test_no_module_below_the_command_line_takes_a_namespace() -> None:
    for module in (plan, table_runs, page):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__:
                continue
            for param in inspect.signature(function).parameters.values():
                assert "Namespace" not in str(param.annotation), f"{module.__name__}.{name}"


def test_every_declared_option_is_on_the_command_line() -> None:
    """A field declared as an option but left out of build_parser would keep its default
    whatever the command line says."""
    from localnmt import fields

    dests = {a.dest for a in reproduce_cli.build_parser()._actions}
    declared = [f.name for f, _ in fields.declared(ReproduceOptions)]
    assert declared and set(declared) <= dests
    plain = {"paper", "table", "data_root", "workdir", "results_dir", *TRAIN_OPTIONS,
             "glue_tasks", "glue_grid"}  # fmt: skip
    assert plain <= dests


def test_an_unknown_baseline_stops_in_one_line_before_any_work(capsys, tmp_path) -> None:
    """It used to end in a KeyError traceback (after preparing the data, without
    --dry-run)."""
    with pytest.raises(SystemExit) as exc:
        reproduce_cli.main(["vaswani2017", "Table 3", "--cpu", "--baseline", "nosuch",
                            "--workdir", str(tmp_path / "w"),
                            "--data-root", str(tmp_path)])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("reproduce: error: --baseline 'nosuch' is not a row")
    assert not (tmp_path / "w").exists()
