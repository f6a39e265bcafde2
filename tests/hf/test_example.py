"""The example of docs/huggingface.md runs end to end on tiny data (seconds of training)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import localnmt.hf  # noqa: E402
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
    assert "BLEU" in capsys.readouterr().out
    assert len((out / "test.hyp.de").read_text().splitlines()) == 8
    from transformers import MarianMTModel

    model = localnmt.hf.from_pretrained(MarianMTModel, out / "model")
    assert model.config.localnmt["encoder_self"] == "localness[window=query]"
    assert model.config.localnmt["cross"] == "gmm[k=2]"


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
