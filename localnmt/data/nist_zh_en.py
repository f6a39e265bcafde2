"""NIST Chinese→English (Zhang & Feng 2021 GMM paper, Table 2, "Nist Zh→En" column).

Train: 1.25M pairs from the LDC corpora LDC2002E18, LDC2003E07, LDC2003E14, the Hansards
portion of LDC2004T07, LDC2004T08 and LDC2005T06. The LDC releases come in several formats
(sgm, per-document files, alignment tables), so this pipeline takes them **already extracted**
as sentence-aligned plain text: ``--ldc-dir`` holds ``<name>.zh`` and ``<name>.en`` (plain or
``.gz``) for each name in :data:`LDC_CORPORA` (``LDC2004T07.*`` = its Hansards portion only).

Dev MT02, tests MT03, MT04, MT05, MT06, MT08, each with 4 references: ``--nist-dir`` holds
``mtXX.zh`` and ``mtXX.ref0`` .. ``mtXX.ref3`` (plain text, one segment a line).

English is lower-cased (before Moses tokenisation), Chinese segmented with jieba (the paper:
Stanford Segmenter, not available offline in Python), BPE with 30K merges learned jointly on
both sides ("on all texts") and a joined dictionary (the training recipes share all
embeddings; ``--separate`` for per-language BPE and dictionaries). Training
pairs are filtered after BPE to 1..250 subwords, ratio ≤ 9.

fairseq needs one target side: valid and test subsets are binarised with ``ref0``; the four
lower-cased references of each test set go to ``WORKDIR/refs/mtXX.ref{0..3}`` with
``refs/subsets.json`` (fairseq subset → set name), and are scored with
:mod:`localnmt.evaluation.multi_ref` (BLEU averaged over MT03–MT08).

    python -m localnmt.data.nist_zh_en process --ldc-dir LDC --nist-dir NIST --workdir OUT
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localnmt.atomic import atomic_open, write_json
from localnmt.data.corpus_pipeline import LengthClean, ProcessConfig, process_corpus
from localnmt.data.local_cli import main as local_main
from localnmt.data.validate import iter_lines_checked, validate_parallel
from localnmt.data.wat17_ja_en import locate
from localnmt.errors import DataError
from localnmt.steps import Log, StepRunner

LDC_CORPORA = ("LDC2002E18", "LDC2003E07", "LDC2003E14", "LDC2004T07", "LDC2004T08",
               "LDC2005T06")  # fmt: skip
DEV_SET = "mt02"
TEST_SETS = ("mt03", "mt04", "mt05", "mt06", "mt08")
N_REFS = 4
HINT_LDC = (
    "put each LDC corpus, extracted to sentence-aligned text, as <name>.zh and <name>.en in "
    "--ldc-dir (LDC2004T07: its Hansards portion only)"
)
HINT_NIST = "put mtXX.zh and its references mtXX.ref0..mtXX.ref3 in --nist-dir"

CONFIG = ProcessConfig(
    src="zh", tgt="en", bpe="subword_nmt", bpe_size=30000, joint_bpe=True,
    joined_dictionary=True, length_clean=LengthClean(1, 250, 9.0, stage="bpe"),
    tests=TEST_SETS,
)  # fmt: skip


def _need(root: Path, names: list[str], hint: str) -> list[Path]:
    found = [locate(root, n) for n in names]
    missing = [n for n, p in zip(names, found) if p is None]
    if missing:
        raise DataError(f"{root}: missing {', '.join(missing)}; {hint}")
    return found  # type: ignore[return-value]


def _copy(inp: Path, out, lower: bool) -> int:
    n = 0
    for line in iter_lines_checked(inp):
        out.write((line.lower() if lower else line) + "\n")
        n += 1
    return n


def extract_nist(ldc_dir: Path, nist_dir: Path, raw_dir: Path, refs_dir: Path,
                 log: Log = print) -> dict:  # fmt: skip
    """Write ``raw/{train,valid,mtXX}.{zh,en}`` (English lower-cased) and the test refs."""
    ldc_dir, nist_dir = Path(ldc_dir), Path(nist_dir)
    for d, hint in ((ldc_dir, HINT_LDC), (nist_dir, HINT_NIST)):
        if not d.is_dir():
            raise DataError(f"directory not found: {d}; {hint}")
    ldc = _need(ldc_dir, [f"{n}.{lang}" for n in LDC_CORPORA for lang in ("zh", "en")], HINT_LDC)
    sets = (DEV_SET, *TEST_SETS)
    nist = {
        s: _need(nist_dir, [f"{s}.zh", *[f"{s}.ref{r}" for r in range(N_REFS)]], HINT_NIST)
        for s in sets
    }
    counts: dict[str, int] = {}
    with atomic_open(raw_dir / "train.zh") as fz, atomic_open(raw_dir / "train.en") as fe:
        for zh, en in zip(ldc[0::2], ldc[1::2]):
            validate_parallel(zh, en)
            n = _copy(zh, fz, False)
            _copy(en, fe, True)
            log(f"  train: {zh.stem}: {n} pairs")
            counts[zh.stem] = n
    for s, (zh, *refs) in nist.items():
        for ref in refs:
            validate_parallel(zh, ref)
        split = "valid" if s == DEV_SET else s
        with atomic_open(raw_dir / f"{split}.zh") as fz, atomic_open(raw_dir / f"{split}.en") as fe:
            counts[s] = _copy(zh, fz, False)
            _copy(refs[0], fe, True)
        if s != DEV_SET:
            for r, ref in enumerate(refs):
                with atomic_open(refs_dir / f"{s}.ref{r}") as f:
                    _copy(ref, f, True)
        log(f"  {s}: {counts[s]} segments x {len(refs)} references")
    subsets = {("test" if i == 0 else f"test{i}"): s for i, s in enumerate(TEST_SETS)}
    write_json(refs_dir / "subsets.json", subsets)
    write_json(raw_dir / "sources.json", {"ldc": str(ldc_dir), "nist": str(nist_dir),
                                          "counts": counts})  # fmt: skip
    return counts


def process_nist(ldc_dir: Path, nist_dir: Path, workdir: Path, cfg: ProcessConfig = CONFIG, *,
                 log: Log = print) -> Path:  # fmt: skip
    """LDC + NIST files → ``workdir/data-bin`` and ``workdir/refs`` (resumable)."""
    workdir = Path(workdir)
    runner = StepRunner(workdir, log)
    raw_dir, refs_dir = workdir / "raw", workdir / "refs"
    outputs = [raw_dir / f"{s}.{lang}" for s in ("train", "valid", *TEST_SETS)
               for lang in ("zh", "en")]  # fmt: skip
    outputs += [refs_dir / f"{s}.ref{r}" for s in TEST_SETS for r in range(N_REFS)]
    runner.run(
        "raw",
        lambda: extract_nist(ldc_dir, nist_dir, raw_dir, refs_dir, log),
        outputs=outputs,
        params={"lower": True},
        inputs=[ldc_dir, nist_dir],  # every file's contents
    )
    return process_corpus(raw_dir, workdir, cfg, runner, raw_step="raw", log=log)


def _run(args: argparse.Namespace, cfg: ProcessConfig, log: Log) -> Path:
    return process_nist(args.ldc_dir, args.nist_dir, args.workdir, cfg, log=log)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    inputs = {"ldc-dir": "extracted LDC corpora <name>.zh/.en",
              "nist-dir": "mtXX.zh and mtXX.ref0..3 for MT02-MT08"}  # fmt: skip
    return local_main(argv, name="nist_zh_en", config=CONFIG, run=_run, inputs=inputs)


if __name__ == "__main__":
    sys.exit(main())
