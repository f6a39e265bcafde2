"""Gettext corpus: .mo reading, cleaning filters, split, resumable end-to-end build."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from localnmt.data.gettext_clean import (
    CleanConfig,
    clean_pairs,
    dedup_source,
    normalize_ws,
    reject_reason,
    strip_accelerators,
)
from localnmt.data.gettext_corpus import build_raw, find_catalogs, prepare_gettext_pair
from localnmt.data.mo_reader import MoEntry, entry_pairs, parse_mo_bytes, read_mo
from localnmt.data.split import hash_split

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"
HEADER = "Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=2; plural=(n != 1);\n"


def write_mo(path: Path, entries: list[MoEntry], header: str = HEADER, big: bool = False) -> None:
    """Write a GNU .mo file (the layout of CPython's Tools/i18n/msgfmt.py)."""
    items = {"": header}
    for e in entries:
        key = e.msgid if e.msgid_plural is None else f"{e.msgid}\x00{e.msgid_plural}"
        if e.context is not None:
            key = f"{e.context}\x04{key}"
        items[key] = "\x00".join(e.msgstr)
    keys = sorted(items)
    ids = strs = b""
    offsets = []
    for k in keys:
        kb, vb = k.encode(), items[k].encode()
        offsets.append((len(ids), len(kb), len(strs), len(vb)))
        ids += kb + b"\0"
        strs += vb + b"\0"
    n = len(keys)
    keystart = 7 * 4 + 16 * n
    valuestart = keystart + len(ids)
    koffsets, voffsets = [], []
    for o1, l1, o2, l2 in offsets:
        koffsets += [l1, o1 + keystart]
        voffsets += [l2, o2 + valuestart]
    e = ">" if big else "<"
    out = struct.pack(e + "7I", 0x950412DE, 0, n, 7 * 4, 7 * 4 + n * 8, 0, 0)
    out += struct.pack(e + f"{2 * n}I", *koffsets) + struct.pack(e + f"{2 * n}I", *voffsets)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out + ids + strs)


def sample_lines(lang: str) -> list[str]:
    return (FIX / f"sample.{lang}").read_text(encoding="utf-8").splitlines()


NOISE = [
    MoEntry("Open _File", ("_Datei öffnen",)),
    MoEntry("%d file copied", ("%d Datei kopiert", "%d Dateien kopiert"), "%d files copied"),
    MoEntry("Save", ("Speichern",), context="menu"),
    MoEntry("Hello {name}", ("Hallo {name}",)),
    MoEntry("<b>Bold</b> text", ("<b>Fetter</b> Text",)),
    MoEntry("Line one\nLine two", ("Zeile eins\nZeile zwei",)),
    MoEntry("Set $HOME first", ("Zuerst $HOME setzen",)),
    MoEntry("Untranslated", ("",)),
    MoEntry("Germany", ("Germany",)),
]


@pytest.fixture(scope="module")
def locale_root(tmp_path_factory) -> Path:
    """A locale tree with one German catalog: the fixture sentences plus noisy entries."""
    root = tmp_path_factory.mktemp("locale")
    good = [MoEntry(e, (d,)) for e, d in zip(sample_lines("en"), sample_lines("de"))]
    write_mo(root / "de" / "LC_MESSAGES" / "app.mo", good[:25] + NOISE)
    write_mo(root / "de" / "LC_MESSAGES" / "lib.mo", good[20:], big=True)  # overlap: dedup
    return root


def test_read_mo_contexts_plurals_header(tmp_path):
    path = tmp_path / "x.mo"
    write_mo(path, NOISE)
    header, entries = read_mo(path)
    assert header["Content-Type"].endswith("UTF-8")
    by_id = {e.msgid: e for e in entries}
    assert "" not in by_id  # header skipped
    assert by_id["Save"].context == "menu"
    plural = by_id["%d file copied"]
    assert plural.msgid_plural == "%d files copied"
    assert list(entry_pairs(plural)) == [
        ("%d file copied", "%d Datei kopiert"),
        ("%d files copied", "%d Dateien kopiert"),
    ]
    assert list(entry_pairs(by_id["Untranslated"])) == []  # empty translation skipped


def test_read_mo_big_endian_and_garbage(tmp_path):
    write_mo(tmp_path / "b.mo", NOISE[:2], big=True)
    assert len(read_mo(tmp_path / "b.mo")[1]) == 2
    with pytest.raises(ValueError, match="bad magic"):
        parse_mo_bytes(b"\0" * 40)


def test_accelerators_whitespace():
    assert strip_accelerators("_File") == "File"
    assert strip_accelerators("Sa_ve As") == "Save As"
    assert strip_accelerators("&Open") == "Open"
    assert strip_accelerators("Salt && Pepper") == "Salt & Pepper"
    assert strip_accelerators("文件(_F)") == "文件"
    assert strip_accelerators("foo_bar_baz") is None
    assert normalize_ws("  a \t b\u00a0 c ") == "a b c"


@pytest.mark.parametrize(
    "src,tgt,reason",
    [
        ("Copied %s", "Kopiert %s", "placeholder"),
        ("Value %(name)s", "Wert %(name)s", "placeholder"),
        ("Item {0}", "Objekt {0}", "placeholder"),
        ("Set ${PATH}", "Setze ${PATH}", "placeholder"),
        ("<i>x</i> y", "<i>x</i> y", "markup"),
        ("See https://example.org", "Siehe https://example.org", "code_like"),
        ("---", "---", "no_letters"),
        ("Name", "Name", "untranslated"),
        ("one two three four five six seven eight", "eins", "length_ratio"),
        ("Open the file", "Die Datei öffnen", None),
    ],
)
def test_filters(src, tgt, reason):
    assert reject_reason(src, tgt, "de", CleanConfig()) == reason


