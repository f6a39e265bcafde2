"""Pre-training text → masked_lm data-bin, then pre-train → GLUE fine-tune on its vocabulary."""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest
import torch

from localnmt.data import glue, pretrain_text
from localnmt.errors import DataError
from localnmt.testing import exit_status

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lang" / "glue"
REPO = Path(pretrain_text.__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _sentences() -> list[str]:
    rows = (FIX / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [r.split("\t")[0] for r in rows]


def _write_corpus(tmp: Path) -> list[Path]:
    """Ten documents of four sentences over a plain and a gzip file, with stray control
    characters and extra blank lines."""
    sents = _sentences()[:40]
    docs = ["\n".join(sents[i : i + 4]) for i in range(0, 40, 4)]
    plain, packed = tmp / "a.txt", tmp / "b.txt.gz"
    plain.write_text("\n\n\n".join(docs[:6]).replace("film", "fi\u200blm\x07") + "\n",
                     encoding="utf-8")  # fmt: skip
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        f.write("\n\n".join(docs[6:]))
    return [plain, packed]


def _docs(path: Path) -> list[list[str]]:
    return [d.splitlines() for d in path.read_text(encoding="utf-8").split("\n\n") if d.strip()]


def test_clean_and_valid_choice():
    assert pretrain_text.clean_line(" a\x07b\u200b c\u00a0 d\t e ") == "ab c d e"
    doc = ["one", "two"]
    assert pretrain_text.goes_to_valid(doc, 1.0) and not pretrain_text.goes_to_valid(doc, 0.0)
    picks = [pretrain_text.goes_to_valid([str(i)], 0.25) for i in range(2000)]
    assert 400 < sum(picks) < 600  # about a quarter, by hash


def test_split_keeps_documents_whole(tmp_path):
    texts = _write_corpus(tmp_path)
    train, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    counts = pretrain_text.split_documents(texts, train, valid, fraction=0.3)
    got = _docs(train) + _docs(valid)
    sents = _sentences()[:40]
    want = [sents[i : i + 4] for i in range(0, 40, 4)]
    assert sorted(got) == sorted(want)  # every document whole, control characters gone
    assert counts["train_docs"] + counts["valid_docs"] == 10 and counts["valid_docs"] >= 1
    assert counts["valid_lines"] == 4 * counts["valid_docs"]
    train_docs = _docs(train)
    assert train_docs == [d for d in want if d in train_docs]  # input order kept
    # nothing hashed into valid: the last document is held out
    counts = pretrain_text.split_documents(texts, train, valid, fraction=1e-12)
    assert _docs(valid) == [want[-1]] and counts["train_docs"] == 9
    with pytest.raises(DataError, match="at least two are needed"):
        pretrain_text.split_documents([texts[0]], train, valid, fraction=1.0)


def test_errors_before_work(tmp_path, capsys):
    out = tmp_path / "out"
    missing = ["--text", str(tmp_path / "nope.txt"), "--out", str(out)]
    assert exit_status(pretrain_text.main, missing) == 2
    assert "missing pre-training text" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\nbroken \xff line\n")
    assert exit_status(pretrain_text.main, ["--text", str(bad), "--out", str(out)]) == 2
    assert "bad.txt:3: invalid UTF-8" in capsys.readouterr().err
    good = _write_corpus(tmp_path)[0]
    argv = ["--text", str(good), "--out", str(out), "--valid-fraction", "1.5"]
    assert exit_status(pretrain_text.main, argv) == 2
    assert "--valid-fraction must be between 0 and 1" in capsys.readouterr().err


def test_prepare_pretrain_then_finetune_glue(tmp_path, capsys):
    texts = _write_corpus(tmp_path)
    out = tmp_path / "pre"
    script = REPO / "data_prep" / "prepare_pretrain_text.sh"
    res = subprocess.run(
        ["bash", str(script), str(out), *map(str, texts), "--", "--bpe-merges", "60",
         "--valid-fraction", "0.2", "--workers", "1"],
        capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    dest = out / "bin"
    assert res.stdout.strip().endswith(str(dest))
    for name in ("train.bin", "train.idx", "valid.bin", "valid.idx", "dict.txt"):
        assert (dest / name).exists(), name
    assert (out / "bpe.codes").exists()
    words = {line.split()[0] for line in (dest / "dict.txt").read_text().splitlines()}
    assert any(w.endswith("@@") for w in words)  # subword units, not words
    assert "fi\u200blm" not in words and "\x07" not in "".join(words)
    again = subprocess.run(["bash", str(script), str(out), *map(str, texts), "--",
                            "--bpe-merges", "60", "--valid-fraction", "0.2"],
                           capture_output=True, text=True, env=ENV, check=True)  # fmt: skip
    assert "[run ]" not in again.stdout

    save = tmp_path / "mlm"
    tiny = ["--encoder-embed-dim", "96", "--encoder-ffn-embed-dim", "64", "--encoder-layers",
            "2", "--num-workers", "0", "--no-progress-bar", "--seed", "1"]  # fmt: skip
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "roberta_pretrain.sh"), "--data", str(dest),
         "--save-dir", str(save), "--arch", "pande2021_bert_band2_untied", "--cpu",
         "--optimizer", "adam", "--batch-per-gpu", "8", "--sequences-per-update", "8",
         "--phase1-updates", "2", "--phase2-updates", "1", "--", *tiny],
        capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    first, state = (torch.load(save / p / "checkpoint_last.pt", map_location="cpu",
                               weights_only=False) for p in ("seq128", "seq512"))  # fmt: skip
    assert first["optimizer_history"][-1]["num_updates"] == 2
    assert first["cfg"]["task"]["tokens_per_sample"] == 128
    assert state["optimizer_history"][-1]["num_updates"] == 1  # optimizer reset for phase 2
    assert state["cfg"]["task"]["tokens_per_sample"] == 512
    key = "encoder.sentence_encoder.embed_tokens.weight"
    _assert_moved_a_little(first["model"][key], state["model"][key])  # phase 2 restored phase 1

    glue_bin = tmp_path / "SST-2"
    assert glue.main(["--glue-dir", str(FIX), "--task", "SST-2", "--bpe-model",
                      str(out / "bpe.codes"), "--dict", str(dest / "dict.txt"), "--out",
                      str(glue_bin), "--workers", "1"]) == 0  # fmt: skip
    ft = tmp_path / "ft"
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "glue_finetune.sh"), "--data", str(glue_bin),
         "--save-dir", str(ft), "--arch", "pande2021_bert_band2_untied", "--cpu",
         "--restore-file", str(save / "seq512" / "checkpoint_last.pt"), "--batch-size", "8",
         "--warmup", "1", "--optimizer", "adam", "--", *tiny, "--max-update", "2",
         "--disable-validation"],
        capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    tuned = torch.load(ft / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert tuned["optimizer_history"][-1]["num_updates"] == 2
    _assert_moved_a_little(state["model"][key], tuned["model"][key])  # from the pre-trained


def _assert_moved_a_little(before: torch.Tensor, after: torch.Tensor) -> None:
    """A few Adam steps at a small learning rate from ``before`` (not a fresh init)."""
    assert before.shape == after.shape
    assert 0 < (after - before).abs().max() < 0.05 < before.abs().max()
