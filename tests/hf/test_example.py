"""The example of docs/huggingface.md runs end to end on tiny data (seconds of training)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import localnmt.hf  # noqa: E402
from localnmt.digests import sha256_file  # noqa: E402
from localnmt.hf import example  # noqa: E402

WORDS = "the cat dog sees a house big small red green runs sleeps".split()


def write_corpus(folder: Path) -> None:
    """Reverse-the-sentence data: 200 training and 8 test pairs."""
    rng = random.Random(0)
    for split, n in (("train", 200), ("test", 8)):
        src = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) for _ in range(n)]
        (folder / f"{split}.en").write_text("\n".join(src) + "\n")
        reversed_src = [" ".join(s.split()[::-1]) for s in src]
        (folder / f"{split}.de").write_text("\n".join(reversed_src) + "\n")


TINY = ["--src", "en", "--tgt", "de", "--steps", "12", "--vocab", "40", "--dim", "16",
        "--layers", "1", "--batch-size", "16", "--beam", "2", "--max-len", "12"]  # fmt: skip


def test_example_trains_saves_and_scores(tmp_path, capsys) -> None:
    write_corpus(tmp_path)
    out = tmp_path / "run"
    bleu = example.main(["--data", str(tmp_path), "--out", str(out), *TINY,
                         "--cross", "gmm[k=2]"])  # fmt: skip
    assert 0.0 <= bleu <= 100.0
    printed = capsys.readouterr().out
    assert len((out / "test.hyp.de").read_text().splitlines()) == 8
    # score.json: the score with where it came from; 12 updates on tiny data learn nothing,
    # which the run says instead of printing the BLEU as a result
    record = json.loads((out / "score.json").read_text())
    assert record["bleu"] == round(bleu, 2) and record["updates"] == 12
    assert record["processes"] == 1 and record["sentences_per_update"] == 16
    assert record["specs"] == {"encoder_self": "", "decoder_self": "", "cross": "gmm[k=2]"}
    assert record["training_loss"]["readings"] >= 2 and record["signature"].startswith("nrefs:1")
    last = printed.strip().splitlines()[-1]
    assert record["learned"] is False and last.startswith("Did not learn: BLEU")
    for name, folder in (("test.de", tmp_path), ("train.en", tmp_path), ("test.hyp.de", out),
                         ("spm.model", out)):  # fmt: skip
        assert record["sha256"][name] == sha256_file(folder / name)
    weights = [n for n in record["sha256"] if n.startswith("model/")]
    assert weights and all(record["sha256"][n] == sha256_file(out / n) for n in weights)
    assert sha256_file(out / "model" / "spm.model") == record["sha256"]["spm.model"]
    from transformers import MarianMTModel

    model = localnmt.hf.from_pretrained(MarianMTModel, out / "model")
    assert model.config.localnmt == {"encoder_self": "", "decoder_self": "", "cross": "gmm[k=2]"}


def test_example_under_torchrun_trains_on_two_processes_and_scores_once(tmp_path) -> None:
    """``torchrun --nproc-per-node 2 -m localnmt.hf.example`` (gloo on the CPU): the two
    processes train together; the first trains the SentencePiece model before the second
    reads it and alone saves, translates, scores and prints; both leave the process group
    with nothing left holding it (what made 2 of 34 runs hang, see
    ``example.leave_process_group``)."""
    import os
    import subprocess
    import sys

    write_corpus(tmp_path)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", "2", "-m", "localnmt.hf.example", "--data", str(tmp_path),
           "--out", str(out), *TINY, "--cross", "gmm[k=2]"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "still referenced" not in done.stderr, done.stderr[-3000:]
    results = [line for line in done.stdout.splitlines()
               if line.startswith(("BLEU ", "Did not learn"))]  # fmt: skip
    assert len(results) == 1, done.stdout
    record = json.loads((out / "score.json").read_text())
    assert record["processes"] == 2 and record["sentences_per_update"] == 32
    assert record["sha256"]["spm.model"] == sha256_file(out / "spm.model")
    assert len((out / "test.hyp.de").read_text().splitlines()) == 8
    from transformers import MarianMTModel

    assert localnmt.hf.from_pretrained(MarianMTModel, out / "model").config.localnmt["cross"]


def test_example_gives_the_named_methods_alone_and_localness_without_any() -> None:
    common = ["--data", "d", "--out", "o", "--src", "en", "--tgt", "de"]
    named = example.parse_args([*common, "--cross", "gmm[k=4]"])
    assert (named.encoder_self, named.decoder_self, named.cross) == ("", "", "gmm[k=4]")
    default = example.parse_args(common)
    assert (default.encoder_self, default.decoder_self, default.cross) == (
        "localness[window=query]", "", "")


def test_example_prints_the_bleu_of_a_run_that_learned(tmp_path, capsys, monkeypatch) -> None:
    write_corpus(tmp_path)
    monkeypatch.setattr(example, "learned", lambda bleu, losses: True)
    example.main(["--data", str(tmp_path), "--out", str(tmp_path / "run"), *TINY])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("BLEU ")
    assert json.loads((tmp_path / "run" / "score.json").read_text())["learned"] is True


def test_example_missing_data_is_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        example.main(["--data", str(tmp_path), "--out", str(tmp_path / "run"), *TINY])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "train.en: missing" in err
    assert not (tmp_path / "run").exists()


def test_example_bad_spec_is_one_line(tmp_path, capsys) -> None:
    write_corpus(tmp_path)
    with pytest.raises(SystemExit):
        example.main(["--data", str(tmp_path), "--out", str(tmp_path / "run"), *TINY,
                      "--cross", "block"])  # fmt: skip
    assert "block" in capsys.readouterr().err
