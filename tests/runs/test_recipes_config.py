"""configs/recipes.yaml: the recipes as they were in Python, its schema check, and changed
numbers reaching the commands of localnmt-train, GLUE fine-tuning and BERT pre-training."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.config_files import ConfigError, config_dir
from localnmt.runs import glue_finetune, glue_runs, roberta_pretrain
from localnmt.runs.recipes import (
    get_recipe,
    glue_finetune_recipe,
    load_recipes,
    lr_text,
    roberta_pretrain_recipe,
    train_args,
)


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_recipes_hold_the_former_literals():
    # the values localnmt/runs/recipes.py had as Python literals
    expected = {
        "base": (7e-4, 0.1, 4000, 100_000, 4096, 5, 1000, 20, True, None, 100),
        "big": (5e-4, 0.3, 4000, 300_000, 4096, 20, 1000, 20, True, None, 100),
        "cpu": (2e-3, 0.1, 200, 20_000, 1024, 0, 0, 2, False, (128, 512, 4, 3), 10),
        "tiny": (1e-3, 0.1, 50, 200, 1024, 2, 0, 3, False, (64, 128, 4, 6), 10),
    }
    for name, values in expected.items():
        r = get_recipe(name)
        got = (r.lr, r.dropout, r.warmup, r.max_update, r.max_tokens, r.average_last,
               r.save_interval_updates, r.keep_last, r.scale_batch, r.dims,
               r.log_interval)  # fmt: skip
        assert got == values, name
        adam = (r.adam_betas, r.adam_eps, r.clip_norm, r.weight_decay)
        assert adam == ("(0.9, 0.98)", 1e-9, 0, 0)
        assert (r.warmup_init_lr, r.label_smoothing, r.extra) == (1e-7, 0.1, ())
    args = train_args("base", world_size=2)
    assert _value(args, "--adam-eps") == "1e-09" and _value(args, "--warmup-init-lr") == "1e-07"
    assert _value(args, "--lr") == "0.0007" and _value(args, "--update-freq") == "4"
    finetune, pretrain = glue_finetune_recipe(), roberta_pretrain_recipe()
    assert finetune.grid == ((32, 1e-4), (32, 2e-4), (128, 1e-4), (128, 2e-4))
    assert (finetune.lr, finetune.batch_size, finetune.warmup) == (1e-4, 32, 10_000)
    assert pretrain.sequences_per_update == 2048
    assert (pretrain.phase1_updates, pretrain.phase2_updates) == (300_000, 1000)


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "recipes.yaml"
    text = (config_dir() / "recipes.yaml").read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("    lr: 7.0e-4\n", "    lr: 7e-4x\n",
         "recipes.base: key 'lr' must be a number, got str '7e-4x'"),
        ("    lr: 7.0e-4\n", "    lr: 7.0e-4\n    lr_peak: 1\n",
         "recipes.base: unknown key 'lr_peak'"),
        ("    lr: 7.0e-4\n", "", "recipes.base: missing key 'lr'"),
        ("dims: [64, 128, 4, 6]", "dims: [64, 128]", "recipes.tiny: key 'dims' must be [embed,"),
        ("  warmup_init_lr: 1.0e-7\n", "  warmup_init_lr: none\n",
         "defaults: key 'warmup_init_lr' must be a number, got str 'none'"),
        ("  warmup: 10000\n  max_epoch", "  warmup: 10000\n  max_epochs",
         "glue_finetune: unknown key 'max_epochs'"),
        ("[128, 2.0e-4]]", "[128]]", "glue_finetune: key 'grid', item 3: must be [batch size,"),
        ("  batch_per_gpu: 64\n", "  batch_per_gpu: 6.4\n",
         "roberta_pretrain: key 'batch_per_gpu' must be an integer, got float 6.4"),
        ("\nroberta_pretrain:", "\nroberta:", "unknown key 'roberta'"),
    ],
)  # fmt: skip
def test_a_wrong_key_names_file_and_key(tmp_path, old, new, message):
    path = _broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as err:
        load_recipes(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


def test_lr_text_is_short_and_exact():
    for lr, text in ((1e-4, "1e-4"), (2.0e-4, "2e-4"), (5e-4, "5e-4"), (1.5e-4, "1.5e-4"),
                     (0.001, "1e-3"), (1.2345678e-5, "1.2345678e-5"), (3.0, "3e+0")):  # fmt: skip
        assert lr_text(lr) == text
        assert float(text) == lr


def test_command_defaults_are_the_recipes():
    ft = glue_finetune.parse_args(["--data", "d", "--save-dir", "s", "--optimizer", "adam"])
    recipe = glue_finetune_recipe()
    assert (ft.lr, ft.batch_size, ft.warmup, ft.max_epoch) == (
        lr_text(recipe.lr), recipe.batch_size, recipe.warmup, recipe.max_epoch)  # fmt: skip
    pre = roberta_pretrain.parse_args(["--data", "d", "--save-dir", "s", "--optimizer", "lamb"])
    r = roberta_pretrain_recipe()
    assert (pre.lr, pre.batch_per_gpu, pre.phase1_updates, pre.phase2_updates,
            pre.sequences_per_update) == (lr_text(r.lr), r.batch_per_gpu, r.phase1_updates,
                                          r.phase2_updates, r.sequences_per_update)  # fmt: skip
    assert glue_runs.default_setting() == (recipe.batch_size, lr_text(recipe.lr))
    assert glue_runs.grid_settings() == tuple((b, lr_text(lr)) for b, lr in recipe.grid)
    assert glue_runs.setting_text(True) == "grid batch {32, 128} x lr {1e-4, 2e-4}"
    assert glue_runs.setting_text(False) == "batch 32, lr 1e-4"


def test_warmup_of_a_pretraining_phase():
    assert roberta_pretrain.warmup_updates(300_000, 10_000) == 10_000
    assert roberta_pretrain.warmup_updates(1000, 10_000) == 100
    assert roberta_pretrain.warmup_updates(10_000, 10_000) == 10_000


#: Runs in a fresh process (the recipes are read once): the commands of every consumer.
_COMMANDS = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
from localnmt.runs import glue_finetune, glue_runs, launch, roberta_pretrain, train
data = Path(sys.argv[1])
ft = glue_finetune.parse_args(["--data", str(data / "SST-2"), "--save-dir", "ft", "--optimizer",
                               "lamb", "--user-dir", "none"])
pre = roberta_pretrain.parse_args(["--data", "bin", "--save-dir", "pre", "--optimizer", "adam",
                                   "--user-dir", "none"])
spec, _ = train.parse_args(["--data", "bin", "--save-dir", "s", "--size", "base", "--cpu"])
row = SimpleNamespace(arch="localnmt_roberta_base", name="r", args=())
print(json.dumps({
    "finetune": glue_finetune.command(ft),
    "pretrain": roberta_pretrain.commands(pre),
    "train": launch.launch_command(spec),
    "default": [s.cmd for s in glue_runs.plan_row(row, data, Path("run"), tasks=("SST-2",)).steps],
    "grid": [s.cmd for s in glue_runs.plan_row(row, data, Path("run"), tasks=("SST-2",),
                                               grid=True).steps],
}))
"""


