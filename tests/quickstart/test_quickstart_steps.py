"""Quickstart pieces without real training: rerun decisions, Ctrl-C, errors, timed validation,
the report's rendering."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from localnmt.catalog import CatalogRow, load_rows
from localnmt.errors import UsageError
from localnmt.machine import MachineSummary
from localnmt.quickstart import cli, training
from localnmt.quickstart.report import SystemResult, write_json, write_markdown, write_plot
from localnmt.quickstart.run_record import Allotment, Corpus, CorpusSizes, QuickstartRun
from localnmt.quickstart.sizing import load_sizings, sizings
from localnmt.runs import timed_validation, train_run
from localnmt.runs.layout import RunLayout
from localnmt.runs.timed_validation import CurvePoint
from localnmt.steps import StepRunner


@pytest.fixture()
def fake_training(monkeypatch):
    """Replace the fairseq subprocess by one that writes a checkpoint and a curve point."""
    calls = []

    def run_logged(cmd, log_path, **kwargs):
        save_dir = Path(cmd[cmd.index("--save-dir") + 1])
        save_dir.mkdir(parents=True, exist_ok=True)
        (save_dir / "checkpoint_last.pt").write_text("x")
        Path(cmd[cmd.index("--curve") + 1]).write_text(
            '{"minutes": 1, "updates": 5, "valid_loss": 3.0}\n'
        )
        calls.append(cmd)
        return 0

    monkeypatch.setattr(train_run, "run_logged", run_logged)
    # the data-bins here are stand-ins (the step logic is under test, not fairseq's files)
    monkeypatch.setattr(train_run, "check_training", lambda spec, gpus: None)
    return calls


def _train(tmp_path: Path, data: Path, minutes: float, args=("--lr", "1")) -> None:
    """The training step of a quickstart system (no translation)."""
    layout = RunLayout.for_system(tmp_path / "w", "sys")
    row = SimpleNamespace(name="sys", arch="localnmt_base", args=tuple(args))
    spec = training.system_spec(row, sizings()["cpu"], data, layout, cpu=True, max_update=100)
    spec = training.scheduled(spec, layout, training.Schedule(8, minutes=minutes))
    train_run.train_run(spec, layout, StepRunner(layout.root, log=lambda m: None),
                        log=lambda m: None)  # fmt: skip


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "bin"
    data.mkdir()
    (data / "dict.en.txt").write_text("a 1\n")
    (data / "train.en-de.en.bin").write_bytes(b"12")
    return data


def test_rerun_reuses_unchanged_and_retrains_changed(tmp_path: Path, fake_training) -> None:
    data = _data(tmp_path)
    _train(tmp_path, data, 2.0)
    _train(tmp_path, data, 2.0)
    assert len(fake_training) == 1  # identical settings: reused
    _train(tmp_path, data, 3.0)  # a larger budget retrains
    _train(tmp_path, data, 3.0, args=("--lr", "2"))  # so does any training option
    (data / "dict.en.txt").write_text("a 1\nb 1\n")
    _train(tmp_path, data, 3.0, args=("--lr", "2"))  # and other data
    assert len(fake_training) == 4
    kept = list(RunLayout.for_system(tmp_path / "w", "sys").stale(None).parent.iterdir())
    assert len(kept) == 3  # the earlier runs are kept aside, not deleted
    assert all((k / "curve.jsonl").exists() for k in kept)  # each with its own curve


def test_interrupted_run_resumes_with_same_settings(tmp_path: Path, monkeypatch) -> None:
    data = _data(tmp_path)
    seen = []

    def interrupted(cmd, log_path, **kwargs):
        save_dir = Path(cmd[cmd.index("--save-dir") + 1])
        save_dir.mkdir(parents=True, exist_ok=True)
        (save_dir / "checkpoint_last.pt").write_text("partial")
        seen.append(cmd)
        raise KeyboardInterrupt

    monkeypatch.setattr(train_run, "check_training", lambda spec, gpus: None)  # stand-in bin
    monkeypatch.setattr(train_run, "run_logged", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, data, 2.0)
    monkeypatch.undo()
    monkeypatch.setattr(train_run, "check_training", lambda spec, gpus: None)

    def finish(cmd, log_path, **kwargs):
        save_dir = Path(cmd[cmd.index("--save-dir") + 1])
        assert (save_dir / "checkpoint_last.pt").read_text() == "partial"  # resumed, not reset
        assert kwargs["append"]  # the log goes on
        Path(cmd[cmd.index("--curve") + 1]).write_text(
            '{"minutes": 1, "updates": 5, "valid_loss": 3.0}\n'
        )
        return 0

    monkeypatch.setattr(train_run, "run_logged", finish)
    _train(tmp_path, data, 2.0)
    assert not RunLayout.for_system(tmp_path / "w", "sys").stale(None).parent.exists()


def test_ctrl_c_exits_130_without_traceback(monkeypatch, capsys, tmp_path: Path) -> None:
    def boom(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run", boom)
    assert cli.main(["--workdir", str(tmp_path)]) == 130
    assert "run the same command again to resume" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--data", "/nonexistent/bin"], "no such directory"),
        (["--budget-minutes", "0"], "must be positive"),
        (["--budget-minutes", "nan"], "must be positive and finite"),
        (["--equal", "time", "--updates", "10"], "--updates needs --equal updates"),
        (["--seeds", "0"], "--seeds must be at least 1"),
        (["--validations", "2"], "at least 5"),
    ],
)
def test_bad_options_exit_2(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_data_without_raw_references_is_refused(tmp_path: Path, tiny_data) -> None:
    import shutil

    data = Path(shutil.copytree(tiny_data, tmp_path / "bin"))
    assert "raw test references" in cli.check_data(data)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "test.tgt").write_text("x\n")
    assert cli.check_data(data) is None


def test_unknown_system_and_too_few_layers_stop_with_one_message() -> None:
    deep = ("--encoder-attn-modifiers", "localness[layers=1-6]")
    row = {"paper": "yang2018", "table": "T", "size": "base", "arch": "localnmt_base"}
    catalog = [CatalogRow.from_args((), name="base", row="B", **row),
               CatalogRow.from_args(deep, name="deep", row="D", **row)]  # fmt: skip
    with pytest.raises(UsageError, match=r"unknown system\(s\) nope"):
        cli.pick_systems(["base", "nope"], catalog, sizings()["cpu"])
    assert cli.pick_systems(["base"], catalog, sizings()["cpu"])[0].name == "base"
    with pytest.raises(UsageError, match="deep does not fit the tiny sizing"):
        cli.pick_systems(["base", "deep"], catalog, sizings()["tiny"])


def test_default_systems_fit_their_sizing() -> None:
    by_name = {row.name: row for row in load_rows()}
    for sizing in sizings().values():
        for name in sizing.systems:
            assert cli.fits(by_name[name], sizing) is None, name


class _Trainer:
    data_parallel_rank = 0

    def __init__(self, times):
        self.times, self.updates = iter(times), 0

    def cumulative_training_time(self):
        return next(self.times)

    def get_num_updates(self):
        return self.updates


def test_timed_validation_validates_once_per_interval(tmp_path: Path, monkeypatch) -> None:
    import fairseq_cli.train as train_cli

    seen = []

    def original(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        n = trainer.get_num_updates()
        every = cfg.dataset.validate_interval_updates
        due = every and n % every == 0
        seen.append((n, cfg.checkpoint.save_interval_updates))
        return ([2.5] if due else [None]), False

    monkeypatch.setattr(train_cli, "validate_and_save", original)
    curve = tmp_path / "curve.jsonl"
    timed_validation.install(curve, 1.0)  # every minute
    cfg = SimpleNamespace(dataset=SimpleNamespace(validate_interval_updates=0),
                          checkpoint=SimpleNamespace(save_interval_updates=0))  # fmt: skip
    seconds = [10, 50, 61, 70, 119, 125, 250]
    trainer = _Trainer(seconds)
    for _ in seconds:
        trainer.updates += 1
        train_cli.validate_and_save(cfg, trainer, None, None, ["valid"], False)
    points = timed_validation.read_curve(curve)
    # minute marks crossed at updates 3 (61 s), 6 (125 s) and 7 (250 s: marks 2 and 3 at once)
    assert [p.updates for p in points] == [3, 6, 7]
    assert [p.minutes for p in points] == pytest.approx([61 / 60, 125 / 60, 250 / 60], abs=1e-3)
    assert cfg.dataset.validate_interval_updates == 0  # restored after each forced validation
    assert [s for n, s in seen if n in (3, 6, 7)] == [3, 6, 7]  # and saved a checkpoint there


def _system(name: str, bleu: float, curve_losses) -> SystemResult:
    curve = [CurvePoint(i + 1.0, 10 * (i + 1), v) for i, v in enumerate(curve_losses)]
    return SystemResult(name=name, row=name.upper(), arch="a", args=[], bleu=bleu,
                        ci=[bleu - 1, bleu + 1], p_value=None if name == "base" else 0.02,
                        updates=curve[-1].updates, updates_per_s=1.5, params=1_234_567,
                        curve=curve)  # fmt: skip


def test_report_files(tmp_path: Path) -> None:
    systems = [_system("base", 12.0, [8, 6, 5]), _system("m1", 13.5, [8, 5.5, 4.8]),
               _system("m2", 0.4, [9, 9.2, 9.1])]  # fmt: skip
    meta = QuickstartRun(
        machine=MachineSummary("CPU X", 2, None, "2", "3.11", [0.5, 0.5, 0.5]),
        budget_minutes=24, equal="time", seeds=1, sizing="small model", device="cpu",
        bootstrap_samples=1000, allotment=Allotment(minutes_per_system=8),
        corpus=Corpus("gettext En→De", "UI strings", CorpusSizes(1, 1, 1000), "bin",
                      ("en", "de")),
        test_sentences=1000, signature="nrefs:1", load_average_end=(0.6, 0.5, 0.5),
        elapsed_minutes=27.0,
    )  # fmt: skip
    data = json.loads(write_json(tmp_path, systems, meta).read_text())
    assert [s["learned"] for s in data["systems"]] == [True, True, False]
    text = write_markdown(tmp_path, systems, meta).read_text()
    assert "| BASE (`base`) | 12.00 | 11.00–13.00 | - | 1.23M | 30 | - | 1.50 | 5.00 |" in text
    assert "| M1 (`m1`) | 13.50 | 12.50–14.50 | +1.50 (p=0.020) * |" in text
    assert "(0.40)" in text and "Did not learn in this budget" in text and "M2 (0.40)" in text
    assert "not** a reproduction of the papers' WMT results" in text
    assert write_plot(tmp_path, systems, meta).stat().st_size > 10_000


def test_sizing_file_errors_name_file_and_key(tmp_path: Path) -> None:
    from localnmt.config_files import ConfigError, config_dir

    text = (config_dir() / "quickstart.yaml").read_text()
    cases = [
        (text.replace("recipe: cpu", "recipe: cpux", 1),
         "sizings.cpu: key 'recipe': unknown recipe 'cpux'"),
        (text.replace("warmup: 20", "warmup: soon", 1),
         "sizings.tiny.overrides: key 'warmup' must be an integer"),
        (text.replace("warmup: 20", "warmpu: 20", 1), "sizings.tiny.overrides: unknown key"),
        (text.replace("bpe_merges: 4000", "bpe_merge: 4000", 1),
         "sizings.cpu: unknown key 'bpe_merge'"),
        (text.replace("dims: [32, 64, 4, 3]", "dims: [32, 64, 4, 2]", 1),
         "sizings.tiny: the model needs at least 3 layers"),
        (text.replace("  cuda:", "  gpu:", 1), "sizings.gpu: unknown sizing"),
    ]  # fmt: skip
    for i, (broken, message) in enumerate(cases):
        path = tmp_path / f"q{i}.yaml"
        path.write_text(broken)
        with pytest.raises(ConfigError) as err:
            load_sizings(path)
        assert str(path) in str(err.value) and message in str(err.value)
    assert load_sizings()["cpu"] == sizings()["cpu"]


def test_broken_sizing_file_is_one_message_exit_2(monkeypatch, capsys) -> None:
    """configs/quickstart.yaml is read when the quickstart starts, inside its error handler."""
    from localnmt.config_files import ConfigError
    from localnmt.quickstart import sizing

    def broken(path=None):
        raise ConfigError("configs/quickstart.yaml: sizings.cpu: key 'lr' must be a number")

    monkeypatch.setattr(sizing, "load_sizings", broken)
    sizing.sizings.cache_clear()
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["--help"])
    finally:
        sizing.sizings.cache_clear()
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "quickstart: error: configs/quickstart.yaml: sizings.cpu: key 'lr' must be a number"
    )


def test_broken_recipes_file_is_one_message_exit_2_before_any_work(tmp_path) -> None:
    """configs/recipes.yaml is read inside the quickstart's error handler (not at import):
    a bad value is one line and exit 2, and no workdir is made."""
    import os
    import shutil
    import subprocess
    import sys

    from localnmt import config_files

    configs = tmp_path / "configs"
    shutil.copytree(config_files.config_dir(), configs)
    recipes = configs / "recipes.yaml"
    text = recipes.read_text()
    assert "    lr: 7.0e-4\n" in text
    recipes.write_text(text.replace("    lr: 7.0e-4\n", "    lr: fast\n", 1))
    env = {**os.environ, config_files.ENV_VAR: str(configs)}
    workdir = tmp_path / "work"
    done = subprocess.run([sys.executable, "-m", "localnmt.quickstart", "--workdir", str(workdir)],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("quickstart:")]
    assert errors == [f"quickstart: error: {recipes}: recipes.base: key 'lr' must be a number, "
                      "got str 'fast'"]  # fmt: skip
    assert "Traceback" not in done.stderr and not workdir.exists()


def test_evaluation_key_names_the_post_processing(tmp_path) -> None:
    """The evaluation step's key holds the data-bin's resolved subword scheme and
    detokeniser, so a data-bin that records other ones is scored again, not reused."""
    from localnmt.data.metadata import FILENAME
    from localnmt.runs.experiment import TestSet, evaluation_params
    from localnmt.runs.run_specs import DecodeSpec, TrainSpec

    spec = TrainSpec(data=str(tmp_path), save_dir=str(tmp_path / "ck"))

    def key() -> list:
        return evaluation_params(spec, DecodeSpec(), TestSet(), 0)["post_processing"]

    assert key() == ["subword_nmt", "moses"]
    (tmp_path / FILENAME).write_text(json.dumps({
        "src": "en", "tgt": "de", "tokenizer": {"en": "moses", "de": "none"},
        "normalize": {"en": True, "de": False}, "bpe": "sentencepiece",
        "bpe_model": {"en": "spm.model", "de": "spm.model"},
    }))  # fmt: skip
    assert key() == ["sentencepiece", "none"]
