"""Shared processing and WMT pipelines on small local fixtures (no network)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from localnmt.data import bpe, wmt14_en_de, wmt17_zh_en
from localnmt.data.length_clean import keep_pair
from localnmt.data.sgm import sgm_segments
from localnmt.data.text_tokenize import tokenize_file, tokenize_moses, tokenize_zh
from localnmt.data.validate import count_lines_checked, validate_parallel
from localnmt.errors import DataError
from localnmt.testing import exit_status

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def lines(lang: str) -> list[str]:
    return (FIX / f"sample.{lang}").read_text(encoding="utf-8").splitlines()


def write(path: Path, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def sgm(rows: list[str]) -> list[str]:
    body = [f'<seg id="{i}"> {r} </seg>' for i, r in enumerate(rows, 1)]
    return ['<srcset setid="t" srclang="any">', '<doc docid="d">', *body, "</doc>", "</srcset>"]


def tgz(path: Path, members: dict[str, list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        for name, rows in members.items():
            data = "".join(r + "\n" for r in rows).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_moses_and_jieba():
    assert (
        tokenize_moses("Das ist ein Test-Fall, oder?", "de") == "Das ist ein Test @-@ Fall , oder ?"
    )
    assert tokenize_moses("It's «quoted»", "en") == 'It \'s " quoted "'
    zh = tokenize_zh("今天天气很好。")
    assert len(zh.split()) >= 3 and zh.split()[-1] == "。"
    assert "  " not in zh and zh.replace(" ", "") == "今天天气很好。"


def test_tokenize_file_parallel_keeps_order(tmp_path):
    out = tmp_path / "tok.de"
    n = tokenize_file(FIX / "sample.de", out, "de", workers=2)
    got = out.read_text(encoding="utf-8").splitlines()
    assert n == 40 and got == [tokenize_moses(s, "de") for s in lines("de")]


@pytest.mark.parametrize("kind", ["subword_nmt", "sentencepiece"])
def test_bpe_learn_apply(tmp_path, kind):
    en = write(tmp_path / "tok.en", [tokenize_moses(s, "en") for s in lines("en")])
    zh = write(tmp_path / "tok.zh", [tokenize_zh(s) for s in lines("zh")])
    model = tmp_path / bpe.model_filename(kind)
    bpe.learn(kind, [en, zh], model, 120)
    out = tmp_path / "bpe.en"
    assert bpe.apply_file(kind, model, en, out) == 40
    seg = out.read_text(encoding="utf-8").splitlines()
    marker = "@@" if kind == "subword_nmt" else "\u2581"
    assert any(marker in s for s in seg)
    if kind == "subword_nmt":
        assert [s.replace("@@ ", "") for s in seg] == en.read_text().splitlines()


def test_unknown_bpe_kind():
    with pytest.raises(DataError, match="unknown --bpe"):
        bpe.model_filename("wordpiece")


def test_validation_errors(tmp_path):
    a = write(tmp_path / "a.en", ["one", "two", "three"])
    b = write(tmp_path / "b.de", ["eins", "zwei"])
    with pytest.raises(DataError, match=r"b\.de has 2 .*first unmatched line: 3"):
        validate_parallel(a, b)
    with pytest.raises(DataError, match="missing input file"):
        validate_parallel(a, tmp_path / "nope.de")
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"gut\nnoch gut\nkaputt \xff\xfe hier\n")
    with pytest.raises(DataError, match=r"bad\.de:3: invalid UTF-8"):
        count_lines_checked(bad)
    gz = tmp_path / "c.en.gz"
    blob = gzip.compress("".join(f"line {i} {i * i}\n" for i in range(5000)).encode())
    gz.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataError, match=r"c\.en\.gz: truncated or corrupt gzip"):
        count_lines_checked(gz)


def test_length_clean_and_sgm():
    assert keep_pair("a b c", "x y", 1, 250, 1.5)
    assert not keep_pair("a b c d", "x y", 1, 250, 1.5)
    assert not keep_pair("", "x", 1, 250, 1.5)
    assert not keep_pair("a " * 51, "x " * 51, 1, 50, 9)
    assert list(sgm_segments(sgm(["Hello  world", "Bye"]))) == ["Hello world", "Bye"]


def wmt14_raw(root: Path) -> Path:
    """A raw directory shaped like the WMT14 downloads, from the fixture sentences."""
    en, de = lines("en"), lines("de")
    tgz(
        root / "training-parallel-europarl-v7.tgz",
        {"training/europarl-v7.de-en.en": en[:20], "training/europarl-v7.de-en.de": de[:20]},
    )
    write(root / "commoncrawl.de-en.en", en[20:34])  # already-extracted plain files work too
    write(root / "commoncrawl.de-en.de", de[20:34])
    with gzip.open(root / "news-commentary-v9.de-en.en.gz", "wt", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in en[:10]))
    with gzip.open(root / "news-commentary-v9.de-en.de.gz", "wt", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in de[:10]))
    tgz(root / "dev.tgz", {"dev/newstest2013.en": en[34:], "dev/newstest2013.de": de[34:]})
    tgz(
        root / "test-full.tgz",
        {
            "test-full/newstest2014-deen-src.en.sgm": sgm(en[30:38]),
            "test-full/newstest2014-deen-ref.de.sgm": sgm(de[30:38]),
        },
    )
    write(root / "test" / "newstest2014-deen-src.en.sgm", sgm(en[32:37]))
    write(root / "test" / "newstest2014-deen-ref.de.sgm", sgm(de[32:37]))
    return root  # fmt: skip


def test_wmt14_process_on_fixtures(tmp_path, capsys):
    raw = wmt14_raw(tmp_path / "raw")
    work = tmp_path / "work"
    args = ["process", "--raw-dir", str(raw), "--workdir", str(work), "--bpe-merges", "150",
            "--workers", "1"]  # fmt: skip
    assert wmt14_en_de.main(args) == 0
    data_bin = work / "data-bin"
    assert capsys.readouterr().out.strip().endswith(str(data_bin))
    assert len((work / "raw" / "train.en").read_text().splitlines()) == 44
    assert len((work / "raw" / "test.de").read_text().splitlines()) == 8
    assert len((work / "raw" / "test_filtered.de").read_text().splitlines()) == 5
    for lang in ("en", "de"):  # the filtered set's raw text also under its subset name
        filtered = (work / "raw" / f"test_filtered.{lang}").read_text(encoding="utf-8")
        assert (work / "raw" / f"test1.{lang}").read_text(encoding="utf-8") == filtered
    for name in ("train.en-de.en.bin", "valid.en-de.de.bin", "test.en-de.en.bin",
                 "test1.en-de.de.bin", "dict.en.txt", "bpe.codes"):  # fmt: skip
        assert (data_bin / name).exists(), name
    assert (work / "bpe" / "train.clean.stats.json").exists()
    # second run: everything skipped
    assert wmt14_en_de.main(args) == 0
    out = capsys.readouterr().out
    assert "[run ]" not in out and "[skip] binarize" in out


def test_wmt_validation_error_keeps_outputs(tmp_path, capsys):
    raw = wmt14_raw(tmp_path / "raw")
    work = tmp_path / "work"
    args = ["process", "--raw-dir", str(raw), "--workdir", str(work), "--workers", "1"]
    keep = write(work / "raw" / "train.en", ["finished output from an earlier run"])
    write(raw / "commoncrawl.de-en.de", lines("de")[20:33])  # one line short
    assert exit_status(wmt14_en_de.main, args) == 2
    err = capsys.readouterr().err
    assert "commoncrawl.de-en.de has 13" in err and "first unmatched line: 14" in err
    assert keep.read_text() == "finished output from an earlier run\n"
    (raw / "commoncrawl.de-en.de").write_bytes(b"ok\n" * 5 + b"\xc3\x28 broken\n" + b"ok\n" * 8)
    assert exit_status(wmt14_en_de.main, args) == 2
    assert "commoncrawl.de-en.de:6: invalid UTF-8" in capsys.readouterr().err
    (raw / "test-full.tgz").write_bytes((raw / "test-full.tgz").read_bytes()[:60])
    write(raw / "commoncrawl.de-en.de", lines("de")[20:34])
    assert exit_status(wmt14_en_de.main, args) == 2
    assert "test-full.tgz: truncated or corrupt archive" in capsys.readouterr().err


def test_wmt17_zh_en_on_fixtures(tmp_path, capsys):
    raw = tmp_path / "raw"
    zh, en = lines("zh"), lines("en")
    tgz(
        raw / "training-parallel-nc-v12.tgz",
        {
            "training/news-commentary-v12.zh-en.zh": zh[:30],
            "training/news-commentary-v12.zh-en.en": en[:30],
        },
    )
    write(raw / "cwmt" / "casia2015.zh", zh[5:25])
    write(raw / "cwmt" / "casia2015.en", en[5:25])
    write(raw / "dev" / "newsdev2017-zhen-src.zh.sgm", sgm(zh[30:35]))
    write(raw / "dev" / "newsdev2017-zhen-ref.en.sgm", sgm(en[30:35]))
    write(raw / "test" / "newstest2017-zhen-src.zh.sgm", sgm(zh[35:]))
    write(raw / "test" / "newstest2017-zhen-ref.en.sgm", sgm(en[35:]))  # fmt: skip
    work = tmp_path / "work"
    base = ["process", "--raw-dir", str(raw), "--workdir", str(work), "--workers", "1"]
    assert exit_status(wmt17_zh_en.main, base) == 2
    assert "manual download" in capsys.readouterr().err
    assert wmt17_zh_en.main([*base, "--allow-missing-manual", "--bpe-merges", "100"]) == 0
    data_bin = work / "data-bin"
    assert (work / "raw" / "train.zh").read_text().count("\n") == 50
    tok = (work / "tok" / "train.zh").read_text(encoding="utf-8").splitlines()
    assert tok[0].replace(" ", "") == zh[0] and " " in tok[0]
    assert (data_bin / "bpe.zh.codes").exists() and (data_bin / "bpe.en.codes").exists()
    assert (data_bin / "dict.zh.txt").read_text() != (data_bin / "dict.en.txt").read_text()
    assert (data_bin / "test.zh-en.zh.bin").exists()
