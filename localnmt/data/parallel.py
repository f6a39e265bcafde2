"""Your own parallel corpus, any language pair: raw text files → fairseq data-bin.

    python -m localnmt.data.parallel --src en --tgt de --train corpus/train \\
        --valid corpus/dev --test corpus/test,corpus/test2 --workdir runs/data/mine \\
        [--bpe subword_nmt|sentencepiece] [--bpe-merges N] [--separate] [--length-clean]
        [--pretokenized] [--no-target-normalize] [--workers N]

``PREFIX.<src>`` / ``PREFIX.<tgt>`` are line-aligned raw text files (``PREFIX.<lang>.gz`` is
read too). Every file is checked first (present, UTF-8, not empty, same line count on both
sides: one message, exit 2, nothing written). The files are copied to ``WORKDIR/raw`` under
the data-bin's subset names (``train``, ``valid``, ``test``, ``test1``, ... in the order the
test sets are given), then :func:`localnmt.data.corpus_pipeline.process_corpus` tokenises
them (jieba for ``zh``, janome for ``ja``, Moses otherwise; ``--pretokenized`` skips it),
learns subwords on train, optionally length-cleans train (``--length-clean``: 1..250 subwords,
ratio 1.5, as fairseq's WMT script), and binarises ``WORKDIR/data-bin``. Valid and test sets
keep every line. Resumable: rerunning the same command skips finished steps. Prints the
data-bin path last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from localnmt.atomic import atomic_open, write_json
from localnmt.data.bpe import BPE_KINDS
from localnmt.data.command import run_data_command
from localnmt.data.corpus_layout import count_lines
from localnmt.data.corpus_pipeline import LengthClean, ProcessConfig, process_corpus, subset_names
from localnmt.data.fs_errors import check_workdir, located_in
from localnmt.data.max_positions import DEFAULT_MAX_POSITIONS, MAX_POSITIONS_HELP
from localnmt.data.validate import iter_lines_checked, not_regular, validate_parallel
from localnmt.errors import DataError
from localnmt.steps import Log, StepRunner

_LANG = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def side_file(prefix: str | Path, lang: str) -> Path:
    """``PREFIX.<lang>`` or ``PREFIX.<lang>.gz`` (exactly one of them must exist)."""
    plain = Path(f"{prefix}.{lang}")
    gz = Path(f"{plain}.gz")
    found = [p for p in (plain, gz) if p.exists()]
    if not found:
        raise DataError(f"missing input file: {plain} (or {gz.name})")
    for path in found:
        if problem := not_regular(path):
            raise DataError(problem)
    if len(found) == 2:
        raise DataError(f"both {plain} and {gz} exist; keep one of them")
    return found[0]


def check_langs(src: str, tgt: str) -> None:
    """Language codes fairseq can put in file names (``train.en-de.en``), and distinct."""
    for lang in (src, tgt):
        if not _LANG.match(lang):
            raise DataError(
                f"language code {lang!r}: use letters, digits and '_' only (no '-' or '.'), "
                "e.g. en, de, zh, pt_br"
            )
    if src == tgt:
        raise DataError(f"--src and --tgt are both {src!r}; give two different language codes")


def resolve_inputs(
    src: str, tgt: str, train: str, valid: str, tests: list[str]
) -> dict[str, dict[str, Path]]:
    """Subset name → language → input file, subsets in data-bin order."""
    check_langs(src, tgt)
    if not tests:
        raise DataError("--test: give at least one test prefix")
    names = {"train": train, "valid": valid, **subset_names(tuple(tests))}
    return {s: {lang: side_file(p, lang) for lang in (src, tgt)} for s, p in names.items()}


def copy_raw(inputs: dict[str, dict[str, Path]], raw_dir: Path, log: Log = print) -> dict:
    """Validate every pair, then write ``raw_dir/<subset>.<lang>`` (decompressed, verbatim
    lines) and ``raw_dir/sources.json``. Nothing is written unless every input is valid."""
    counts = {}
    for subset, sides in inputs.items():
        a, b = sides.values()
        counts[subset] = validate_parallel(a, b)
    for subset, sides in inputs.items():
        for lang, path in sides.items():
            with atomic_open(raw_dir / f"{subset}.{lang}") as f:
                for line in iter_lines_checked(path):
                    f.write(line + "\n")
        log(f"  {subset}: {counts[subset]} lines from {', '.join(str(p) for p in sides.values())}")
    report = {
        subset: {"lines": counts[subset], "files": {k: str(p) for k, p in sides.items()}}
        for subset, sides in inputs.items()
    }
    write_json(raw_dir / "sources.json", report)
    return report


def prepare_parallel(
    src: str, tgt: str, train: str, valid: str, tests: list[str], workdir: Path, *,
    bpe: str = "subword_nmt", bpe_merges: int = 8000, separate: bool = False,
    length_clean: LengthClean | None = None, pretokenized: bool = False,
    normalize_target: bool = True, workers: int = 1, max_positions: int = DEFAULT_MAX_POSITIONS,
    log: Log = print,
) -> Path:  # fmt: skip
    """Build ``workdir/data-bin`` (and ``workdir/raw``) from the user's files; see the module
    docstring. Checks every subset's sentence count in the data-bin against its raw lines."""
    t0 = time.monotonic()
    inputs = resolve_inputs(src, tgt, train, valid, tests)
    workdir = check_workdir(Path(workdir))
    raw_dir = workdir / "raw"
    runner = StepRunner(workdir, log)
    files = [p for sides in inputs.values() for p in sides.values()]
    runner.run(
        "raw",
        lambda: copy_raw(inputs, raw_dir, log),
        outputs=[
            raw_dir / "sources.json",
            *(raw_dir / f"{s}.{lang}" for s in inputs for lang in (src, tgt)),
        ],  # fmt: skip
        params={"subsets": {subset: sorted(sides) for subset, sides in inputs.items()}},
        inputs=files,  # their contents, in subset order
    )
    cfg = ProcessConfig(
        src=src, tgt=tgt, bpe=bpe, bpe_size=bpe_merges, joint_bpe=not separate,
        joined_dictionary=not separate, length_clean=length_clean,
        tests=tuple(subset_names(tuple(tests))), workers=workers, pretokenized=pretokenized,
        normalize_target=normalize_target, max_positions=max_positions,
    )  # fmt: skip
    data_bin = process_corpus(raw_dir, workdir, cfg, runner, raw_step="raw", log=log)
    # the raw line counts were taken while copying (raw/sources.json): no second read
    copied = json.loads((raw_dir / "sources.json").read_text(encoding="utf-8"))
    read = {s: copied[s]["lines"] for s in inputs}
    kept = {s: count_lines(data_bin, s, src, tgt) for s in inputs}
    for s in inputs:
        log(f"  {s}: {read[s]} lines in, {kept[s]} sentences in the data-bin")
        if s != "train" and kept[s] != read[s]:
            raise DataError(f"{s}: {read[s]} raw lines but {kept[s]} binarised sentences")
    log(f"data-bin at {data_bin} ({time.monotonic() - t0:.1f}s; {len(runner.ran)} steps run, "
        f"{len(runner.skipped)} skipped)")  # fmt: skip
    return data_bin


