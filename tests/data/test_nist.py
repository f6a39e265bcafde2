"""NIST Zh-En processing (local LDC + MT0x files) and multi-reference BLEU."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import pytest
import sacrebleu

from localnmt.data import nist_zh_en
from localnmt.evaluation import multi_ref
from localnmt.testing import exit_status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "eval"))

from tinytasks import lines as _lines  # noqa: E402
from tinytasks import nist_dirs  # noqa: E402
from tinytasks import write as _write  # noqa: E402


def _nist_dirs(root: Path) -> tuple[Path, Path]:
    """References ``"<English> Ref<r>"``: upper case, so lower-casing shows."""
    return nist_dirs(root, [lambda e, r=r: f"{e} Ref{r}" for r in range(4)])


def test_nist_process(tmp_path, capsys):
    ldc, nist = _nist_dirs(tmp_path)
    work = tmp_path / "work"
    args = ["process", "--ldc-dir", str(ldc), "--nist-dir", str(nist), "--workdir", str(work),
            "--bpe-merges", "80", "--workers", "1"]  # fmt: skip
    assert nist_zh_en.main(args) == 0
    raw_en = (work / "raw" / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(raw_en) == 6 * 8 and raw_en == [s.lower() for s in raw_en]
    assert raw_en[0] == _lines("en")[0].lower()
    assert (work / "raw" / "valid.zh").read_text(encoding="utf-8").splitlines() == _lines("zh")[:4]
    ref3 = (work / "refs" / "mt08.ref3").read_text(encoding="utf-8").splitlines()
    assert ref3 == [f"{e} ref3".lower() for e in _lines("en")[20:24]]
    data_bin = work / "data-bin"
    for name in ("train.zh-en.zh.bin", "test.zh-en.en.bin", "test4.zh-en.zh.bin",
                 "dict.zh.txt", "dict.en.txt", "bpe.codes"):  # fmt: skip
        assert (data_bin / name).exists(), name
    subsets = (work / "refs" / "subsets.json").read_text()
    assert '"test": "mt03"' in subsets and '"test4": "mt08"' in subsets
    # a missing reference is named
    (nist / "mt05.ref2").unlink()
    assert exit_status(nist_zh_en.main, [*args[:6], str(tmp_path / "w2")]) == 2
    assert "missing mt05.ref2" in capsys.readouterr().err


def test_nist_missing_ldc_named(tmp_path, capsys):
    ldc, nist = _nist_dirs(tmp_path)
    (ldc / "LDC2004T08.en").unlink()
    args = ["process", "--ldc-dir", str(ldc), "--nist-dir", str(nist), "--workdir",
            str(tmp_path / "w")]  # fmt: skip
    assert exit_status(nist_zh_en.main, args) == 2
    err = capsys.readouterr().err
    assert "missing LDC2004T08.en" in err and "Hansards" in err


def _plain_multi_bleu(hyps, refs) -> float:
    """BLEU re-stated (Papineni et al. 2002): clipped n-gram precisions with the maximum count
    over references, brevity penalty with the closest reference length (shorter on ties)."""
    match, total = [0] * 4, [0] * 4
    c = r = 0
    for i, h in enumerate(hyps):
        ht = h.split()
        rts = [s[i].split() for s in refs]
        c += len(ht)
        r += min((abs(len(x) - len(ht)), len(x)) for x in rts)[1]
        for n in range(1, 5):
            hc = Counter(tuple(ht[k : k + n]) for k in range(len(ht) - n + 1))
            best: Counter = Counter()
            for x in rts:
                best |= Counter(tuple(x[k : k + n]) for k in range(len(x) - n + 1))
            match[n - 1] += sum(min(v, best[g]) for g, v in hc.items())
            total[n - 1] += max(0, len(ht) - n + 1)
    logp = sum(math.log(m / t) for m, t in zip(match, total)) / 4
    bp = 1.0 if c > r else math.exp(1 - r / c)
    return 100 * bp * math.exp(logp)


HYPS = ["the cat sat on the mat today", "a quick brown fox jumps over the lazy dog",
        "there is a book on the table"]  # fmt: skip
REFS = [
    ["the cat sat on a mat today", "a fast brown fox jumps over the lazy dog",
     "a book is on the table"],
    ["today the cat sat on the mat", "the quick brown fox jumped over a lazy dog",
     "there is a book on the desk"],
    ["the cat was sitting on the mat", "a quick brown fox leaps over the dog",
     "on the table there is a book"],
    ["the cat sat on the mat", "quick brown fox jumps over lazy dog",
     "there's a book on the table"],
]  # fmt: skip


def test_multi_ref_bleu_matches_plain_statement_and_sacrebleu():
    got = multi_ref.multi_ref_bleu(HYPS, REFS, lowercase=False, tokenize="none")
    assert got.score == pytest.approx(_plain_multi_bleu(HYPS, REFS), abs=1e-9)
    single = multi_ref.multi_ref_bleu(HYPS, REFS[:1], lowercase=False, tokenize="none")
    assert single.score < got.score
    upper = [h.upper() for h in HYPS]
    lower = multi_ref.multi_ref_bleu(upper, REFS)
    assert lower.score == pytest.approx(sacrebleu.corpus_bleu(upper, REFS, lowercase=True).score)
    assert lower.score == pytest.approx(multi_ref.multi_ref_bleu(HYPS, REFS).score)
    assert multi_ref.multi_ref_bleu(upper, REFS, lowercase=False).score < 1
    assert "case:lc" in lower.signature and "nrefs:4" in lower.signature
    with pytest.raises(ValueError, match="reference 1 has 2 lines"):
        multi_ref.multi_ref_bleu(HYPS, [REFS[0], REFS[1][:2]])


def test_score_sets_average_and_cli(tmp_path, capsys):
    for name, k in (("mt03", 3), ("mt04", 2)):
        for r, stream in enumerate(REFS):
            _write(tmp_path / f"{name}.ref{r}", stream[:k])
        _write(tmp_path / f"{name}.hyp", HYPS[:k])
    res = multi_ref.score_sets({"mt03": HYPS, "mt04": HYPS[:2]}, tmp_path)
    s3 = sacrebleu.corpus_bleu(HYPS, REFS, lowercase=True).score
    s4 = sacrebleu.corpus_bleu(HYPS[:2], [x[:2] for x in REFS], lowercase=True).score
    assert res.average == pytest.approx((s3 + s4) / 2)
    hyp_args = [a for n in ("mt03", "mt04") for a in ("--hyp", f"{n}={tmp_path / n}.hyp")]
    argv = ["--refs-dir", str(tmp_path), "--json", str(tmp_path / "o.json"), *hyp_args]
    assert multi_ref.main(argv) == 0
    out = capsys.readouterr().out
    assert f"average\t{(s3 + s4) / 2:.2f}" in out and (tmp_path / "o.json").exists()
