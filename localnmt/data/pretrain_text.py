"""Pre-training text → fairseq ``masked_lm`` data-bin (Pande et al. 2021, 5.1 and Table 4).

The paper pre-trains its local-head BERTs on English text (Wikipedia plus a Gutenberg
subset); the text is the user's own local copy. Input: one or more plain or ``.gz`` UTF-8
files, one sentence (or paragraph) per line, documents separated by blank lines (the layout
of fairseq's RoBERTa recipe). Steps, each resumable:

1. **split**: documents go to valid by a hash of their text (``--valid-fraction``, at least
   one document), the rest to train in input order; blank lines are kept as document
   boundaries, control characters are dropped.
2. **tokenise**: Moses English for subword-nmt; raw text for sentencepiece.
3. **learn** the subword model on train (``--bpe-lines`` caps the lines used: a Wikipedia
   dump is too large for subword-nmt's counting), then **apply** it to both splits.
4. **binarise** with ``fairseq-preprocess --only-source`` (dictionary from train).

Output::

    OUT/bpe.codes | OUT/bpe.model     the subword model GLUE fine-tuning data must reuse
    OUT/bin/{train,valid}.{bin,idx}   scripts/roberta_pretrain.sh --data OUT/bin
    OUT/bin/dict.txt                  data_prep/prepare_glue.sh ... OUT/bin/dict.txt

(``--data-bin DIR`` puts the binarised data elsewhere, e.g. where reproduce.sh looks for it.)

    python -m localnmt.data.pretrain_text --text wiki.txt.gz books.txt --out runs/pretrain
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import unicodedata
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from localnmt.atomic import atomic_open, write_json
from localnmt.data import bpe as bpe_mod
from localnmt.data.binarize import binarize_monolingual
from localnmt.data.command import run_data_command
from localnmt.data.fs_errors import writing_to
from localnmt.data.text_tokenize import tokenize_file
from localnmt.data.validate import iter_lines_checked
from localnmt.errors import DataError
from localnmt.steps import Log, StepRunner

DEFAULT_MERGES = 30000  # BERT's vocabulary is about 30K word pieces


def clean_line(line: str) -> str:
    """Drop control and format characters (they break whitespace tokenisation); squeeze spaces."""
    kept = "".join(
        " " if ch in "\t\u00a0" else ch
        for ch in line
        if ch in "\t\u00a0" or unicodedata.category(ch)[0] != "C"
    )
    return " ".join(kept.split())


def iter_documents(paths: list[Path]) -> Iterator[list[str]]:
    """Non-empty documents (lists of cleaned non-empty lines) of all files in order; a blank
    line or the end of a file ends a document."""
    for path in paths:
        doc: list[str] = []
        for raw in iter_lines_checked(path):
            line = clean_line(raw)
            if line:
                doc.append(line)
            elif doc:
                yield doc
                doc = []
        if doc:
            yield doc


def goes_to_valid(doc: list[str], fraction: float, seed: str = "localnmt-pretrain") -> bool:
    """Deterministic choice of a document for valid: a hash of its text below ``fraction``."""
    digest = hashlib.sha256(("\n".join([seed, *doc])).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def split_documents(paths: list[Path], train: Path, valid: Path, fraction: float) -> dict:
    """Write train and valid text (documents separated by blank lines); return their counts.

    If no document is picked for valid (small corpora) the last document goes there, so
    fairseq always has a validation set.
    """
    counts = {"train_docs": 0, "train_lines": 0, "valid_docs": 0, "valid_lines": 0}
    last: list[str] | None = None
    with atomic_open(train) as ft, atomic_open(valid) as fv:
        for doc in iter_documents(paths):
            if goes_to_valid(doc, fraction):
                fv.write("\n".join(doc) + "\n\n")
                counts["valid_docs"] += 1
                counts["valid_lines"] += len(doc)
                continue
            if last is not None:
                ft.write("\n".join(last) + "\n\n")
                counts["train_docs"] += 1
                counts["train_lines"] += len(last)
            last = doc
        if last is not None and counts["valid_docs"] == 0:
            fv.write("\n".join(last) + "\n\n")
            counts["valid_docs"], counts["valid_lines"] = 1, len(last)
        elif last is not None:
            ft.write("\n".join(last) + "\n\n")
            counts["train_docs"] += 1
            counts["train_lines"] += len(last)
    if counts["train_docs"] == 0:
        raise DataError(
            f"the pre-training text has {counts['valid_docs']} document(s): at least two are "
            "needed (documents are separated by blank lines)"
        )
    return counts


def _head(inp: Path, out: Path, n: int) -> None:
    """The first ``n`` non-blank lines of ``inp`` (what the subword model is learned on)."""
    lines = (line for line in iter_lines_checked(inp) if line.strip())
    with atomic_open(out) as f:
        f.writelines(line + "\n" for line in (islice(lines, n) if n > 0 else lines))


def prepare_pretrain_text(
    texts: list[Path], out: Path, *, bpe: str = "subword_nmt", merges: int = DEFAULT_MERGES,
    valid_fraction: float = 0.001, bpe_lines: int = 10_000_000, data_bin: Path | None = None,
    workers: int = 1, log: Log = print,
) -> Path:  # fmt: skip
    """Run the steps above; return the data-bin directory (``data_bin``, else ``out/bin``)."""
    texts, out = [Path(t) for t in texts], Path(out)
    model_name = bpe_mod.model_filename(bpe)
    if not texts:
        raise DataError("no pre-training text given (--text FILE ...)")
    missing = [str(t) for t in texts if not t.is_file()]
    if missing:
        raise DataError(f"missing pre-training text: {', '.join(missing)}")
    if not 0.0 < valid_fraction < 1.0:
        raise DataError(f"--valid-fraction must be between 0 and 1, got {valid_fraction}")
    if merges <= 0:
        raise DataError(f"--bpe-merges must be positive, got {merges}")
    work, runner = out / "work", StepRunner(out, log)
    raw = {s: work / f"{s}.txt" for s in ("train", "valid")}
    sizes = [[str(t), t.stat().st_size] for t in texts]
    counts: dict = {}

    def split() -> None:
        counts.update(split_documents(texts, raw["train"], raw["valid"], valid_fraction))
        write_json(work / "split.json", counts)
        log(f"  train: {counts['train_docs']} documents, {counts['train_lines']} lines; "
            f"valid: {counts['valid_docs']} documents, {counts['valid_lines']} lines")  # fmt: skip

    runner.run("split", split, outputs=[*raw.values(), work / "split.json"],
               params={"texts": sizes, "valid_fraction": valid_fraction})  # fmt: skip
    tok = dict(raw)
    if bpe == "subword_nmt":
        tok = {s: work / f"{s}.tok" for s in raw}
        for s in raw:
            runner.run(f"tokenize.{s}", lambda s=s: tokenize_file(raw[s], tok[s], "en", workers),
                       outputs=[tok[s]], deps=("split",))  # fmt: skip
    tok_deps = tuple(f"tokenize.{s}" for s in raw) if bpe == "subword_nmt" else ("split",)
    model, sample = out / model_name, work / "bpe_train.txt"

    def learn() -> None:
        _head(tok["train"], sample, bpe_lines)
        bpe_mod.learn(bpe, [sample], model, merges, workers)
        sample.unlink()

    learn_params = {"kind": bpe, "merges": merges, "lines": bpe_lines}
    runner.run("bpe.learn", learn, outputs=[model], params=learn_params, deps=tok_deps)
    seg = {s: work / f"{s}.bpe" for s in raw}
    for s in raw:
        runner.run(f"bpe.apply.{s}", lambda s=s: bpe_mod.apply_file(bpe, model, tok[s], seg[s],
                   workers), outputs=[seg[s]], deps=("bpe.learn",))  # fmt: skip
    dest = Path(data_bin) if data_bin is not None else out / "bin"
    runner.run("binarize", lambda: binarize_monolingual(seg, dest, workers=workers),
               outputs=[dest / "train.bin", dest / "valid.bin", dest / "dict.txt"],
               deps=tuple(f"bpe.apply.{s}" for s in raw))  # fmt: skip
    write_json(out / "localnmt_pretrain.json", {"bpe": bpe, "bpe_model": model_name,
               "merges": merges, "data_bin": str(dest), "texts": sizes})  # fmt: skip
    return dest


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    ap = argparse.ArgumentParser(prog="python -m localnmt.data.pretrain_text",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--text", type=Path, nargs="+", required=True,
                    help="plain or .gz UTF-8 text, documents separated by blank lines")  # fmt: skip
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bpe", choices=bpe_mod.BPE_KINDS, default="subword_nmt")
    ap.add_argument("--bpe-merges", type=int, default=DEFAULT_MERGES)
    ap.add_argument("--bpe-lines", type=int, default=10_000_000,
                    help="learn the subword model on the first N train lines (0: all)")  # fmt: skip
    ap.add_argument("--valid-fraction", type=float, default=0.001,
                    help="share of documents held out for validation")  # fmt: skip
    ap.add_argument("--data-bin", type=Path, help="where the binarised data goes (OUT/bin)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    log = lambda m: print(m, flush=True)  # noqa: E731

    def build() -> Path:
        with writing_to(args.out, "--out") as out:
            return prepare_pretrain_text(
                args.text, out, bpe=args.bpe, merges=args.bpe_merges,
                valid_fraction=args.valid_fraction, bpe_lines=args.bpe_lines,
                data_bin=args.data_bin, workers=args.workers, log=log,
            )  # fmt: skip

    return run_data_command(ap.prog, build)


if __name__ == "__main__":
    sys.exit(main())
