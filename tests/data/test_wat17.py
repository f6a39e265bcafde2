"""WAT17 Ja-En (ASPEC-JE) processing on a tiny ASPEC-format fixture (no network)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from localnmt.data import wat17_ja_en
from localnmt.errors import DataError
from localnmt.testing import exit_status, generate, train

pytest.importorskip("janome")

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lang" / "aspec"


def test_parse_aspec_lines():
    train = "0.873 ||| A-1 ||| 3 ||| 温度を測定した。 ||| We measured the temperature."
    dev = "A-2 ||| 1 ||| 誤差 ||| the error"
    assert wat17_ja_en.parse_aspec_line(train, 5, "x") == (
        "温度を測定した。",
        "We measured the temperature.",
    )
    assert wat17_ja_en.parse_aspec_line(dev, 4, "x") == ("誤差", "the error")
    with pytest.raises(DataError, match=r"dev\.txt:7: expected 4 fields .*found 5"):
        wat17_ja_en.parse_aspec_line(train, 4, "dev.txt:7")


def test_janome_segmentation():
    from localnmt.data.ja_segment import tokenize_ja

    out = tokenize_ja("本研究では、新しい　手法を提案する。")
    assert out == "本 研究 で は 、 新しい 手法 を 提案 する 。"
    assert tokenize_ja("  ") == ""


def test_missing_aspec_files_named(tmp_path, capsys):
    aspec = tmp_path / "ASPEC-JE"
    shutil.copytree(FIX, aspec)
    (aspec / "train" / "train-2.txt").unlink()
    args = ["process", "--aspec-dir", str(aspec), "--workdir", str(tmp_path / "w")]
    assert exit_status(wat17_ja_en.main, args) == 2
    err = capsys.readouterr().err
    assert "missing ASPEC file(s) train/train-2.txt" in err and "on request" in err
    argv = ["process", "--aspec-dir", str(tmp_path / "nope"), "--workdir", str(tmp_path / "w")]
    assert exit_status(wat17_ja_en.main, argv) == 2
    assert "ASPEC directory not found" in capsys.readouterr().err


def test_bad_line_reports_file_and_line(tmp_path, capsys):
    aspec = tmp_path / "ASPEC-JE"
    shutil.copytree(FIX, aspec)
    with open(aspec / "dev" / "dev.txt", "a", encoding="utf-8") as f:
        f.write("A-9 ||| 1 ||| 壊れた行\n")
    args = ["process", "--aspec-dir", str(aspec), "--workdir", str(tmp_path / "w")]
    assert exit_status(wat17_ja_en.main, args) == 2
    assert "dev.txt:7: expected 4 fields" in capsys.readouterr().err


def test_process_aspec_fixture(tmp_path, capsys):
    work = tmp_path / "work"
    args = ["process", "--aspec-dir", str(FIX), "--workdir", str(work), "--bpe-merges", "60",
            "--workers", "1"]  # fmt: skip
    assert wat17_ja_en.main(args) == 0
    data_bin = work / "data-bin"
    assert capsys.readouterr().out.strip().endswith(str(data_bin))
    raw_ja = (work / "raw" / "train.ja").read_text(encoding="utf-8").splitlines()
    raw_en = (work / "raw" / "train.en").read_text(encoding="utf-8").splitlines()
    src = [
        line.split(" ||| ")
        for name in ("train-1.txt", "train-2.txt")
        for line in (FIX / "train" / name).read_text(encoding="utf-8").splitlines()
    ]
    assert raw_ja == [f[3] for f in src] and raw_en == [f[4] for f in src]
    assert len((work / "raw" / "test.en").read_text().splitlines()) == 6
    tok = (work / "tok" / "train.ja").read_text(encoding="utf-8").splitlines()
    assert [t.replace(" ", "") for t in tok] == raw_ja
    assert all(len(t.split()) >= 4 for t in tok)  # segmented, not characters nor whole lines
    assert (work / "tok" / "train.en").read_text().splitlines()[0].endswith(" .")
    for name in ("train.ja-en.ja.bin", "valid.ja-en.en.bin", "test.ja-en.ja.bin",
                 "dict.ja.txt", "dict.en.txt", "bpe.codes"):  # fmt: skip
        assert (data_bin / name).exists(), name
    assert (data_bin / "dict.ja.txt").read_text() == (data_bin / "dict.en.txt").read_text()
    assert wat17_ja_en.main(args) == 0
    out = capsys.readouterr().out
    assert "[run ]" not in out and "[skip] binarize" in out
    # an existing catalog arch (CSAN, Yang et al. 2019 Table 2) trains and decodes on it,
    # at the shared end-to-end size (embedding/FFN dims 64, the arch's layers and heads)
    dims = ["--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
            "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64"]  # fmt: skip
    run = train(data_bin, tmp_path / "ckpt", "yang2019_csan2d_base", max_update=3, dims=dims)
    assert len(run.losses) == 3 and all(math.isfinite(x) for x in run.losses)
    gen = generate(data_bin, run.checkpoint, beam=2, extra=["--post-process", "subword_nmt"])
    assert len(gen.hypotheses) == 6 and len(gen.references) == 6
    assert wat17_ja_en.main([*args, "--separate"]) == 0
    assert (data_bin / "bpe.ja.codes").exists() and (data_bin / "bpe.en.codes").exists()
