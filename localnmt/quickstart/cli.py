"""Command line of the quickstart: corpus → (calibration →) training of each system for equal
updates or equal time, beam search and scoring → report."""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)
from localnmt import locks
from localnmt.attention.spec import SpecError
from localnmt.catalog import CatalogRow, load_rows
from localnmt.data.corpus_layout import raw_file
from localnmt.data.gettext_corpus import prepare_gettext_pair
from localnmt.errors import UsageError, entry_point
from localnmt.fairseq_plugin.architectures import arch_stacks, preset_specs
from localnmt.machine import load_average, machine_summary
from localnmt.quickstart.calibration import calibrate
from localnmt.quickstart.collected_results import collect, corpus_info
from localnmt.quickstart.replan import budget_used, train_first_parts
from localnmt.quickstart.report import write_json, write_markdown, write_plot
from localnmt.quickstart.run_record import Allotment, QuickstartRun
from localnmt.quickstart.sizing import BASELINE, Sizing, sizing_for, sizings
from localnmt.quickstart.training import Schedule, run_system, system_spec
from localnmt.runs.experiment import TestSet
from localnmt.runs.generate import infer_langs
from localnmt.runs.layout import RunLayout
from localnmt.runs.recipes import dim_overrides
from localnmt.runs.run_specs import TrainSpec
from localnmt.runs.train_run import TrainRun


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
        description="Train the baseline and locality methods for the same number of updates "
        "(a short calibration turns the budget into updates; --equal time gives each the same "
        "wall clock instead), translate the test set with beam search, score it with "
        "SacreBLEU (95 % bootstrap intervals, paired tests against the baseline) and write "
        "report.{json,md,png}.",
    )
    p.add_argument("--workdir", type=Path, default=Path("runs/quickstart"))
    p.add_argument("--budget-minutes", type=positive_minutes,
                   help="training wall clock for all systems together, calibration included "
                   "(default: 24 on CPU, 30 on a GPU)")  # fmt: skip
    p.add_argument("--equal", choices=("updates", "time"), default="updates",
                   help="what every system gets the same of: updates (the papers' convention; "
                   "default) or wall-clock time")  # fmt: skip
    p.add_argument("--updates", type=int, help="with --equal updates: updates per system "
                   "(default: calibrated from the budget)")  # fmt: skip
    p.add_argument("--calibration-minutes", type=positive_minutes,
                   help="how long the systems train, together, to measure their speeds and "
                   "validations (default: a twentieth of the budget, at least 0.5 and at most "
                   "2)")  # fmt: skip
    p.add_argument("--seeds", type=int, default=1,
                   help="train every system this many times (seeds 1..N): mean ± sd and a "
                   "paired test over all runs")  # fmt: skip
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
    p.add_argument("--max-update", type=int, default=100_000,
                   help="per-system update cap (--equal time)")  # fmt: skip
    p.add_argument("--validations", type=int, default=8,
                   help="validations per system, evenly spaced")  # fmt: skip
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--catalog-json", type=Path, help=argparse.SUPPRESS)
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Options, checked: a wrong one stops here with one message (exit 2)."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.validations < 5:
        p.error("--validations must be at least 5 (a learning curve needs points)")
    if args.updates is not None and args.equal != "updates":
        p.error("--updates needs --equal updates")
    for name in ("max_update", "bpe_merges", "max_train", "bootstrap_samples", "updates",
                 "seeds"):  # fmt: skip
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
    """Whether a row's attention specs (over its arch's) fit the model the sizing trains:
    the recipe's dimensions, then the row's own size flags (None if they do)."""
    dims = sizing.effective().dims
    sizes = [*(dim_overrides(*dims) if dims is not None else []), *row.model_args]
    try:
        row.attention.over(preset_specs(row.arch)).check(*arch_stacks(row.arch, sizes))
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
    record = QuickstartRun(
        machine=machine, budget_minutes=budget, equal=args.equal, seeds=args.seeds,
        sizing=sizing.describe(), device=sizing.device, bootstrap_samples=args.bootstrap_samples,
    )  # fmt: skip
    with locks.hold(workdir):
        log(f"sizing ({sizing.name}): {sizing.describe()}")
        data_bin = corpus(args, sizing, workdir)
        layouts, allotment = train_systems(args, sizing, systems, data_bin, workdir, budget,
                                           not cuda)  # fmt: skip
        log("step 3/3: report")
        ref = raw_file(data_bin, "test", infer_langs(data_bin, "test")[1])
        results, signature, n_test = collect(systems, layouts, ref, args.bootstrap_samples)
        load_end = load_average()
        record = replace(
            record, allotment=allotment,
            corpus=corpus_info(data_bin, args.pair if not args.data else None),
            test_sentences=n_test, signature=signature,
            load_average_end=None if load_end is None else tuple(load_end),
            elapsed_minutes=(time.time() - start) / 60,
        )  # fmt: skip
        write_json(workdir, results, record)
        report = write_markdown(workdir, results, record)
        write_plot(workdir, results, record)
    print(report.read_text(encoding="utf-8"))
    log(f"done in {record.elapsed_minutes:.1f} min: {workdir}/report.{{md,json,png}}")


