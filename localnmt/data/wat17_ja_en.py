"""WAT17 Japanese→English on ASPEC-JE (Yang et al. 2019 CSAN, Table 2, Ja⇒En column).

As Morishita et al. (2017): train on the first two sections of ASPEC-JE train
(``train-1.txt`` + ``train-2.txt``, about 2M pairs), ``dev.txt`` for validation and
``test.txt`` (1812 pairs) for test. ASPEC is distributed on request only
(https://jipsti.jst.go.jp/aspec/), so this pipeline reads the user's local copy:
``--aspec-dir`` is the ``ASPEC-JE`` directory (files found either in its ``train/``,
``dev/``, ``test/`` subfolders or directly in it).

ASPEC lines are `` ||| ``-separated: train ``score ||| id ||| n ||| ja ||| en`` (5 fields),
dev/test ``id ||| n ||| ja ||| en`` (4 fields). Japanese is segmented with janome, English
with Moses; then BPE with 32K merges learned jointly and a joined dictionary (so the training
recipes' ``--share-all-embeddings`` works; ``--separate`` for per-language BPE and
dictionaries), fairseq-preprocess.
Training pairs are filtered after BPE to 1..250 subwords with ratio ≤ 9 (Moses' default;
a 1.5 ratio would drop many pairs, Japanese has more tokens per sentence).

    python -m localnmt.data.wat17_ja_en process --aspec-dir ASPEC-JE --workdir OUT
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localnmt.atomic import atomic_open, write_json
from localnmt.data.corpus_pipeline import LengthClean, ProcessConfig, process_corpus
from localnmt.data.local_cli import main as local_main
from localnmt.data.validate import iter_lines_checked
from localnmt.errors import DataError
from localnmt.steps import Log, StepRunner

SEP = " ||| "
#: split → (files relative to the ASPEC-JE directory, fields per line)
FILES: dict[str, tuple[tuple[str, ...], int]] = {
    "train": (("train/train-1.txt", "train/train-2.txt"), 5),
    "valid": (("dev/dev.txt",), 4),
    "test": (("test/test.txt",), 4),
}
HINT = (
    "ASPEC is distributed on request (https://jipsti.jst.go.jp/aspec/); pass its ASPEC-JE "
    "directory as --aspec-dir"
)

CONFIG = ProcessConfig(
    src="ja", tgt="en", bpe="subword_nmt", bpe_size=32000, joint_bpe=True,
    joined_dictionary=True, length_clean=LengthClean(1, 250, 9.0, stage="bpe"),
    tests=("test",),
)  # fmt: skip


def locate(root: Path, rel: str) -> Path | None:
    """``root/rel`` or ``root/<basename>`` (plain or ``.gz``), whichever exists."""
    for cand in (root / rel, root / Path(rel).name):
        for p in (cand, cand.with_name(cand.name + ".gz")):
            if p.is_file():
                return p
    return None


def parse_aspec_line(line: str, n_fields: int, where: str) -> tuple[str, str]:
    """(Japanese, English) of one ASPEC line with ``n_fields`` `` ||| ``-separated fields."""
    parts = line.split(SEP)
    if len(parts) != n_fields:
        raise DataError(
            f"{where}: expected {n_fields} fields separated by '{SEP.strip()}', found {len(parts)}"
        )
    return parts[-2].strip(), parts[-1].strip()


def extract_aspec(root: Path, raw_dir: Path, log: Log = print) -> dict:
    """Write ``raw_dir/{train,valid,test}.{ja,en}`` from the ASPEC-JE files."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"ASPEC directory not found: {root}. {HINT}")
    paths = {s: [locate(root, f) for f in files] for s, (files, _) in FILES.items()}
    missing = [f for s, (files, _) in FILES.items() for f, p in zip(files, paths[s]) if p is None]
    if missing:
        raise DataError(f"{root}: missing ASPEC file(s) {', '.join(missing)}. {HINT}")
    counts: dict[str, int] = {}
    for split, (_, n_fields) in FILES.items():
        n = 0
        with atomic_open(raw_dir / f"{split}.ja") as fj, atomic_open(raw_dir / f"{split}.en") as fe:
            for path in paths[split]:
                for lineno, line in enumerate(iter_lines_checked(path), start=1):
                    ja, en = parse_aspec_line(line, n_fields, f"{path}:{lineno}")
                    fj.write(ja + "\n")
                    fe.write(en + "\n")
                    n += 1
        if n == 0:
            raise DataError(f"{split}: no sentence pairs in {', '.join(map(str, paths[split]))}")
        counts[split] = n
        log(f"  {split}: {n} pairs")
    write_json(raw_dir / "sources.json", {"root": str(root), "splits": counts})
    return counts


def process_wat17(aspec_dir: Path, workdir: Path, cfg: ProcessConfig = CONFIG, *,
                  log: Log = print) -> Path:  # fmt: skip
    """ASPEC-JE files → ``workdir/data-bin`` (resumable)."""
    workdir = Path(workdir)
    runner = StepRunner(workdir, log)
    raw_dir = workdir / "raw"
    runner.run(
        "raw",
        lambda: extract_aspec(aspec_dir, raw_dir, log),
        outputs=[raw_dir / f"{s}.{lang}" for s in FILES for lang in ("ja", "en")],
        inputs=[aspec_dir],  # every file's contents
    )
    return process_corpus(raw_dir, workdir, cfg, runner, raw_step="raw", log=log)


def _run(args: argparse.Namespace, cfg: ProcessConfig, log: Log) -> Path:
    return process_wat17(args.aspec_dir, args.workdir, cfg, log=log)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    return local_main(argv, name="wat17_ja_en", config=CONFIG, run=_run,
                      inputs={"aspec-dir": "the ASPEC-JE directory"})  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
