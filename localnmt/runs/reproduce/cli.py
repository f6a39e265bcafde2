"""Command line of ``python -m localnmt.runs.reproduce``: options, the dry run, dispatch."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from localnmt.catalog import CatalogRow, load_rows
from localnmt.catalog.tables import (
    baseline_of,
    baselines_first,
    group_by_task,
    select_table,
    table_id,
)
from localnmt.catalog.tasks import GLUE_TASKS, TASKS
from localnmt.errors import UsageError, entry_point
from localnmt.runs.options import add_options, split_extra
from localnmt.runs.reproduce.plan import (
    Plan,
    check_references,
    choose_tasks,
    is_data_bin,
    plan_task,
    row_size,
    separate_vocab,
)
from localnmt.runs.reproduce.run import (
    DECODE_OPTIONS,
    TRAIN_OPTIONS,
    glue_options,
    row_spec,
    run_glue,
    run_translation,
)
from localnmt.runs.spec import DecodeSpec, TrainSpec


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


def dry_run(plan: Plan, args: argparse.Namespace) -> None:
    """Print the commands of one task (``localnmt-train`` lines for translation rows)."""
    workdir = Path(args.workdir) / plan.stem
    data = str(plan.data) if plan.data is not None else f"<gettext {plan.pair} corpus>"
    print(f"# task: {plan.task.name} ({plan.task.label}); data: {data}")
    for note in ([plan.task.note] if plan.task.note else []) + plan.notes:
        print(f"# note: {note}")
    if not plan.task.is_translation:
        from localnmt.runs.glue_runs import plan_row

        for row in plan.rows:
            print(f"# {row.row}")
            glue = plan_row(row, plan.data or Path("<glue-data>"), workdir / row.name,
                            **glue_options(args))  # fmt: skip
            for step in glue.steps:
                print(shlex.join(step.cmd))
        return
    separate = plan.data is not None and is_data_bin(plan.data) and separate_vocab(plan.data)
    baselines = {r.name: baseline_of(plan.rows, r, args.baseline) for r in plan.rows}
    for row in baselines_first(plan.rows, baselines):
        spec = row_spec(row, data, workdir / row.name, row_size(row, args), args, plan.task,
                        separate)  # fmt: skip
        print(f"# {row.row} (baseline: {baselines[row.name].row})")
        print("localnmt-train", shlex.join(spec.to_argv()))
    print(_eval_line(plan))


def select(args: argparse.Namespace) -> list[CatalogRow]:
    """The catalog rows of ``args.paper`` ``args.table``; an unknown paper or table stops
    with the valid choices (exit 2)."""
    catalog = load_rows(args.catalog_json)
    rows = select_table(catalog, args.paper, args.table)
    if rows:
        return rows
    papers = sorted({r.paper for r in catalog})
    if args.paper not in papers:
        raise UsageError(f"unknown paper {args.paper!r}; papers: {', '.join(papers)}")
    tables = list(dict.fromkeys(r.table for r in catalog if r.paper == args.paper))
    raise UsageError(
        f"{args.paper} has no {args.table!r} ({table_id(args.table)}); its tables and "
        f"figures: {', '.join(repr(t) for t in tables)}"
    )


def reproduce(args: argparse.Namespace) -> list[Path] | None:
    """Run every row of the table's selected task(s); returns the results pages (None for
    --dry-run)."""
    groups = group_by_task(select(args))
    chosen = choose_tasks(groups, args.task, f"{args.paper} {args.table}")
    single = [f"--{k.replace('_', '-')}" for k in ("data", "ref", "src", "refs_dir", "pair")
              if getattr(args, k)]  # fmt: skip
    if len(chosen) > 1 and single:
        raise UsageError(
            f"{', '.join(single)} name(s) the data of one task; with --task all each task "
            "reads <data-root>/<task>/ (or run one --task at a time)"
        )
    plans = [plan_task(t, groups[t], args, check=not args.dry_run) for t in chosen]
    if not args.dry_run:
        for plan in plans:
            check_references(plan, args)
    if args.dry_run:
        for plan in plans:
            dry_run(plan, args)
        return None
    return [
        run_translation(plan, args) if plan.task.is_translation else run_glue(plan, args)
        for plan in plans
    ]


def build_parser() -> argparse.ArgumentParser:
    """The options (everything after ``--`` goes to fairseq-train)."""
    from localnmt.runs import reproduce as package
    from localnmt.runs.glue_runs import setting_text

    p = argparse.ArgumentParser(prog="reproduce", description=package.__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    p.add_argument("paper")
    p.add_argument("table", help='e.g. "Table 2" or "Figure 4"')
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the commands only")
    mode.add_argument("--tiny", action="store_true", help="tiny dims, few updates (smoke test)")
    p.add_argument(
        "--task",
        choices=[*TASKS, "all"],
        help="the task (column) of a multi-task table; 'all': every one (default: the first)",
    )
    p.add_argument("--data", help="data-bin (GLUE: the folder with pretrain/ and the tasks)")
    p.add_argument(
        "--data-root", default="runs/data", help="default data: <data-root>/<task>/data-bin"
    )
    p.add_argument(
        "--pair",
        choices=["en-de", "en-zh"],
        help="train on the embedded gettext corpus of this pair (--tiny without data: en-de)",
    )
    p.add_argument("--max-train", type=int)
    p.add_argument("--bpe-merges", type=int)
    p.add_argument("--subset", help="subset to score (default: the rows' split, test or valid)")
    p.add_argument("--ref", help="raw references (default: <data>/../raw/<subset>.<tgt>)")
    p.add_argument("--src", help="raw sources (default: <data>/../raw/<subset>.<src>)")
    p.add_argument(
        "--score-against-targets",
        action="store_true",
        help="when the raw references are missing, score against fairseq's post-processed "
        "target lines (noted on the page; not comparable to published SacreBLEU)",
    )
    p.add_argument("--refs-dir", help="NIST references (default: <data>/../refs)")
    p.add_argument(
        "--catalog-json", type=Path, help="rows from this file (the catalog's --json format)"
    )
    p.add_argument("--baseline", help="catalog name of the baseline row")
    p.add_argument("--workdir", default="runs/reproduce")
    p.add_argument("--results-dir", default="results")
    add_options(p.add_argument_group("training"), TrainSpec, only=TRAIN_OPTIONS)
    p.add_argument("--average", type=int, help="checkpoints to average (default: recipe's)")
    add_options(p.add_argument_group("decoding"), DecodeSpec, only=DECODE_OPTIONS)
    p.add_argument("--rescore", action="store_true", help="re-evaluate even if scores exist")
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (everything after ``--`` goes to fairseq-train)."""
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(own)
    args.extra = extra
    if args.gpus is None and not args.cpu:
        import torch

        args.cpu = not torch.cuda.is_available()
    return args


@entry_point("reproduce")
def main(argv: list[str] | None = None) -> None:
    """CLI entry point."""
    reproduce(parse_args(argv))
