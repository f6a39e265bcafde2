"""WMT14 En-Ru processing on a tiny Russian fixture shaped like the downloads (no network)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from localnmt.data import wmt_en_ru
from localnmt.data.text_tokenize import tokenize_moses
from localnmt.testing import exit_status

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lang" / "ru"


def _lines(lang: str) -> list[str]:
    return (FIX / f"sample.{lang}").read_text(encoding="utf-8").splitlines()


def _write(path: Path, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")


def _sgm(rows: list[str]) -> list[str]:
    body = [f'<seg id="{i}"> {r} </seg>' for i, r in enumerate(rows, 1)]
    return ['<srcset setid="t" srclang="any">', '<doc docid="d">', *body, "</doc>", "</srcset>"]


def _tgz(path: Path, members: dict[str, list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        for name, rows in members.items():
            data = "".join(r + "\n" for r in rows).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _raw(root: Path) -> Path:
    en, ru = _lines("en"), _lines("ru")
    _tgz(
        root / "training-parallel-commoncrawl.tgz",
        {"commoncrawl.ru-en.en": en[:14], "commoncrawl.ru-en.ru": ru[:14]},
    )
    _tgz(
        root / "training-parallel-nc-v9.tgz",
        {
            "training/news-commentary-v9.ru-en.en": en[14:24],
            "training/news-commentary-v9.ru-en.ru": ru[14:24],
        },
    )
    _tgz(root / "dev.tgz", {"dev/newstest2013.en": en[24:30], "dev/newstest2013.ru": ru[24:30]})
    _tgz(
        root / "test-full.tgz",
        {
            "test-full/newstest2014-ruen-src.en.sgm": _sgm(en[30:35]),
            "test-full/newstest2014-ruen-ref.ru.sgm": _sgm(ru[30:35]),
        },
    )
    _tgz(
        root / "wmt18-test.tgz",
        {
            "test/newstest2018-enru-src.en.sgm": _sgm(en[35:]),
            "test/newstest2018-enru-ref.ru.sgm": _sgm(ru[35:]),
        },
    )
    return root  # fmt: skip


def test_moses_russian():
    assert tokenize_moses("Правительство одобрило «новый закон».", "ru") == (
        'Правительство одобрило " новый закон " .'
    )


def test_en_ru_process(tmp_path, capsys):
    raw = _raw(tmp_path / "raw")
    work = tmp_path / "work"
    base = ["process", "--raw-dir", str(raw), "--workdir", str(work), "--workers", "1",
            "--bpe-merges", "80"]  # fmt: skip
    assert exit_status(wmt_en_ru.main, base) == 2
    assert "Yandex 1M" in capsys.readouterr().err
    _write(raw / "corpus.en_ru.1m.en", _lines("en")[:6])
    _write(raw / "corpus.en_ru.1m.ru", _lines("ru")[:6])
    assert wmt_en_ru.main(base) == 0
    tok = (work / "tok" / "train.ru").read_text(encoding="utf-8").splitlines()
    assert len(tok) == 30 and tok[0] == tokenize_moses(_lines("ru")[0], "ru")
    assert len((work / "raw" / "test2018.ru").read_text().splitlines()) == 5
    assert (work / "raw" / "test1.ru").read_text() == (work / "raw" / "test2018.ru").read_text()
    data_bin = work / "data-bin"
    for name in ("train.en-ru.ru.bin", "valid.en-ru.en.bin", "test.en-ru.ru.bin",
                 "test1.en-ru.en.bin", "dict.ru.txt", "bpe.codes"):  # fmt: skip
        assert (data_bin / name).exists(), name


def test_batch_25k():
    assert wmt_en_ru.update_freq_25k(1, 4096) == 7
    assert wmt_en_ru.update_freq_25k(4, 4096) == 2
    assert wmt_en_ru.update_freq_25k(8, 4096) == 1
