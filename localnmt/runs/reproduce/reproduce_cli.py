"""Command line of ``python -m localnmt.runs.reproduce``: parsing into
:class:`~localnmt.runs.reproduce.reproduce_options.ReproduceOptions`, the dry run, dispatch."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from localnmt.catalog import CatalogRow, load_rows
from localnmt.catalog.tables import (
    baseline_of,
    baselines_first,
    group_by_task,
    select_table,
    table_id,
)
from localnmt.catalog.tasks import GLUE_TASKS
from localnmt.errors import UsageError, entry_point
from localnmt.runs.options import add_options, from_options, split_extra
from localnmt.runs.reproduce.plan import (
    Plan,
    check_references,
    choose_tasks,
    is_data_bin,
    plan_task,
    row_size,
    separate_vocab,
)
from localnmt.runs.reproduce.reproduce_options import (
    DECODE_OPTIONS,
    TRAIN_OPTIONS,
    ReproduceOptions,
)
from localnmt.runs.reproduce.table_runs import glue_row, row_spec, run_glue, run_translation
from localnmt.runs.run_specs import DecodeSpec, TrainSpec


def _eval_line(plan: Plan) -> str:
    if plan.task.scoring == "nist_multi_ref" and plan.subset == "test":
        from localnmt.data.nist_zh_en import TEST_SETS
        from localnmt.runs.nist_eval import nist_subsets

        if plan.refs is not None and (plan.refs / "subsets.json").is_file():
            subsets = nist_subsets(plan.refs)
        else:
            subsets = {("test" if i == 0 else f"test{i}"): s for i, s in enumerate(TEST_SETS)}
        sets = ", ".join(f"{k}={v}" for k, v in subsets.items())
        return f"# evaluate: decode {sets}; 4-reference lower-cased BLEU, average over the sets"
    return f"# evaluate: decode subset {plan.subset}; SacreBLEU and tokenized BLEU"


def dry_run(plan: Plan, opts: ReproduceOptions) -> None:
    """Print the commands of one task (``localnmt-train`` lines for translation rows)."""
    workdir = Path(opts.workdir) / plan.stem
    data = str(plan.data) if plan.data is not None else f"<gettext {plan.pair} corpus>"
    print(f"# task: {plan.task.name} ({plan.task.label}); data: {data}")
    for note in ([plan.task.note] if plan.task.note else []) + plan.notes:
        print(f"# note: {note}")
    if not plan.task.is_translation:
        for row in plan.rows:
            print(f"# {row.row}")
            glue = glue_row(row, plan.data or Path("<glue-data>"), workdir / row.name, opts)
            for step in glue.steps:
                print(shlex.join(step.cmd))
        return
    separate = plan.data is not None and is_data_bin(plan.data) and separate_vocab(plan.data)
    baselines = {r.name: baseline_of(plan.rows, r, opts.baseline) for r in plan.rows}
    for row in baselines_first(plan.rows, baselines):
        spec = row_spec(row, data, workdir / row.name, row_size(row, opts), opts, plan.task,
                        separate)  # fmt: skip
        print(f"# {row.row} (baseline: {baselines[row.name].row})")
        print("localnmt-train", shlex.join(spec.to_argv()))
    print(_eval_line(plan))


def select(opts: ReproduceOptions) -> list[CatalogRow]:
    """The catalog rows of ``opts.paper`` ``opts.table``; an unknown paper or table stops
    with the valid choices (exit 2)."""
    catalog = load_rows(opts.catalog_json)
    rows = select_table(catalog, opts.paper, opts.table)
    if rows:
        return rows
    papers = sorted({r.paper for r in catalog})
    if opts.paper not in papers:
        raise UsageError(f"unknown paper {opts.paper!r}; papers: {', '.join(papers)}")
    tables = list(dict.fromkeys(r.table for r in catalog if r.paper == opts.paper))
    raise UsageError(
        f"{opts.paper} has no {opts.table!r} ({table_id(opts.table)}); its tables and "
        f"figures: {', '.join(repr(t) for t in tables)}"
    )


def reproduce(opts: ReproduceOptions) -> list[Path] | None:
    """Run every row of the table's selected task(s); returns the results pages (None for
    --dry-run)."""
    groups = group_by_task(select(opts))
    chosen = choose_tasks(groups, opts.task, f"{opts.paper} {opts.table}")
    single = opts.single_task_flags()
    if len(chosen) > 1 and single:
        raise UsageError(
            f"{', '.join(single)} name(s) the data of one task; with --task all each task "
            "reads <data-root>/<task>/ (or run one --task at a time)"
        )
    for task in chosen:  # an unknown --baseline stops before any work
        for row in groups[task]:
            baseline_of(groups[task], row, opts.baseline)
    plans = [plan_task(t, groups[t], opts, check=not opts.dry_run) for t in chosen]
    if not opts.dry_run:
        for plan in plans:
            check_references(plan, opts)
    if opts.dry_run:
        for plan in plans:
            dry_run(plan, opts)
        return None
    return [
        run_translation(plan, opts) if plan.task.is_translation else run_glue(plan, opts)
        for plan in plans
    ]


def build_parser() -> argparse.ArgumentParser:
    """The options (everything after ``--`` goes to fairseq-train): reproduce's own from
    :class:`ReproduceOptions`' declarations, in the order ``--help`` lists them, training
    and decoding options from :class:`TrainSpec` and :class:`DecodeSpec`."""
    from localnmt.runs import reproduce as package
    from localnmt.runs.glue_runs import setting_text

    def own(parser: Any, *names: str) -> None:  # a parser or a group of it
        add_options(parser, ReproduceOptions, only=names)

    p = argparse.ArgumentParser(prog="reproduce", description=package.__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    p.add_argument("paper")
    p.add_argument("table", help='e.g. "Table 2" or "Figure 4"')
    own(p.add_mutually_exclusive_group(), "dry_run", "tiny")
    own(p, "task", "data")
    p.add_argument(
        "--data-root", default="runs/data", help="default data: <data-root>/<task>/data-bin"
    )
    own(p, "pair", "max_train", "bpe_merges", "subset", "ref", "src", "score_against_targets",
        "refs_dir", "catalog_json", "baseline")  # fmt: skip
    p.add_argument("--workdir", default="runs/reproduce")
    p.add_argument("--results-dir", default="results")
    add_options(p.add_argument_group("training"), TrainSpec, only=TRAIN_OPTIONS)
    own(p, "average")
    add_options(p.add_argument_group("decoding"), DecodeSpec, only=DECODE_OPTIONS)
    own(p, "rescore")
    p.add_argument(
        "--glue-tasks",
        nargs="+",
        default=list(GLUE_TASKS),
        choices=GLUE_TASKS,
        help="GLUE tasks to fine-tune (default: all four of Table 4)",
    )
    p.add_argument(
        "--glue-grid",
        action="store_true",
        help=f"fine-tune with each setting ({setting_text(True)}, configs/recipes.yaml), "
        "keep the best (the paper's)",
    )
    return p


def parse_args(argv: list[str] | None = None) -> ReproduceOptions:
    """Command-line options (everything after ``--`` goes to fairseq-train), typed; a bad
    decoding option stops here (exit 2)."""
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    ns = build_parser().parse_args(own)
    cpu = ns.cpu
    if ns.gpus is None and not cpu:
        import torch

        cpu = not torch.cuda.is_available()
    return from_options(
        ReproduceOptions, ns, paper=ns.paper, table=ns.table, data_root=ns.data_root,
        workdir=ns.workdir, results_dir=ns.results_dir, max_update=ns.max_update,
        max_tokens=ns.max_tokens, layers=ns.layers, gpus=ns.gpus, cpu=cpu,
        precision=ns.precision, decode=from_options(DecodeSpec, ns, only=DECODE_OPTIONS),
        glue_tasks=tuple(ns.glue_tasks), glue_grid=ns.glue_grid, extra=tuple(extra),
    )  # fmt: skip


@entry_point("reproduce")
def main(argv: list[str] | None = None) -> None:
    """CLI entry point."""
    reproduce(parse_args(argv))