def build_parser() -> argparse.ArgumentParser:
    """The command line of :func:`main`."""
    ap = argparse.ArgumentParser(
        prog="prepare_parallel.sh",
        description="Raw parallel text files (PREFIX.<lang>, .gz accepted) → fairseq data-bin.",
    )
    ap.add_argument("--src", required=True, help="source language code (zh: jieba, ja: janome, "
                    "otherwise Moses)")  # fmt: skip
    ap.add_argument("--tgt", required=True, help="target language code")
    ap.add_argument("--train", required=True, help="PREFIX of the training files")
    ap.add_argument("--valid", required=True, help="PREFIX of the validation files")
    ap.add_argument(
        "--test",
        required=True,
        help="PREFIX[,PREFIX...]: test sets, binarised as test, test1, ... in order",
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        required=True,
        help="output: WORKDIR/data-bin, WORKDIR/raw/<subset>.<lang> (references)",
    )
    ap.add_argument("--bpe", choices=BPE_KINDS, default="subword_nmt")
    ap.add_argument(
        "--bpe-merges",
        type=int,
        default=8000,
        help="subword-nmt merges, or sentencepiece vocabulary size (default 8000)",
    )
    ap.add_argument(
        "--separate",
        action="store_true",
        help="separate subword models and dictionaries per language (default: joint)",
    )
    ap.add_argument(
        "--length-clean",
        action="store_true",
        help="drop training pairs outside 1..--max-len subwords or with a length "
        "ratio above --max-ratio (valid and test sets are never cleaned)",
    )
    ap.add_argument("--max-len", type=int, default=250, help="with --length-clean")
    ap.add_argument("--max-ratio", type=float, default=1.5, help="with --length-clean")
    ap.add_argument(
        "--pretokenized",
        action="store_true",
        help="the files are already tokenised: only subwords are applied",
    )
    ap.add_argument(
        "--no-target-normalize",
        action="store_true",
        help="no Moses punctuation normalisation of the target side (detokenised "
        "output can then match the raw references' punctuation exactly)",
    )
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument(
        "--max-positions",
        type=int,
        default=DEFAULT_MAX_POSITIONS,
        metavar="N",
        help=MAX_POSITIONS_HELP,
    )
    return ap  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: returns 0 (data-bin path printed last) or exits 2 with one
    ``prepare_parallel.sh: error: ...`` line."""
    ap = build_parser()
    args = ap.parse_args(argv)
    log = lambda m: print(m, flush=True)  # noqa: E731
    lc = LengthClean(1, args.max_len, args.max_ratio, "bpe") if args.length_clean else None

    def build() -> Path:
        if args.bpe_merges < 1 or args.workers < 1:
            raise DataError("--bpe-merges and --workers must be positive")
        with located_in(args.workdir):  # checked once the inputs are
            return prepare_parallel(
                args.src, args.tgt, args.train, args.valid,
                [t for t in args.test.split(",") if t], args.workdir,
                bpe=args.bpe, bpe_merges=args.bpe_merges, separate=args.separate,
                length_clean=lc, pretokenized=args.pretokenized,
                normalize_target=not args.no_target_normalize, workers=args.workers,
                max_positions=args.max_positions, log=log,
            )  # fmt: skip

    return run_data_command(ap.prog, build)


if __name__ == "__main__":
    sys.exit(main())
