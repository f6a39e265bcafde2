"""configs/recipes.yaml: the recipes as they were in Python, its schema check, and a changed
number reaching the fairseq-train arguments (also through train.sh's file-mode call)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.config_files import ConfigError, config_dir
from localnmt.runs.recipes import (
    GLUE_FINETUNE,
    RECIPES,
    ROBERTA_PRETRAIN,
    load_recipes,
    train_args,
)

RECIPES_PY = Path(__file__).resolve().parents[2] / "localnmt" / "runs" / "recipes.py"


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_recipes_hold_the_former_literals():
    # the values localnmt/runs/recipes.py had as Python literals
    expected = {
        "base": (7e-4, 0.1, 4000, 100_000, 4096, 5, 1000, 20, True, None, 100),
        "big": (5e-4, 0.3, 4000, 300_000, 4096, 20, 1000, 20, True, None, 100),
        "cpu": (1e-3, 0.1, 100, 20_000, 4096, 0, 0, 2, False, (256, 1024, 4, 3), 10),
        "tiny": (1e-3, 0.1, 50, 200, 1024, 2, 0, 3, False, (64, 128, 4, 6), 10),
    }
    for name, values in expected.items():
        r = RECIPES[name]
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
    assert GLUE_FINETUNE.grid == ((32, 1e-4), (32, 2e-4), (128, 1e-4), (128, 2e-4))
    assert (GLUE_FINETUNE.lr, GLUE_FINETUNE.batch_size, GLUE_FINETUNE.warmup) == (1e-4, 32, 10_000)
    assert ROBERTA_PRETRAIN.sequences_per_update == 2048
    assert (ROBERTA_PRETRAIN.phase1_updates, ROBERTA_PRETRAIN.phase2_updates) == (300_000, 1000)


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "recipes.yaml"
    text = (config_dir() / "recipes.yaml").read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("    lr: 7.0e-4\n", "    lr: 7e-4\n",
         "recipes.base: key 'lr' must be a number, got str '7e-4'"),
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


def test_an_edited_recipe_reaches_train_sh(tmp_path):
    """train.sh runs recipes.py as a file: it reads the config folder too."""
    _broken(tmp_path, "    lr: 7.0e-4\n", "    lr: 6.0e-4\n")
    for name in os.listdir(config_dir()):
        if name != "recipes.yaml":
            shutil.copy(config_dir() / name, tmp_path)
    env = {**os.environ, "LOCALNMT_CONFIGS": str(tmp_path)}
    out = subprocess.run([sys.executable, str(RECIPES_PY), "--size", "base"],
                         capture_output=True, text=True, env=env, check=True)  # fmt: skip
    assert _value(out.stdout.splitlines(), "--lr") == "0.0006"
    (tmp_path / "recipes.yaml").write_text("defaults: {}\n")
    out = subprocess.run([sys.executable, str(RECIPES_PY)], capture_output=True, text=True, env=env)
    assert out.returncode != 0
    assert f"{tmp_path / 'recipes.yaml'}: missing key 'recipes'" in out.stderr