def test_chinese_target_must_be_chinese():
    assert reject_reason("Open", "Open file", "zh_CN", CleanConfig()) == "untranslated"
    assert reject_reason("Open the file", "打开文件", "zh_CN", CleanConfig()) is None


def test_clean_counts_and_dedup():
    pairs = [(e.msgid, e.msgstr[0]) for e in NOISE if e.msgstr[0]] + [
        ("Open", "Öffnen"),
        ("Open", "Öffnen"),
        ("Open", "Aufmachen"),
        ("Close", "Schließen"),
    ]
    kept, removed = clean_pairs(pairs, "de", CleanConfig())
    assert ("Open File", "Datei öffnen") in kept and ("Save", "Speichern") in kept
    assert removed["multiline"] == 1 and removed["markup"] == 1 and removed["placeholder"] == 3
    deduped, n_dup = dedup_source(kept + kept[::-1])
    assert dict(deduped)["Open"] == "Öffnen"  # most frequent target wins
    assert [s for s, _ in deduped] == sorted({s for s, _ in kept})
    assert n_dup == 2 * len(kept) - len(deduped)


def test_split_is_deterministic_and_disjoint():
    pairs = [(f"sentence {i}", f"Satz {i}") for i in range(500)]
    a = hash_split(pairs, n_valid=30, n_test=20, seed="s")
    b = hash_split(list(reversed(pairs)), n_valid=30, n_test=20, seed="s")
    assert a == b
    assert (len(a["test"]), len(a["valid"]), len(a["train"])) == (20, 30, 450)
    assert not {p[0] for p in a["test"]} & {p[0] for p in a["train"]}
    assert hash_split(pairs, n_valid=30, n_test=20, seed="other")["test"] != a["test"]


def test_build_raw_provenance(tmp_path, locale_root):
    prov = build_raw("en-de", tmp_path / "raw", locale_root=locale_root, log=lambda m: None)
    assert [Path(c["path"]).name for c in prov["catalogs"]] == ["app.mo", "lib.mo"]
    assert prov["after_dedup"] == 42  # 40 sentences + "Open File" + "Save" (context entry)
    counts = prov["final_counts"]
    assert counts["test"] == counts["valid"] == 4 and counts["train"] == prov["after_dedup"] - 8
    assert prov["filters"]["removed"]["placeholder"] >= 3
    saved = json.loads((tmp_path / "provenance.json").read_text())
    assert saved["split"]["seed"] == prov["split"]["seed"]
    en = (tmp_path / "raw" / "train.en").read_text().splitlines()
    assert (
        len(en) == counts["train"]
        and "Open File"
        in en
        + (tmp_path / "raw" / "valid.en").read_text().splitlines()
        + (tmp_path / "raw" / "test.en").read_text().splitlines()
    )


def test_prepare_gettext_end_to_end_and_resume(tmp_path, locale_root):
    logs: list[str] = []
    kw = dict(bpe_merges=100, locale_root=locale_root, log=logs.append, workers=1)
    data_bin = prepare_gettext_pair("en-de", tmp_path, **kw)
    assert data_bin == tmp_path / "data-bin"
    for name in ("dict.en.txt", "dict.de.txt", "train.en-de.en.bin", "test.en-de.de.idx"):
        assert (data_bin / name).exists(), name
    assert (data_bin / "dict.en.txt").read_bytes() == (data_bin / "dict.de.txt").read_bytes()
    assert "@@" in (tmp_path / "bpe" / "train.de").read_text()
    assert any(m.startswith("[run ] binarize") for m in logs)
    mtime = (data_bin / "train.en-de.en.bin").stat().st_mtime_ns
    logs.clear()
    assert prepare_gettext_pair("en-de", tmp_path, **kw) == data_bin
    assert not any(m.startswith("[run ]") for m in logs)
    assert sum(m.startswith("[skip]") for m in logs) >= 10
    assert (data_bin / "train.en-de.en.bin").stat().st_mtime_ns == mtime


def test_step_runner_fingerprint_chain(tmp_path):
    from localnmt.atomic import atomic_open
    from localnmt.steps import StepRunner

    def build(merges: int) -> list[str]:
        logs: list[str] = []
        r = StepRunner(tmp_path, logs.append)
        for name, params, deps in [("a", 1, ()), ("b", merges, ("a",)), ("c", 0, ("b",))]:

            def write(name=name):
                with atomic_open(tmp_path / name) as f:
                    f.write(name)

            r.run(name, write, outputs=[tmp_path / name], params=params, deps=deps)
        return r.ran

    assert build(10) == ["a", "b", "c"]
    assert build(10) == []
    assert build(20) == ["b", "c"]  # downstream of the changed step only
    (tmp_path / "c").unlink()
    assert build(20) == ["c"]  # a missing output reruns its step


REAL_DE = Path("/usr/share/locale/de/LC_MESSAGES")


@pytest.mark.skipif(not find_catalogs(("de",), Path("/usr/share/locale")), reason="no catalogs")
def test_real_gettext_en_de_small(tmp_path):
    data_bin = prepare_gettext_pair(
        "en-de", tmp_path, max_train=1500, bpe_merges=500, log=lambda m: None
    )
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["final_counts"] == {"test": 1000, "valid": 1000, "train": 1500}
    assert prov["after_dedup"] > 10000
    assert (data_bin / "valid.en-de.de.bin").exists()
    train_en = (tmp_path / "raw" / "train.en").read_text().splitlines()
    assert not any("%s" in s or "_" in s and s.startswith("_") for s in train_en)
