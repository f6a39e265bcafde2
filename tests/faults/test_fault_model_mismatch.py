"""A checkpoint that does not fit what was asked for is said in one line comparing the two,
before anything trains or decodes: a resume with other model settings (same shapes: it
used to continue silently), another --arch, --restore-file from a model with other layers,
a data-bin whose dictionary has another size (torch's ``size mismatch`` traceback before)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from localnmt import provenance, translate
from localnmt.runs import resume_checks, train
from localnmt.testing import exit_status

BASE = ["--arch", "localnmt_base", "--size", "tiny", "--layers", "1", "--cpu",
        "--max-update", "2", "--no-user-dir"]  # fmt: skip


def _argv(data: Path, save: Path, *more: str) -> list[str]:
    return ["--data", str(data), "--save-dir", str(save), *BASE, *more]


@pytest.fixture(scope="module")
def baseline(tiny_data, tmp_path_factory) -> Path:
    """A save directory of a 2-update localnmt-train baseline."""
    save = tmp_path_factory.mktemp("mismatch") / "ck"
    cmd = [sys.executable, "-m", "localnmt.runs.train", *_argv(tiny_data, save), "--", "--seed",
           "1"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return save


def _copy(save: Path, dest: Path) -> Path:
    shutil.copytree(save, dest)
    return dest


def test_a_resume_with_other_attention_settings_is_refused(baseline, tiny_data, tmp_path,
                                                           capsys) -> None:  # fmt: skip
    save = _copy(baseline, tmp_path / "ck")
    argv = _argv(tiny_data, save, "--", "--seed", "1", "--encoder-attn-modifiers",
                 "csan_1d[window=3]")  # fmt: skip
    assert exit_status(train.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"localnmt-train: error: {save}/checkpoint_last.pt holds localnmt_base, encoder 1 layers "
        "x 64, decoder 1 layers x 64, vocabularies 56 (source) / 56 (target), trained with other "
        "model settings: --encoder-attn-modifiers None (asked: 'csan_1d[window=3]'); train with "
        f"the settings it was trained with, or give --start-over to move the checkpoints of "
        f"{save} to {save}/stale/ and train afresh"
    )
    before = sorted(p.name for p in save.glob("checkpoint*.pt"))
    aside = resume_checks.start_over(save)  # what --start-over does first
    assert sorted(p.name for p in aside.glob("checkpoint*.pt")) == before
    assert not list(save.glob("checkpoint*.pt")) and aside.parent == save / "stale"
    resume_checks.preflight(train.fairseq_args(*_spec(argv)))  # nothing left to refuse


def _spec(argv: list[str]):
    spec, _ = train.parse_args(argv)
    return spec, spec.gpus_per_node()


def test_a_resume_with_another_arch_is_refused(baseline, tiny_data, tmp_path, capsys) -> None:
    save = _copy(baseline, tmp_path / "ck")
    argv = [*_argv(tiny_data, save, "--", "--seed", "1")]
    argv[argv.index("localnmt_base")] = "transformer"
    assert exit_status(train.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert "trained with other model settings: --arch localnmt_base (asked: transformer); " in err
    assert "\n" not in err


def test_restore_file_from_a_model_with_other_layers_is_refused(baseline, tiny_data, tmp_path,
                                                                capsys) -> None:  # fmt: skip
    restore = baseline / "checkpoint_last.pt"
    argv = _argv(tiny_data, tmp_path / "new", "--", "--restore-file", str(restore))
    argv[argv.index("--layers") + 1] = "2"
    assert exit_status(train.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"localnmt-train: error: {restore} holds localnmt_base, encoder 1 layers x 64, decoder 1 "
        "layers x 64, vocabularies 56 (source) / 56 (target), trained with other model "
        "settings: --decoder-layers 1 (asked: 2); --encoder-layers 1 (asked: 2); give a "
        "checkpoint of a model of these dimensions"
    )


def test_a_resume_on_another_data_bin_is_refused(baseline, tiny_data, tmp_path, capsys) -> None:
    save = _copy(baseline, tmp_path / "ck")
    other = Path(shutil.copytree(tiny_data, tmp_path / "bin"))
    for name in ("dict.src.txt", "dict.tgt.txt"):
        lines = (other / name).read_text().splitlines(keepends=True)
        (other / name).write_text("".join([lines[1], lines[0], *lines[2:]]))
    assert exit_status(train.main, _argv(other, save, "--", "--seed", "1")) == 2
    err = capsys.readouterr().err.strip()
    assert f"{save}/checkpoint_last.pt was trained with the dictionary " in err
    assert f"not with {other}/dict.src.txt" in err


def test_translate_with_a_dictionary_of_another_size(baseline, tmp_path, capsys) -> None:
    """A data-bin of another corpus: one line comparing the sizes (torch's traceback before)."""
    from localnmt import testing

    raw = testing.make_tiny_corpus(tmp_path / "raw", seed=3)
    (raw / "train.src").write_text((raw / "train.src").read_text() + "a b c d e f g h\n")
    other = testing.preprocess(raw, tmp_path / "bin")
    (other / "localnmt_data.json").write_text(
        '{"src": "src", "tgt": "tgt", "tokenizer": {"src": "none", "tgt": "none"}, '
        '"bpe": "subword_nmt"}')  # fmt: skip
    (other / "bpe.codes").write_text("#version: 0.2\n")
    ckpt = tmp_path / "old.pt"  # no digests: the sizes are what is left to compare
    state = torch.load(baseline / "checkpoint_last.pt", weights_only=False)
    del state[provenance.KEY]
    torch.save(state, ckpt)
    argv = ["--data-bin", str(other), "--path", str(ckpt), "--input", str(raw / "test.src"),
            "--cpu"]  # fmt: skip
    assert exit_status(translate.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"localnmt-translate: error: {ckpt} holds localnmt_base, encoder 1 layers x 64, decoder "
        "1 layers x 64, vocabularies 56 (source) / 56 (target), but "
        f"{other}/dict.src.txt has 64 entries for its source vocabulary of 56: give the "
        "data-bin the checkpoint was trained on"
    )
