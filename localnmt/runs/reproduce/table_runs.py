"""Running: every row of one task is :func:`~localnmt.runs.experiment.train_and_score`
(train, then translate and score against the table's baseline); GLUE rows pre-train and
fine-tune."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from localnmt import locks, progress
from localnmt.catalog import CatalogRow
from localnmt.catalog.tables import baseline_of, baselines_first
from localnmt.catalog.tasks import Task
from localnmt.evaluation.results import AnyScores
from localnmt.runs.experiment import TestSet, TranslationEvaluation, train_and_score
from localnmt.runs.layout import RunLayout
from localnmt.runs.reproduce.plan import Plan, References, prepare_data, row_size
from localnmt.runs.reproduce.plan import separate_vocab as has_separate_vocab
from localnmt.runs.reproduce.reproduce_options import ReproduceOptions
from localnmt.runs.run_specs import TrainSpec
from localnmt.steps import StepRunner

if TYPE_CHECKING:
    from localnmt.runs.glue_runs import GluePlan


def row_spec(
    row: CatalogRow,
    data: str,
    run_dir: Path,
    size: str,
    opts: ReproduceOptions,
    task: Task | None = None,
    separate_vocab: bool = False,
) -> TrainSpec:
    """The ``localnmt-train`` settings of one row: its arch and recipe, the training options
    of the command line (``TRAIN_OPTIONS``), its ``args``, at paper sizes its paper's
    ``train_args``, then ``--`` extras of the command line."""
    paper_recipe = row.train_args if size in ("base", "big") else ()
    return TrainSpec(
        data=str(data), save_dir=str(RunLayout.under(run_dir).checkpoints), arch=row.arch,
        size=size, max_update=opts.max_update, max_tokens=opts.max_tokens, layers=opts.layers,
        gpus=opts.gpus, cpu=opts.cpu, precision=opts.precision,
        tokens_per_update=task.tokens_per_update if task is not None else None,
        separate_vocab=separate_vocab, extra=(*row.args, *paper_recipe, *opts.extra),
    )  # fmt: skip


def test_set(plan: Plan, refs: References, base_dir: Path | None) -> TestSet:
    """What a row of the plan is scored on, against its baseline's evaluation."""
    baseline = RunLayout.under(base_dir).eval_dir if base_dir else None
    return TestSet(plan.subset, ref=refs.ref, src=refs.src, nist_refs=plan.refs,
                   baseline=baseline)  # fmt: skip


def run_row(
    spec: TrainSpec,
    run_dir: Path,
    opts: ReproduceOptions,
    plan: Plan,
    refs: References,
    base_dir: Path | None,
) -> AnyScores:
    """Train (unless an identical run is done) and evaluate (unless done with the same
    checkpoint, references and scoring options) one row; returns its scores."""
    run_dir.mkdir(parents=True, exist_ok=True)
    runner = StepRunner(run_dir, log=lambda m: print(f"  {m}", flush=True))
    print("  $ localnmt-train", shlex.join(spec.to_argv()), flush=True)
    result = train_and_score(
        spec, RunLayout.under(run_dir), runner, rescore=opts.rescore,
        evaluation=TranslationEvaluation(test_set(plan, refs, base_dir), opts.decode, opts.average),
        log=lambda m: print(m, flush=True),
    )  # fmt: skip
    assert result.scores is not None
    return result.scores


def run_translation(plan: Plan, opts: ReproduceOptions) -> Path:
    """Train and evaluate every row of one task, in a workdir this process holds; returns
    the results page."""
    workdir = Path(opts.workdir) / plan.stem
    with locks.hold(workdir):
        return _run_translation(plan, opts, workdir)


def _run_translation(plan: Plan, opts: ReproduceOptions, workdir: Path) -> Path:
    from localnmt.runs.reproduce.page import translation_page
    from localnmt.runs.train_log import read_train_log

    baselines = {r.name: baseline_of(plan.rows, r, opts.baseline) for r in plan.rows}
    data, refs = prepare_data(opts, plan)
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
        spec = row_spec(row, str(data), run_dir, row_size(row, opts), opts, plan.task, separate)
        scores[row.name] = run_row(spec, run_dir, opts, plan, refs, base_dir)
        logs[row.name] = read_train_log(RunLayout.under(run_dir).train_log)
    return translation_page(
        opts, plan, baselines, scores, logs, data=data, refs=refs, separate=separate,
        first=rows[0].name, seconds=time.time() - start,
    )  # fmt: skip


def glue_row(row: CatalogRow, data: Path, run_dir: Path, opts: ReproduceOptions) -> GluePlan:
    """The commands of one GLUE row (:func:`localnmt.runs.glue_runs.plan_row`) with the
    command line's tasks, grid, sizes, devices and fairseq extras."""
    from localnmt.runs.glue_runs import plan_row

    return plan_row(row, data, run_dir, tasks=tuple(opts.glue_tasks), grid=opts.glue_grid,
                    tiny=opts.tiny, cpu=opts.cpu, gpus=opts.gpus,
                    extra=list(opts.extra))  # fmt: skip


def run_glue(plan: Plan, opts: ReproduceOptions) -> Path:
    """Pre-train and fine-tune every row (Pande et al. Table 4); returns the results page.
    Each command is a step keyed by its command line and the contents of the data it reads
    (a changed setting or corpus reruns it and the steps after it)."""
    assert plan.data is not None
    workdir = Path(opts.workdir) / plan.stem
    with locks.hold(workdir):
        return _run_glue(plan, opts, workdir)


def _run_glue(plan: Plan, opts: ReproduceOptions, workdir: Path) -> Path:
    from localnmt.runs.glue_runs import GlueEvaluation, GlueScores, training_commands
    from localnmt.runs.reproduce.page import glue_page
    from localnmt.runs.train_log import read_train_log

    baselines = {r.name: baseline_of(plan.rows, r, opts.baseline) for r in plan.rows}
    start = time.time()
    scores: dict[str, GlueScores] = {}
    params: dict[str, int | None] = {}
    rows = baselines_first(plan.rows, baselines)
    for i, row in enumerate(progress.track(rows, desc="rows", unit="row"), 1):
        print(f"[{i}/{len(rows)}] {row.name} ({row.row})", flush=True)
        run_dir = workdir / row.name
        glue = glue_row(row, plan.data, run_dir, opts)
        runner = StepRunner(run_dir, log=lambda m: print(f"  {m}", flush=True))
        result = train_and_score(
            training_commands(glue, run_dir, Path(opts.workdir).resolve()),
            RunLayout.under(run_dir), runner, evaluation=GlueEvaluation(glue),
            log=lambda m: print(m, flush=True),
        )  # fmt: skip
        assert result.scores is not None
        scores[row.name] = result.scores
        params[row.name] = read_train_log(glue.steps[0].log).params
    return glue_page(opts, plan, baselines, scores, params, seconds=time.time() - start)
