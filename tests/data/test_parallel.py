"""Your own corpus: prepare_parallel.sh / localnmt.data.parallel on small raw fixtures."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.data import parallel
from localnmt.data.corpus_layout import count_lines
from localnmt.data.text_tokenize import tokenize_moses, tokenize_zh
from localnmt.evaluation.scoring import read_lines
from localnmt.testing import exit_status

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "data"


def lines(lang: str) -> list[str]:
    return (FIX / f"sample.{lang}").read_text(encoding="utf-8").splitlines()


def write(path: Path, rows: list[str], gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(r + "\n" for r in rows).encode("utf-8")
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def corpus(root: Path, src: str, tgt: str) -> dict[str, str]:
    """train (30 lines, source gzipped), dev (4), two test sets (3 and 3) as PREFIX.<lang>."""
    a, b = lines(src), lines(tgt)
    b[38] = b[38].replace(" ", "\u2028", 1)  # a line separator inside a sentence is not a newline
    parts = {"train": (0, 30), "dev": (30, 34), "t1": (34, 37), "t2": (37, 40)}
    for name, (i, j) in parts.items():
        write(root / f"{name}.{src}", a[i:j], gz=name == "train")
        write(root / f"{name}.{tgt}", b[i:j])
    return {name: str(root / name) for name in parts}


def test_chinese_source_gz_two_test_sets_through_the_script(tmp_path):
    c = corpus(tmp_path / "corpus", "zh", "en")
    work = tmp_path / "work"
    cmd = ["bash", str(ROOT / "data_prep" / "prepare_parallel.sh"), "--src", "zh", "--tgt", "en",
           "--train", c["train"], "--valid", c["dev"], "--test", f"{c['t1']},{c['t2']}",
           "--workdir", str(work), "--bpe-merges", "100", "--workers", "1"]  # fmt: skip
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    data_bin = work / "data-bin"
    assert res.stdout.strip().splitlines()[-1] == str(data_bin)
    # raw references verbatim under the subset names, test sets in the order given
    zh, en = lines("zh"), lines("en")
    raw = work / "raw"
    assert (raw / "train.zh").read_text(encoding="utf-8").splitlines() == zh[:30]
    assert (raw / "test.en").read_text(encoding="utf-8").splitlines() == en[34:37]
    assert read_lines(raw / "test1.en") == [*en[37:38], en[38].replace(" ", "\u2028", 1), en[39]]
    assert (raw / "test1.zh").read_text(encoding="utf-8").splitlines() == zh[37:]
    sizes = {s: count_lines(data_bin, s, "zh", "en") for s in ("train", "valid", "test", "test1")}
    assert sizes == {"train": 30, "valid": 4, "test": 3, "test1": 3}
    # jieba on the Chinese side, Moses on the English side
    tok_zh = (work / "tok" / "test.zh").read_text(encoding="utf-8").splitlines()
    assert tok_zh == [tokenize_zh(s) for s in zh[34:37]]
    tok_en = read_lines(work / "tok" / "test1.en")
    assert tok_en == [tokenize_moses(s, "en") for s in read_lines(raw / "test1.en")]
    assert tok_en[1] == tokenize_moses(en[38], "en")
    meta = json.loads((data_bin / "localnmt_data.json").read_text(encoding="utf-8"))
    assert meta["src"] == "zh" and meta["tgt"] == "en"
    assert meta["tokenizer"] == {"zh": "jieba", "en": "moses"}
    assert meta["bpe"] == "subword_nmt" and meta["bpe_model"] == {"zh": "bpe.codes",
                                                                  "en": "bpe.codes"}  # fmt: skip
    assert (data_bin / "bpe.codes").is_file()
    assert meta["subsets"] == {"test": "test", "test1": "test1"}
    # second run: nothing to do
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert res.returncode == 0 and "[run ]" not in res.stdout


def test_length_clean_train_only_pretokenized_separate_unnormalised(tmp_path, capsys):
    de, en = lines("de"), lines("en")
    long_en = " ".join(["word"] * 40)  # ratio 40 : 1 → removed from train, kept in test
    root = tmp_path / "corpus"
    write(root / "train.en", [*en[:30], long_en])
    write(root / "train.de", [*de[:30], "Wort"])
    write(root / "dev.en", en[30:35])
    write(root / "dev.de", de[30:35])
    test_de = ["„Das ist schön“, sagte sie.", "Ein Satz  mit   Leerzeichen .", "Wort"]
    write(root / "test.en", ['"That is nice" , she said .', "A sentence with spaces .", long_en])
    write(root / "test.de", test_de)
    work = tmp_path / "work"
    argv = ["--src", "en", "--tgt", "de", "--train", str(root / "train"),
            "--valid", str(root / "dev"), "--test", str(root / "test"), "--workdir", str(work),
            "--bpe-merges", "80", "--workers", "1", "--length-clean", "--max-ratio", "9",
            "--separate"]  # fmt: skip
    assert parallel.main([*argv, "--pretokenized"]) == 0
    out = capsys.readouterr().out
    assert "kept 30 of 31 lines" in out
    data_bin = work / "data-bin"
    sizes = {s: count_lines(data_bin, s, "en", "de") for s in ("train", "valid", "test")}
    assert sizes == {"train": 30, "valid": 5, "test": 3}
    # pretokenised: only spaces cleaned, no Moses
    tok = (work / "tok" / "test.de").read_text(encoding="utf-8").splitlines()
    assert tok == ["„Das ist schön“, sagte sie.", "Ein Satz mit Leerzeichen .", "Wort"]
    meta = json.loads((data_bin / "localnmt_data.json").read_text(encoding="utf-8"))
    assert meta["tokenizer"] == {"en": "none", "de": "none"}
    assert meta["bpe_model"] == {"en": "bpe.en.codes", "de": "bpe.de.codes"}
    assert (data_bin / "dict.en.txt").read_text() != (data_bin / "dict.de.txt").read_text()
    # Moses with the target side un-normalised: the German quotes stay; the source is normalised
    assert parallel.main([*argv, "--no-target-normalize"]) == 0
    tok = (work / "tok" / "test.de").read_text(encoding="utf-8").splitlines()
    assert tok == [tokenize_moses(s, "de", normalize=False) for s in test_de]
    assert "„" in tok[0] and "„" not in tokenize_moses(test_de[0], "de")
    src_tok = (work / "tok" / "valid.en").read_text(encoding="utf-8").splitlines()
    assert src_tok == [tokenize_moses(s, "en") for s in en[30:35]]
    meta = json.loads((data_bin / "localnmt_data.json").read_text(encoding="utf-8"))
    assert meta["normalize"] == {"en": True, "de": False} and meta["tokenizer"]["de"] == "moses"


def error_of(argv: list[str], capsys) -> str:
    assert exit_status(parallel.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("prepare_parallel.sh: error: ") and len(err.splitlines()) == 1, err
    return err


def test_errors_one_message_exit_2_nothing_lost(tmp_path, capsys):
    c = corpus(tmp_path / "corpus", "en", "de")
    work = tmp_path / "work"
    keep = write(work / "raw" / "train.en", ["output of an earlier run"])
    base = ["--src", "en", "--tgt", "de", "--train", c["train"], "--valid", c["dev"],
            "--test", f"{c['t1']},{c['t2']}", "--workdir", str(work), "--workers", "1"]  # fmt: skip
    write(Path(c["t2"] + ".de"), lines("de")[37:39])  # one line short
    assert "t2.de has 2" in error_of(base, capsys) and "first unmatched line: 3" in error_of(
        base, capsys
    )
    Path(c["t2"] + ".de").write_bytes(b"gut\n\xc3\x28 kaputt\nnoch\n")
    assert "t2.de:2: invalid UTF-8" in error_of(base, capsys)
    write(Path(c["t2"] + ".de"), [])
    write(Path(c["t2"] + ".en"), [])
    assert "empty corpus" in error_of(base, capsys)
    Path(c["t2"] + ".de").unlink()
    assert "missing input file" in error_of(base, capsys) and "t2.de" in error_of(base, capsys)
    write(Path(c["t2"] + ".de"), lines("de")[37:])
    write(Path(c["t2"] + ".de"), lines("de")[37:], gz=True)
    assert "keep one of them" in error_of(base, capsys)
    Path(c["t2"] + ".de.gz").unlink()
    bad_lang = [*base[:1], "en-US", *base[2:]]
    assert "language code 'en-US'" in error_of(bad_lang, capsys)
    same = [*base[:3], "en", *base[4:]]
    assert "two different language codes" in error_of(same, capsys)
    assert keep.read_text() == "output of an earlier run\n"
    assert not (work / "data-bin").exists()
    with pytest.raises(SystemExit):  # argparse: a missing required option, exit 2
        parallel.main(base[2:])
