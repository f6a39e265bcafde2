"""Running: every row of one task is :func:`~localnmt.runs.experiment.train_and_score`
(train, then translate and score against the table's baseline); GLUE rows pre-train and
fine-tune."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from localnmt import locks, progress
from localnmt.catalog import CatalogRow
from localnmt.catalog.tables import baseline_of, baselines_first
from localnmt.catalog.tasks import Task
from localnmt.evaluation.results import AnyScores
from localnmt.runs.experiment import TestSet, TranslationEvaluation, train_and_score
from localnmt.runs.layout import RunLayout
from localnmt.runs.options import from_options
from localnmt.runs.reproduce.plan import Plan, References, prepare_data, row_size
from localnmt.runs.reproduce.plan import separate_vocab as has_separate_vocab
from localnmt.runs.spec import DecodeSpec, TrainSpec
from localnmt.steps import StepRunner

#: the training options a table's rows take from the command line (the rest come from the
#: catalog and the recipes)
TRAIN_OPTIONS = ("max_update", "max_tokens", "layers", "gpus", "cpu", "precision")
#: the decoding options (``--max-tokens`` is the training batch here)
DECODE_OPTIONS = ("beam", "lenpen", "max_len_a", "max_len_b", "bpe", "detok")


def row_spec(
    row: CatalogRow,
    data: str,
    run_dir: Path,
    size: str,
    args: argparse.Namespace,
    task: Task | None = None,
    separate_vocab: bool = False,
) -> TrainSpec:
    """The ``localnmt-train`` settings of one row: its arch and recipe, its ``args``, at
    paper sizes its paper's ``train_args``, then ``--`` extras of the command line."""
    paper_recipe = row.train_args if size in ("base", "big") else ()
    return from_options(
        TrainSpec, args, only=TRAIN_OPTIONS, data=str(data),
        save_dir=str(RunLayout.under(run_dir).checkpoints), arch=row.arch, size=size,
        tokens_per_update=task.tokens_per_update if task is not None else None,
        separate_vocab=separate_vocab, extra=(*row.args, *paper_recipe, *args.extra),
    )  # fmt: skip


def test_set(plan: Plan, refs: References, base_dir: Path | None) -> TestSet:
    """What a row of the plan is scored on, against its baseline's evaluation."""
    baseline = RunLayout.under(base_dir).eval_dir if base_dir else None
    return TestSet(plan.subset, ref=refs.ref, src=refs.src, nist_refs=plan.refs,
                   baseline=baseline)  # fmt: skip


def run_row(
    spec: TrainSpec,
    run_dir: Path,
    args: argparse.Namespace,
    plan: Plan,
    refs: References,
    base_dir: Path | None,
) -> AnyScores:
    """Train (unless an identical run is done) and evaluate (unless done with the same
    checkpoint, references and scoring options) one row; returns its scores."""
    run_dir.mkdir(parents=True, exist_ok=True)
    runner = StepRunner(run_dir, log=lambda m: print(f"  {m}", flush=True))
    print("  $ localnmt-train", shlex.join(spec.to_argv()), flush=True)
    decode = from_options(DecodeSpec, args, only=DECODE_OPTIONS)
    result = train_and_score(
        spec, RunLayout.under(run_dir), runner, rescore=args.rescore,
        evaluation=TranslationEvaluation(test_set(plan, refs, base_dir), decode, args.average),
        log=lambda m: print(m, flush=True),
    )  # fmt: skip
    assert result.scores is not None
    return result.scores


def run_translation(plan: Plan, args: argparse.Namespace) -> Path:
    """Train and evaluate every row of one task, in a workdir this process holds; returns
    the results page."""
    workdir = Path(args.workdir) / plan.stem
    with locks.hold(workdir):
        return _run_translation(plan, args, workdir)


def _run_translation(plan: Plan, args: argparse.Namespace, workdir: Path) -> Path:
    from localnmt.runs.reproduce.page import translation_page
    from localnmt.runs.train_log import read_train_log

    baselines = {r.name: baseline_of(plan.rows, r, args.baseline) for r in plan.rows}
    data, refs = prepare_data(args, plan)
    separate = has_separate_vocab(data)
    scores: dict[str, AnyScores] = {}
    logs = {}
    start = time.time()
    rows = baselines_first(plan.rows, baselines)
    for i, row in enumerate(progress.track(rows, desc="rows", unit="row"), 1):
        base = baselines[row.name]
        print(f"[{i}/{len(rows)}] {row.name} ({row.row})", flush=True)
        run_dir = workdir / row.name
        base_dir = None if base.name == row.name else workdir / base.name
        spec = row_spec(row, str(data), run_dir, row_size(row, args), args, plan.task, separate)
        scores[row.name] = run_row(spec, run_dir, args, plan, refs, base_dir)
        logs[row.name] = read_train_log(RunLayout.under(run_dir).train_log)
    return translation_page(
        args, plan, baselines, scores, logs, data=data, refs=refs, separate=separate,
        first=rows[0].name, seconds=time.time() - start,
    )  # fmt: skip


def glue_options(args: argparse.Namespace) -> dict:
    """Options of :func:`localnmt.runs.glue_runs.plan_row` from the command line."""
    return dict(
        tasks=tuple(args.glue_tasks), grid=args.glue_grid, tiny=args.tiny, cpu=args.cpu,
        gpus=args.gpus, extra=args.extra,
    )  # fmt: skip


def run_glue(plan: Plan, args: argparse.Namespace) -> Path:
    """Pre-train and fine-tune every row (Pande et al. Table 4); returns the results page.
    Each command is a step keyed by its command line and the contents of the data it reads
    (a changed setting or corpus reruns it and the steps after it)."""
    assert plan.data is not None
    workdir = Path(args.workdir) / plan.stem
    with locks.hold(workdir):
        return _run_glue(plan, args, workdir)


def _run_glue(plan: Plan, args: argparse.Namespace, workdir: Path) -> Path:
    from localnmt.runs.glue_runs import GlueEvaluation, GlueScores, plan_row, training_commands
    from localnmt.runs.reproduce.page import glue_page
    from localnmt.runs.train_log import read_train_log

    baselines = {r.name: baseline_of(plan.rows, r, args.baseline) for r in plan.rows}
    start = time.time()
    scores: dict[str, GlueScores] = {}
    params: dict[str, int | None] = {}
    rows = baselines_first(plan.rows, baselines)
    for i, row in enumerate(progress.track(rows, desc="rows", unit="row"), 1):
        print(f"[{i}/{len(rows)}] {row.name} ({row.row})", flush=True)
        run_dir = workdir / row.name
        glue = plan_row(row, plan.data, run_dir, **glue_options(args))
        runner = StepRunner(run_dir, log=lambda m: print(f"  {m}", flush=True))
        result = train_and_score(
            training_commands(glue, run_dir, Path(args.workdir).resolve()),
            RunLayout.under(run_dir), runner, evaluation=GlueEvaluation(glue),
            log=lambda m: print(m, flush=True),
        )  # fmt: skip
        assert result.scores is not None
        scores[row.name] = result.scores
        params[row.name] = read_train_log(glue.steps[0].log).params
    return glue_page(args, plan, baselines, scores, params, seconds=time.time() - start)
