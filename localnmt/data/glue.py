"""GLUE TSVs → fairseq ``sentence_prediction`` data (Pande et al. 2021, Table 4).

Tasks: QQP, SST-2, MNLI, QNLI (the four columns of Table 4), from the user's local GLUE
directory (``glue_data/<TASK>/{train,dev}.tsv`` as written by the GLUE download script;
MNLI's ``dev_matched.tsv`` / ``dev_mismatched.tsv`` become ``valid`` / ``valid1``). Test
files carry no labels, so only train and dev are converted (the paper reports dev results).

Columns are picked by header name. Each sentence is Moses-tokenised (subword-nmt codes) or
left raw (sentencepiece model), segmented with the **given** pretrained subword model, and
binarised with fairseq-preprocess ``--only-source`` against the **pretrained** dictionary;
labels get their own dictionary. Output, as fairseq's RoBERTa GLUE recipe expects::

    OUT/input0/{train,valid}.{bin,idx} + dict.txt
    OUT/input1/...             (sentence-pair tasks only)
    OUT/label/{train,valid}.{bin,idx} + dict.txt

    python -m localnmt.data.glue --glue-dir glue_data --task SST-2 \
        --bpe-model bpe.codes --dict dict.txt --out data-bin/SST-2
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class GlueTask:
    """Where a task's text and label columns are (by header name) and its dev files."""

    inputs: tuple[str, ...]
    label: str
    dev: tuple[str, ...] = ("dev.tsv",)

    @property
    def num_classes(self) -> int:
        """Number of labels (fairseq ``--num-classes``)."""
        return 3 if self.label == "gold_label" else 2


TASKS: dict[str, GlueTask] = {
    "SST-2": GlueTask(("sentence",), "label"),
    "QQP": GlueTask(("question1", "question2"), "is_duplicate"),
    "MNLI": GlueTask(("sentence1", "sentence2"), "gold_label",
                     ("dev_matched.tsv", "dev_mismatched.tsv")),
    "QNLI": GlueTask(("question", "sentence"), "label"),
}  # fmt: skip


def _split_names(task: GlueTask) -> dict[str, str]:
    """fairseq split → TSV file name."""
    dev = {("valid" if i == 0 else f"valid{i}"): f for i, f in enumerate(task.dev)}
    return {"train": "train.tsv", **dev}


def read_tsv(path: Path, task: GlueTask, log: Log = print) -> list[tuple[list[str], str]]:
    """(texts, label) rows; rows with too few fields or an empty label are skipped (QQP has
    a few broken lines) and counted."""
    lines = iter_lines_checked(path)
    try:
        header = next(lines).split("\t")
    except StopIteration:
        raise DataError(f"{path}: empty file") from None
    wanted = (*task.inputs, task.label)
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(f"{path}: header has no column {', '.join(missing)} (header: {header})")
    idx = [header.index(c) for c in wanted]
    rows, skipped = [], 0
    for fields in (line.split("\t") for line in lines):
        if len(fields) <= max(idx) or not fields[idx[-1]].strip():
            skipped += 1
            continue
        rows.append(([fields[i].strip() for i in idx[:-1]], fields[idx[-1]].strip()))
    if skipped:
        log(f"  {path.name}: skipped {skipped} malformed row(s)")
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def prepare_glue(
    glue_dir: Path, task_name: str, bpe_model: Path, dictionary: Path, out: Path, *,
    workers: int = 1, log: Log = print,
) -> Path:  # fmt: skip
    """Convert one GLUE task; return ``out`` (resumable: finished steps are skipped)."""
    if task_name not in TASKS:
        raise DataError(f"unknown GLUE task {task_name!r}; choose one of {', '.join(TASKS)}")
    task = TASKS[task_name]
    src_dir, out = Path(glue_dir) / task_name, Path(out)
    bpe_model, dictionary = Path(bpe_model), Path(dictionary)
    for p in (bpe_model, dictionary):
        if not p.is_file():
            raise DataError(f"missing input file: {p}")
    kind = "sentencepiece" if bpe_model.suffix == ".model" else "subword_nmt"
    splits = _split_names(task)
    missing = [f for f in splits.values() if not (src_dir / f).is_file()]
    if missing:
        raise DataError(f"{src_dir}: missing {', '.join(missing)} (the GLUE {task_name} TSVs)")
    work = out / "work"
    runner = StepRunner(out, log)
    fields = [f"input{i}" for i in range(len(task.inputs))]

    def extract() -> None:
        for split, name in splits.items():
            rows = read_tsv(src_dir / name, task, log)
            for i, field in enumerate(fields):
                with atomic_open(work / f"{split}.{field}") as f:
                    f.writelines(texts[i] + "\n" for texts, _ in rows)
            with atomic_open(work / f"{split}.label") as f:
                f.writelines(label + "\n" for _, label in rows)
            log(f"  {task_name} {split}: {len(rows)} rows")

    runner.run("raw", extract, outputs=[work / f"{s}.label" for s in splits],
               params={"task": task_name}, inputs=[src_dir])  # fmt: skip
    model_fp = {"name": bpe_model.name}
    for split in splits:
        for field in fields:
            tok, seg = work / f"{split}.{field}.tok", work / f"{split}.{field}.bpe"

            def segment(split=split, field=field, tok=tok, seg=seg) -> None:
                inp = work / f"{split}.{field}"
                if kind == "subword_nmt":
                    tokenize_file(inp, tok, "en", workers)
                    inp = tok
                bpe_mod.apply_file(kind, bpe_model, inp, seg, workers)

            runner.run(f"bpe.{split}.{field}", segment, outputs=[seg],
                       params={"kind": kind, "model": model_fp}, deps=("raw",),
                       inputs=[bpe_model])  # fmt: skip
    bpe_deps = tuple(f"bpe.{s}.{f}" for s in splits for f in fields)
    for field in fields:
        runner.run(
            f"binarize.{field}",
            lambda field=field: binarize_monolingual(
                {s: work / f"{s}.{field}.bpe" for s in splits}, out / field, dictionary, workers
            ),
            outputs=[out / field / "train.bin", out / field / "dict.txt"],
            params={"dict": model_fp},
            deps=bpe_deps,
            inputs=[dictionary],
        )
    runner.run(
        "binarize.label",
        lambda: binarize_monolingual({s: work / f"{s}.label" for s in splits}, out / "label"),
        outputs=[out / "label" / "train.bin", out / "label" / "dict.txt"],
        deps=("raw",),
    )
    write_json(out / "localnmt_glue.json", {"task": task_name, "num_classes": task.num_classes,
                                            "bpe": kind, "splits": list(splits)})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    ap = argparse.ArgumentParser(prog="python -m localnmt.data.glue")
    ap.add_argument("--glue-dir", type=Path, required=True)
    ap.add_argument("--task", choices=sorted(TASKS), required=True)
    ap.add_argument(
        "--bpe-model",
        type=Path,
        required=True,
        help="pretrained subword model: bpe.codes (subword-nmt) or *.model (spm)",
    )
    ap.add_argument("--dict", type=Path, required=True, help="pretrained dictionary dict.txt")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)  # fmt: skip
    args = ap.parse_args(argv)
    log = lambda m: print(m, flush=True)  # noqa: E731

    def build() -> Path:
        with writing_to(args.out, "--out") as out:
            return prepare_glue(args.glue_dir, args.task, args.bpe_model, args.dict, out,
                                workers=args.workers, log=log)  # fmt: skip

    return run_data_command(ap.prog, build)


if __name__ == "__main__":
    sys.exit(main())
