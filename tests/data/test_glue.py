"""GLUE SST-2 → sentence_prediction data, and a tiny Pande BERT fine-tuned for 3 updates."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from localnmt.data import bpe, glue
from localnmt.data.text_tokenize import tokenize_moses
from localnmt.errors import DataError
from localnmt.testing import exit_status

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lang" / "glue"
PACKAGE_DIR = Path(glue.__file__).resolve().parents[1]


def _pretrained(tmp: Path) -> tuple[Path, Path]:
    """A stand-in for the pretrained model's subword codes and dictionary."""
    text = [line.split("\t")[0] for line in (FIX / "SST-2" / "train.tsv").read_text().splitlines()]
    tok = tmp / "pre.tok"
    tok.write_text("".join(tokenize_moses(s, "en") + "\n" for s in text[1:]), encoding="utf-8")
    codes = tmp / "bpe.codes"
    bpe.learn("subword_nmt", [tok], codes, 40)
    seg = tmp / "pre.bpe"
    bpe.apply_file("subword_nmt", codes, tok, seg)
    counts: dict[str, int] = {}
    for w in seg.read_text(encoding="utf-8").split():
        counts[w] = counts.get(w, 0) + 1
    d = tmp / "dict.txt"
    d.write_text("".join(f"{w} {c}\n" for w, c in sorted(counts.items())), encoding="utf-8")
    return codes, d


def test_read_tsv_by_header_and_skips(tmp_path):
    p = tmp_path / "train.tsv"
    p.write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                 "1\t1\t2\tHow?\tWhy?\t0\n2\t3\t4\tbroken line\n3\t5\t6\tA\tB\t1\n")  # fmt: skip
    logs: list[str] = []
    rows = glue.read_tsv(p, glue.TASKS["QQP"], logs.append)
    assert rows == [(["How?", "Why?"], "0"), (["A", "B"], "1")]
    assert "skipped 1 malformed" in logs[0]
    with pytest.raises(DataError, match="header has no column sentence"):
        glue.read_tsv(p, glue.TASKS["SST-2"])
    assert glue.TASKS["MNLI"].num_classes == 3


def test_sst2_convert_and_finetune(tmp_path, capsys):
    codes, d = _pretrained(tmp_path)
    out = tmp_path / "SST-2-bin"
    args = ["--glue-dir", str(FIX), "--task", "SST-2", "--bpe-model", str(codes), "--dict",
            str(d), "--out", str(out), "--workers", "1"]  # fmt: skip
    assert glue.main(args) == 0
    assert capsys.readouterr().out.strip().endswith(str(out))
    for name in ("input0/train.bin", "input0/valid.idx", "label/train.bin", "label/dict.txt"):
        assert (out / name).exists(), name
    assert not (out / "input1").exists()
    assert (out / "input0" / "dict.txt").read_text() == d.read_text()  # pretrained dictionary
    labels = [x.split()[0] for x in (out / "label" / "dict.txt").read_text().splitlines()]
    assert sorted(w for w in labels if not w.startswith("madeupword")) == ["0", "1"]
    assert glue.main(args) == 0
    assert "[run ]" not in capsys.readouterr().out
    assert exit_status(glue.main, [*args[:3], "QNLI", *args[4:]]) == 2
    assert "missing train.tsv, dev.tsv" in capsys.readouterr().err

    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import train as fairseq_train

    save = tmp_path / "ckpt"
    argv = [
        str(out), "--user-dir", str(PACKAGE_DIR), "--task", "sentence_prediction",
        "--arch", "pande2021_bert_band2_untied", "--num-classes", "2",
        "--criterion", "sentence_prediction", "--init-token", "0", "--separator-token", "2",
        "--max-positions", "64", "--encoder-embed-dim", "96", "--encoder-ffn-embed-dim", "64",
        "--optimizer", "adam", "--lr", "1e-4", "--lr-scheduler", "polynomial_decay",
        "--total-num-update", "3", "--warmup-updates", "1", "--batch-size", "8",
        "--max-update", "3", "--save-dir", str(save), "--no-epoch-checkpoints", "--cpu",
        "--num-workers", "0", "--disable-validation", "--no-progress-bar", "--seed", "1",
    ]  # fmt: skip
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(
        options.get_training_parser(), argv))  # fmt: skip
    fairseq_train.main(cfg)
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert state["optimizer_history"][-1]["num_updates"] == 3
    head = state["model"]["classification_heads.sentence_classification_head.out_proj.weight"]
    assert head.shape[0] == 2 and torch.isfinite(head).all()

    # the fine-tuning script's command runs too (shrunk, 2 updates, no pretrained checkpoint)
    script = PACKAGE_DIR.parent / "scripts" / "glue_finetune.sh"
    res = subprocess.run(
        ["bash", str(script), "--data", str(out), "--save-dir", str(tmp_path / "ft"),
         "--arch", "pande2021_bert_band6_120tied", "--cpu", "--batch-size", "8", "--warmup", "1",
         "--optimizer", "adam", "--", "--encoder-embed-dim", "96", "--encoder-ffn-embed-dim",
         "64", "--max-update", "2", "--disable-validation", "--num-workers", "0"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "ft" / "checkpoint_last.pt").exists()


def test_roberta_pretrain_phases_dry_run(tmp_path):
    script = PACKAGE_DIR.parent / "scripts" / "roberta_pretrain.sh"
    res = subprocess.run(
        ["bash", str(script), "--data", str(tmp_path), "--save-dir", str(tmp_path / "s"),
         "--arch", "pande2021_bert_band2_untied", "--gpus", "4", "--batch-per-gpu", "32",
         "--optimizer", "adam", "--dry-run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    first, second = res.stdout.strip().splitlines()
    assert "--task masked_lm" in first and "--tokens-per-sample 128" in first
    assert "--max-update 300000" in first and "--update-freq 16" in first  # 4 x 32 x 16 = 2048
    assert "--tokens-per-sample 512" in second and "--max-update 1000" in second
    assert f"--restore-file {tmp_path}/s/seq128/checkpoint_last.pt" in second