def _edited_configs(tmp_path: Path, edits: list[tuple[str, str]]) -> dict[str, str]:
    """A copy of configs/ with ``edits`` made to recipes.yaml; the environment that reads it."""
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in os.listdir(config_dir()):
        if name.endswith(".yaml"):
            shutil.copy(config_dir() / name, folder)
    text = (folder / "recipes.yaml").read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (folder / "recipes.yaml").write_text(text)
    return {**os.environ, "LOCALNMT_CONFIGS": str(folder)}


def test_edited_recipes_reach_every_command(tmp_path):
    env = _edited_configs(tmp_path, [
        ("    lr: 7.0e-4\n", "    lr: 6.0e-4\n"),  # translation: base
        ("glue_finetune:\n  lr: 1.0e-4\n", "glue_finetune:\n  lr: 3.0e-5\n"),
        ("grid: [[32, 1.0e-4], [32, 2.0e-4], [128, 1.0e-4], [128, 2.0e-4]]",
         "grid: [[16, 5.0e-5], [64, 2.5e-5]]"),
        ("  max_epoch: 3\n  weight_decay: 0.01\n", "  max_epoch: 4\n  weight_decay: 0.02\n"),
        ("  lamb_betas: \"(0.9,0.999)\"\n  lamb_eps: 1.0e-6\n\n",
         "  lamb_betas: \"(0.8,0.99)\"\n  lamb_eps: 1.0e-6\n\n"),  # glue_finetune's
        ("roberta_pretrain:\n  lr: 5.0e-4\n", "roberta_pretrain:\n  lr: 4.0e-4\n"),
        ("  phase2_tokens_per_sample: 512\n", "  phase2_tokens_per_sample: 256\n"),
        ("  max_warmup: 10000\n", "  max_warmup: 2000\n"),
        ("  adam_betas: \"(0.9,0.98)\"\n  adam_eps: 1.0e-6\n  lamb_betas: \"(0.9,0.999)\"\n"
         "  lamb_eps: 1.0e-6\n", "  adam_betas: \"(0.9,0.95)\"\n  adam_eps: 1.0e-6\n  lamb_betas: "
         "\"(0.9,0.999)\"\n  lamb_eps: 1.0e-6\n"),  # roberta_pretrain's (the file's last lines)
    ])  # fmt: skip
    task = tmp_path / "glue" / "SST-2"
    (task / "work").mkdir(parents=True)
    (task / "localnmt_glue.json").write_text('{"num_classes": 2}')
    (task / "work" / "train.label").write_text("1\n" * 100)
    out = subprocess.run([sys.executable, "-c", _COMMANDS, str(tmp_path / "glue")],
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    cmds = json.loads(out.stdout.splitlines()[-1])
    assert _value(cmds["train"], "--lr") == "0.0006"
    ft = cmds["finetune"]
    assert _value(ft, "--lr") == "3e-5" and _value(ft, "--max-epoch") == "4"
    assert _value(ft, "--weight-decay") == "0.02" and _value(ft, "--lamb-betas") == "(0.8,0.99)"
    assert _value(ft, "--total-num-update") == str((100 // 32 + 1) * 4)
    first, second = cmds["pretrain"]
    assert _value(first, "--lr") == "4e-4" and _value(first, "--adam-betas") == "(0.9,0.95)"
    assert _value(first, "--warmup-updates") == "2000"  # 300K updates: the cap
    assert _value(second, "--warmup-updates") == "100"  # 1K < 2000 updates: a tenth
    assert _value(second, "--tokens-per-sample") == "256"
    assert _value(second, "--save-dir") == "pre/seq256"
    (pre, tune), (_, *grid) = cmds["default"], cmds["grid"]
    assert _value(tune, "--lr") == "3e-5" and _value(tune, "--batch-size") == "32"
    restore = f"{_value(pre, '--save-dir')}/seq256/checkpoint_last.pt"
    assert _value(tune, "--restore-file") == restore == "run/pretrain/seq256/checkpoint_last.pt"
    assert [(_value(c, "--batch-size"), _value(c, "--lr")) for c in grid] == [
        ("16", "5e-5"), ("64", "2.5e-5")]  # fmt: skip
    assert _value(grid[1], "--save-dir") == "run/SST-2/bsz64_lr2.5e-5/checkpoints"


def test_a_broken_recipe_file_stops_a_command_with_one_line(tmp_path):
    env = _edited_configs(tmp_path, [("\nroberta_pretrain:", "\nroberta:")])
    out = subprocess.run(
        [sys.executable, "-m", "localnmt.runs.roberta_pretrain", "--data", "bin", "--save-dir",
         "s", "--optimizer", "adam", "--dry-run"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert out.returncode == 2
    recipes = tmp_path / "configs" / "recipes.yaml"
    assert f"roberta_pretrain: error: {recipes}: unknown key 'roberta'" in out.stderr
    assert "Traceback" not in out.stderr
