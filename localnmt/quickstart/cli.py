"""Command line of the quickstart: corpus → equal-budget training, beam search and scoring of
each system → report."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from fairseq import options

from localnmt.attention.spec import SpecError
from localnmt.catalog import CatalogRow, load_rows
from localnmt.data.gettext_corpus import prepare_gettext_pair
from localnmt.data.layout import raw_file
from localnmt.errors import UsageError, entry_point
from localnmt.machine import load_average, machine_summary
from localnmt.models.transformer import check_model_specs
from localnmt.quickstart.report import write_json, write_markdown, write_plot
from localnmt.quickstart.results import collect, corpus_meta
from localnmt.quickstart.sizing import BASELINE, Sizing, sizing_for, sizings
from localnmt.quickstart.training import run_system, system_spec
from localnmt.runs.experiment import TestSet
from localnmt.runs.generate import infer_langs
from localnmt.runs.launch import model_args
from localnmt.runs.layout import RunLayout


def log(msg: str) -> None:
    """Progress line with a timestamp."""
    print(f"[quickstart {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def positive_minutes(text: str) -> float:
    """``--budget-minutes``: a finite number above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The quickstart's options; defaults that depend on the device are filled in later."""
    p = argparse.ArgumentParser(
        prog="python -m localnmt.quickstart",
        description="Train the baseline and locality methods for equal wall-clock budgets, "
        "translate the test set with beam search, score it with SacreBLEU (95%% bootstrap "
        "intervals, paired tests against the baseline) and write report.{json,md,png}.",
    )
    p.add_argument("--workdir", type=Path, default=Path("runs/quickstart"))
    p.add_argument("--budget-minutes", type=positive_minutes,
                   help="training wall clock for all systems together, split equally "
                   "(default: 24 on CPU, 30 on a GPU)")  # fmt: skip
    p.add_argument(
        "--systems",
        help="comma-separated catalog names, the baseline first "
        "(default: 3 systems on CPU, 6 on a GPU; `python -m localnmt.catalog`)",
    )
    p.add_argument("--size", choices=sorted(sizings()), help="model sizing (default: cuda if "
                   "torch sees a GPU, else cpu; tiny is for smoke tests)")  # fmt: skip
    p.add_argument(
        "--data",
        type=Path,
        help="your own data-bin (made by the project's data "
        "preparation, with raw/test.<lang> beside it) instead of the gettext corpus",
    )
    p.add_argument("--pair", default="en-de", choices=["en-de", "en-zh"],
                   help="gettext corpus language pair")  # fmt: skip
    p.add_argument("--bpe-merges", type=int, help="gettext corpus BPE merges (default: sizing)")
    p.add_argument("--max-train", type=int, help="cap on gettext training pairs")
    p.add_argument("--max-update", type=int, default=100_000, help="per-system update cap")
    p.add_argument("--validations", type=int, default=8,
                   help="validations per system, evenly spaced in wall clock")  # fmt: skip
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--catalog-json", type=Path, help=argparse.SUPPRESS)
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Options, checked: a wrong one stops here with one message (exit 2)."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.validations < 5:
        p.error("--validations must be at least 5 (a learning curve needs points)")
    for name in ("max_update", "bpe_merges", "max_train", "bootstrap_samples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.data is not None:
        problem = check_data(args.data)
        if problem:
            p.error(problem)
    return args


def check_data(data_bin: Path) -> str | None:
    """What is wrong with a user's data-bin, or None: dictionaries, subsets, raw references."""
    if not data_bin.is_dir():
        return f"--data {data_bin}: no such directory (make one with data_prep/*.sh)"
    try:
        src, tgt = infer_langs(data_bin, "test")
    except FileNotFoundError:
        return f"--data {data_bin}: no test subset (test.<src>-<tgt>.<lang>.idx) in it"
    for name in (f"dict.{src}.txt", f"dict.{tgt}.txt", f"train.{src}-{tgt}.{src}.idx",
                 f"valid.{src}-{tgt}.{src}.idx"):  # fmt: skip
        if not (data_bin / name).exists():
            return f"--data {data_bin}: {name} is missing"
    ref = raw_file(data_bin, "test", tgt)
    if not ref.exists():
        return (
            f"--data {data_bin}: the raw test references {ref} are missing; scoring needs "
            "them (data_prep/prepare_parallel.sh keeps them beside the data-bin)"
        )
    return None


def pick_systems(names: list[str], catalog: list[CatalogRow], sizing: Sizing) -> list[CatalogRow]:
    """Catalog rows for ``names``; an unknown name, or a row whose attention specs do not fit
    the sizing's model, stops with one message (:class:`UsageError`, exit 2)."""
    by_name = {row.name: row for row in catalog}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        close = sorted(n for n in by_name if n.endswith("/base"))[:8]
        raise UsageError(
            f"unknown system(s) {', '.join(unknown)}; names come from "
            f"`python -m localnmt.catalog`, e.g. {', '.join(close)}"
        )
    rows = [by_name[n] for n in names]
    for row in rows:
        problem = fits(row, sizing)
        if problem:
            raise UsageError(f"{row.name} does not fit the {sizing.name} sizing: {problem}")
    return rows


def fits(row: CatalogRow, sizing: Sizing) -> str | None:
    """Whether a row's attention specs fit the sizing's layers and heads (None if they do)."""
    layout = RunLayout.under(Path("/nonexistent"))
    spec = system_spec(row, sizing, Path("/nonexistent"), layout, cpu=True, max_update=1)
    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(parser, ["/nonexistent", *model_args(spec, 0)])
    try:
        check_model_specs(ns)
    except SpecError as err:
        return str(err)
    return None


@entry_point("quickstart")
def main(argv: list[str] | None = None) -> int:
    """Run the quickstart; returns the exit status (130 after Ctrl-C; 2 with one message for
    a usage or configuration error)."""
    args = parse_args(argv)
    try:
        run(args)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        log("interrupted: finished steps and the last checkpoints are kept; run the same "
            "command again to resume")  # fmt: skip
        return 130
    return 0


def run(args: argparse.Namespace) -> None:
    """All steps; each one is skipped when it is already done with the same settings."""
    start = time.time()
    machine = machine_summary()
    cuda = torch.cuda.is_available()
    sizing = sizings()[args.size] if args.size else sizing_for(cuda)
    budget = args.budget_minutes or sizing.budget_minutes
    names = args.systems.split(",") if args.systems else list(sizing.systems)
    systems = pick_systems(names, load_rows(args.catalog_json), sizing)
    if names[0] != BASELINE:
        log(f"the first system, {names[0]}, is the baseline of the comparison")
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log(f"sizing ({sizing.name}): {sizing.describe()}")
    if args.data:
        data_bin = args.data.resolve()
        log(f"step 1/3: your data-bin {data_bin}")
    else:
        log(f"step 1/3: gettext corpus ({args.pair}) in {workdir / 'data'}")
        data_bin = Path(prepare_gettext_pair(
            args.pair, workdir / "data", bpe_merges=args.bpe_merges or sizing.bpe_merges,
            max_train=args.max_train, log=log))  # fmt: skip
    src, tgt = infer_langs(data_bin, "test")
    ref, source = raw_file(data_bin, "test", tgt), raw_file(data_bin, "test", src)
    test = TestSet("test", ref=ref, src=source if source.exists() else None)
    minutes = budget / len(systems)
    every = minutes / args.validations
    log(f"step 2/3: {len(systems)} systems, {minutes:.1f} min of training each, then beam "
        "search on the test set and scoring")  # fmt: skip
    layouts = [RunLayout.for_system(workdir, row.name) for row in systems]
    for row, layout in zip(systems, layouts):
        spec = system_spec(row, sizing, data_bin, layout, cpu=not cuda, max_update=args.max_update)
        run_system(row, spec, layout, test, minutes, every, log)
    log("step 3/3: report")
    results, signature, n_test = collect(systems, layouts, ref, args.bootstrap_samples)
    meta = {
        "machine": machine,
        "budget_minutes": budget,
        "minutes_per_system": minutes,
        "sizing": sizing.describe(),
        "device": sizing.device,
        **corpus_meta(data_bin, args.pair if not args.data else None),
        "test_sentences": n_test,
        "signature": signature,
        "bootstrap_samples": args.bootstrap_samples,
        "load_average_end": load_average(),
        "elapsed_minutes": (time.time() - start) / 60,
    }
    write_json(workdir, results, meta)
    report = write_markdown(workdir, results, meta)
    write_plot(workdir, results, meta)
    print(report.read_text(encoding="utf-8"))
    log(f"done in {meta['elapsed_minutes']:.1f} min: {workdir}/report.{{md,json,png}}")