def corpus(args: argparse.Namespace, sizing: Sizing, workdir: Path) -> Path:
    """The user's data-bin, or the gettext corpus built (or reused) in ``workdir/data``."""
    if args.data:
        data_bin = args.data.resolve()
        log(f"step 1/3: your data-bin {data_bin}")
        return data_bin
    log(f"step 1/3: gettext corpus ({args.pair}) in {workdir / 'data'}")
    return Path(prepare_gettext_pair(
        args.pair, workdir / "data", bpe_merges=args.bpe_merges or sizing.bpe_merges,
        max_train=args.max_train, log=log))  # fmt: skip


def schedule_for(
    args: argparse.Namespace, systems: list[tuple[str, TrainSpec]], workdir: Path,
    budget: float,
) -> tuple[Schedule, Allotment]:  # fmt: skip
    """Equal updates (given, or calibrated from the budget) or equal time: the schedule
    every system trains on, and the allotment the report gives."""
    n = len(systems)
    if args.equal == "time":
        minutes_each = budget / (n * args.seeds)
        return (Schedule(args.validations, minutes=minutes_each),
                Allotment(minutes_per_system=minutes_each))  # fmt: skip
    if args.updates:
        return (Schedule(args.validations, updates=args.updates),
                Allotment(updates_per_system=args.updates))  # fmt: skip
    minutes = args.calibration_minutes or min(2.0, max(0.5, budget / 20))
    found = calibrate(systems, workdir, minutes, budget, args.validations, args.seeds, log)
    minutes_each = max(budget - found.minutes, minutes) / (n * args.seeds)
    log(f"calibration: {found.minutes:.1f} min → {found.updates} updates per system")
    return (Schedule(args.validations, updates=found.updates),
            Allotment(minutes_each, found.updates, found))  # fmt: skip


def train_systems(
    args: argparse.Namespace, sizing: Sizing, systems: list[CatalogRow], data_bin: Path,
    workdir: Path, budget: float, cpu: bool,
) -> tuple[list[list[RunLayout]], Allotment]:  # fmt: skip
    """Train, translate and score every system (every seed); their run layouts and what
    every system got (:func:`schedule_for`; a calibrated schedule is planned again after the
    runs' first parts, :func:`~localnmt.quickstart.replan.train_first_parts`)."""
    src, tgt = infer_langs(data_bin, "test")
    source = raw_file(data_bin, "test", src)
    test = TestSet("test", ref=raw_file(data_bin, "test", tgt),
                   src=source if source.exists() else None)  # fmt: skip
    cap = args.updates or args.max_update

    def spec(row: CatalogRow, layout: RunLayout, seed: int) -> TrainSpec:
        return system_spec(row, sizing, data_bin, layout, cpu=cpu, max_update=cap, seed=seed)

    calibrated = [(row.name, spec(row, RunLayout.under(workdir / "calibration"), 1))
                  for row in systems]  # fmt: skip
    schedule, allotment = schedule_for(args, calibrated, workdir, budget)
    runs = [[RunLayout.for_system(workdir, row.name, seed) for seed in range(1, args.seeds + 1)]
            for row in systems]  # fmt: skip
    jobs = [
        (row, spec(row, layout, seed), layout)
        for row, layouts in zip(systems, runs)
        for seed, layout in enumerate(layouts, 1)
    ]
    parts: list[TrainRun] = []
    if allotment.calibration is not None:
        schedule, allotment, parts = train_first_parts(jobs, schedule, allotment, args.validations,
                                                       workdir, budget, log)  # fmt: skip
    extends = {run.layout.root: (run.fingerprint,) for run in parts if run.fingerprint}
    log(f"step 2/3: {len(systems)} systems x {args.seeds} seed(s), {schedule.describe()} "
        "each, then beam search on the test set and scoring")  # fmt: skip
    trained = []
    for row, job_spec, layout in jobs:
        result = run_system(row, job_spec, layout, test, schedule, log,
                            extends=extends.get(layout.root, ()))  # fmt: skip
        trained.append(result.train)
    if allotment.calibration is not None:
        allotment = replace(allotment, budget_used_minutes=budget_used(
            allotment.calibration, parts, trained))  # fmt: skip
    return runs, allotment
