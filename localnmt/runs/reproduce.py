"""Reproduce one table of a paper: train each catalog row, evaluate, write a results page.

    python -m localnmt.runs.reproduce yang2019 "Table 1" --tiny
    python -m localnmt.runs.reproduce yang2018 "Table 4" --data data-bin/wmt14_en_de \\
        --ref raw/newstest2014.de --gpus 8 --fp16
    python -m localnmt.runs.reproduce zhang2021 "Table 2" --task nist_zh_en

**Tasks.** Every catalog row belongs to a task (``localnmt.catalog.tasks``: WMT14 En→De,
WMT17 Zh→En, NIST Zh→En, WAT17 Ja→En, WMT14 En→Ru, GLUE). A table with several columns
(language pairs) has rows of several tasks: ``--task NAME`` picks one, ``--task all`` runs
each in turn (one page per task); without ``--task`` the table's first task (its first
column in the catalog, WMT14 En→De where the table has one) runs, and the others are named.

**Data.** ``--data`` (or ``--pair en-de|en-zh``: the embedded gettext corpus); else the task's
default directory under ``--data-root`` (``runs/data/<task>/data-bin``) when it exists; else,
with ``--tiny``, the gettext corpus (en-de; translation tasks only); else the run stops before
any training with the data-prep command to run. Every selected task's data is checked before
the first row trains.

**Translation rows** run ``scripts/train.sh --arch <row.arch> --size <row.size|tiny> --
<row.args>`` (``--tokens-per-update`` from the task, e.g. 25K for En→Ru;
``--separate-vocab`` when the data-bin has separate source/target dictionaries), average the
last checkpoints (recipe default), then ``evaluate`` on the row's split (``test``, or
``valid`` for the papers' dev-set ablations; ``--subset`` overrides). The baseline of each
row (same size, vanilla Transformer) is evaluated first and used for Δ and the bootstrap
test. NIST Zh→En decodes the five test subsets and reports the MT03–MT08 average of
4-reference, lower-cased BLEU (``localnmt.runs.nist_eval``). Finished steps are reused:
``train.done`` and ``eval/scores.json`` in ``<workdir>/<table>[_<task>]/<row>/``.

**GLUE rows** (Pande et al. Table 4) pre-train with ``scripts/roberta_pretrain.sh`` and
fine-tune per task with ``scripts/glue_finetune.sh`` (``localnmt.runs.glue_runs``),
reporting dev accuracy per task.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from localnmt.catalog.tasks import DEFAULT_TASK, GLUE_TASKS, TASKS, Task
from localnmt.runs.rows import (
    group_by_task,
    load_catalog,
    pick_baseline,
    select_rows,
    table_id,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
TRAIN_SH = REPO_ROOT / "scripts" / "train.sh"


@dataclass
class Plan:
    """What runs for one task of the table: rows, data, scoring."""

    task: Task
    rows: list[dict]
    #: data-bin (GLUE: the data folder); None: build the gettext corpus (--tiny)
    data: Path | None
    stem: str
    subset: str = "test"
    refs: Path | None = None  # NIST references (refs/subsets.json)
    notes: list[str] = field(default_factory=list)


def train_command(
    row: dict,
    data: str,
    run_dir: Path,
    size: str,
    args: argparse.Namespace,
    task: Task | None = None,
    separate_vocab: bool = False,
) -> list[str]:
    """The train.sh command line of one row."""
    from localnmt.runs.generate import default_user_dir

    cmd = [
        "bash",
        str(TRAIN_SH),
        "--data",
        data,
        "--save-dir",
        str(run_dir / "checkpoints"),
        "--arch",
        row["arch"],
        "--size",
        size,
        "--log",
        str(run_dir / "train.log"),
    ]
    for flag in ("max_update", "layers", "gpus", "max_tokens"):
        if getattr(args, flag) is not None:
            cmd += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
    if task is not None and task.tokens_per_update:
        cmd += ["--tokens-per-update", str(task.tokens_per_update)]
    if separate_vocab:
        cmd.append("--separate-vocab")
    if args.cpu:
        cmd.append("--cpu")
    user_dir = default_user_dir()  # decided once here, so train.sh need not probe again
    cmd += ["--user-dir", user_dir] if user_dir else ["--no-user-dir"]
    if args.precision:
        cmd.append(args.precision)
    paper_recipe = row.get("train_args", []) if size in ("base", "big") else []
    return cmd + ["--", *row.get("args", []), *paper_recipe, *args.extra]


def pick_checkpoint(ckpt_dir: Path, size: str, average: int | None, log=print) -> Path:
    """Average the last N checkpoints when there are enough, else ``checkpoint_last.pt``."""
    from localnmt.runs.average_checkpoints import average_checkpoints, last_n_checkpoints
    from localnmt.runs.recipes import RECIPES

    n = RECIPES[size].average_last if average is None else average
    by_update = RECIPES[size].save_interval_updates > 0
    if n > 1:
        out = ckpt_dir / f"checkpoint_avg{n}.pt"
        if out.exists():
            return out
        try:
            paths = last_n_checkpoints(ckpt_dir, n, by_update=by_update)
        except ValueError as err:
            log(f"  not averaging: {err}")
        else:
            import torch

            log(f"  averaging {', '.join(p.name for p in paths)}")
            torch.save(average_checkpoints(paths), out)
            return out
    return ckpt_dir / "checkpoint_last.pt"


# ---- tasks and data ---------------------------------------------------------------------------


def choose_tasks(groups: dict[str, list[dict]], requested: str | None, title: str) -> list[str]:
    """The tasks to run: ``--task`` (a name or ``all``), else the table's first task."""
    names = list(groups)
    listing = ", ".join(f"{n} ({TASKS[n].label}, {len(groups[n])} rows)" for n in names)
    if requested == "all":
        return names
    if requested:
        if requested not in groups:
            raise SystemExit(f"{title} has no rows of task '{requested}'; its tasks: {listing}")
        return [requested]
    if len(names) > 1:
        print(
            f"{title} has rows of {len(names)} tasks: {listing}.\n"
            f"Running {names[0]}; choose with --task NAME, or --task all for every column.",
            flush=True,
        )
    return names[:1]


def page_stem(paper: str, table: str, task: str) -> str:
    """``yang2018_table4`` (WMT14 En-De) or ``yang2018_table4_wmt17_zh_en``."""
    stem = f"{paper}_{table_id(table)}"
    return stem if task == DEFAULT_TASK else f"{stem}_{task}"


def _is_data_bin(path: Path) -> bool:
    return path.is_dir() and any(path.glob("dict.*.txt"))


def _missing(task: Task, args: argparse.Namespace, what: str) -> SystemExit:
    tiny = "" if not task.is_translation else (
        " (or --tiny for a smoke test on the embedded gettext corpus)"
    )  # fmt: skip
    return SystemExit(
        f"no data for {task.label} ({task.name}): {what}.\n"
        f"Build it with:\n  {task.prep_command(args.data_root)}\n"
        f"then rerun, or pass --data DIR{tiny}. Nothing was trained."
    )


def plan_task(
    task_name: str, rows: list[dict], args: argparse.Namespace, *, check: bool = True
) -> Plan:
    """Rows, data and scoring of one task; with ``check``, stops (SystemExit) when the data
    is missing, before anything runs."""
    task = TASKS[task_name]
    plan = Plan(task, rows, None, page_stem(args.paper, args.table, task_name))
    plan.subset = args.subset or rows[0].get("split") or "test"
    default = task.default_data(args.data_root)
    default_exists = (
        _is_data_bin(default) if task.is_translation else (default / "pretrain").is_dir()
    )
    if args.data:
        plan.data = Path(args.data)
    elif default_exists and not args.pair:
        plan.data = default
    elif (args.tiny or args.pair) and task.is_translation:
        plan.data = None  # the embedded gettext corpus
        args.pair = args.pair or "en-de"
        plan.notes.append(f"data: embedded gettext corpus {args.pair} (no {task.label} data)")
    elif check:
        raise _missing(task, args, f"{default} does not exist")
    else:
        plan.data = default
        plan.notes.append(f"{default} does not exist yet: {task.prep_command(args.data_root)}")
    if not task.is_translation:
        from localnmt.runs.glue_runs import missing_data

        missing = missing_data(plan.data, tuple(args.glue_tasks))
        if missing and check:
            raise _missing(task, args, f"{plan.data} lacks {', '.join(missing)}")
        return plan
    if check and plan.data is not None and not plan.data.is_dir():
        raise _missing(task, args, f"{plan.data} does not exist")
    if task.scoring == "nist_multi_ref" and plan.subset == "test":
        refs = Path(args.refs_dir) if args.refs_dir else None
        if refs is None and plan.data is not None:
            from localnmt.runs.nist_eval import refs_dir_for

            refs = refs_dir_for(plan.data)
        if refs is not None and (refs / "subsets.json").is_file():
            plan.refs = refs
        elif not check and plan.data is not None and not plan.data.exists():
            plan.refs = refs  # dry run before the data is built: where they will be
        elif args.tiny or not check:
            plan.notes.append(
                "single-reference BLEU on subset test: no NIST references "
                "(refs/subsets.json) next to the data"
            )
        else:
            raise _missing(task, args, f"no references {refs}/subsets.json for 4-reference BLEU")
    return plan


def separate_vocab(data: Path) -> bool:
    """True when the data-bin's source and target dictionaries differ (no shared embeddings)."""
    return len({p.read_bytes() for p in Path(data).glob("dict.*.txt")}) > 1


def prepare_data(args: argparse.Namespace, plan: Plan) -> tuple[str, Path | None, Path | None]:
    """Data-bin, raw references and sources of the plan's subset (gettext corpus if none)."""
    from localnmt.runs.generate import infer_langs

    if plan.data is not None:
        data = plan.data
    else:
        from localnmt.data.gettext_corpus import prepare_gettext_pair

        max_train = args.max_train or (5000 if args.tiny else None)
        data = prepare_gettext_pair(
            args.pair,
            Path(args.workdir) / "data" / args.pair,
            bpe_merges=args.bpe_merges or (2000 if args.tiny else 8000),
            max_train=max_train,
        )
    src, tgt = infer_langs(data, plan.subset)
    raw = data.parent / "raw"
    ref = Path(args.ref) if args.ref else raw / f"{plan.subset}.{tgt}"
    source = Path(args.src) if args.src else raw / f"{plan.subset}.{src}"
    return str(data), ref if ref.exists() else None, source if source.exists() else None


# ---- translation ------------------------------------------------------------------------------


def run_row(
    row: dict,
    data: str,
    run_dir: Path,
    size: str,
    args: argparse.Namespace,
    plan: Plan,
    ref: Path | None,
    src: Path | None,
    base_dir: Path | None,
    separate: bool = False,
) -> dict:
    """Train (unless done) and evaluate (unless done) one row; returns its scores."""
    from localnmt.runs.generate import default_user_dir

    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "train.done").exists():
        cmd = train_command(row, data, run_dir, size, args, plan.task, separate)
        print("  $", shlex.join(cmd), flush=True)
        start = time.time()
        with open(run_dir / "train.stdout", "w") as out:
            subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.STDOUT)
        (run_dir / "train.done").write_text(f"{time.time() - start:.1f}\n")
    scores_path = run_dir / "eval" / "scores.json"
    if scores_path.exists() and not args.rescore:
        return json.loads(scores_path.read_text())
    ckpt = pick_checkpoint(run_dir / "checkpoints", size, args.average)
    print(f"  evaluating {ckpt.name}", flush=True)
    options = dict(bpe=args.bpe, beam=args.beam, lenpen=args.lenpen, user_dir=default_user_dir())
    if plan.refs is not None:
        from localnmt.runs.nist_eval import evaluate_nist

        return evaluate_nist(
            Path(data),
            ckpt,
            run_dir / "eval",
            plan.refs,
            baseline_dir=base_dir / "eval" if base_dir else None,
            **options,
        )
    from localnmt.runs.evaluate import evaluate_checkpoint

    return evaluate_checkpoint(
        data,
        ckpt,
        run_dir / "eval",
        ref=ref,
        src=src,
        baseline_hyp=base_dir / "eval" / "hyp.txt" if base_dir else None,
        subset=plan.subset,
        **options,
    )


def _ordered(rows: list[dict], baselines: dict[str, dict]) -> list[dict]:
    base_names = {b["name"] for b in baselines.values()}
    return [r for r in rows if r["name"] in base_names] + [
        r for r in rows if r["name"] not in base_names
    ]


def _size(row: dict, args: argparse.Namespace) -> str:
    return "tiny" if args.tiny else row.get("size", "base")


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
    """Print the commands of one task."""
    workdir = Path(args.workdir) / plan.stem
    data = str(plan.data) if plan.data is not None else f"<gettext {args.pair} corpus>"
    print(f"# task: {plan.task.name} ({plan.task.label}); data: {data}")
    for note in ([plan.task.note] if plan.task.note else []) + plan.notes:
        print(f"# note: {note}")
    if not plan.task.is_translation:
        from localnmt.runs.glue_runs import plan_row

        for row in plan.rows:
            print(f"# {row['row']}")
            glue = plan_row(row, plan.data or Path("<glue-data>"), workdir / row["name"],
                            **_glue_options(args))  # fmt: skip
            for step in glue.steps:
                print(shlex.join(step.cmd))
        return
    separate = plan.data is not None and _is_data_bin(plan.data) and separate_vocab(plan.data)
    baselines = {r["name"]: pick_baseline(plan.rows, r, args.baseline) for r in plan.rows}
    for row in _ordered(plan.rows, baselines):
        cmd = train_command(row, data, workdir / row["name"], _size(row, args), args, plan.task,
                            separate)  # fmt: skip
        print(f"# {row['row']} (baseline: {baselines[row['name']]['row']})")
        print(shlex.join(cmd))
    print(_eval_line(plan))


def run_translation(plan: Plan, args: argparse.Namespace) -> Path:
    """Train and evaluate every row of one task; returns the results page."""
    from localnmt.runs.report import LEGEND, LEGEND_MULTI_REF, RowResult, results_markdown
    from localnmt.runs.train_log import read_train_log

    rows = plan.rows
    baselines = {r["name"]: pick_baseline(rows, r, args.baseline) for r in rows}
    workdir = Path(args.workdir) / plan.stem
    data, ref, src = prepare_data(args, plan)
    separate = separate_vocab(Path(data))
    scores: dict[str, dict] = {}
    logs = {}
    start = time.time()
    ordered = _ordered(rows, baselines)
    for i, row in enumerate(ordered, 1):
        base = baselines[row["name"]]
        print(f"[{i}/{len(ordered)}] {row['name']} ({row['row']})", flush=True)
        base_dir = None if base["name"] == row["name"] else workdir / base["name"]
        scores[row["name"]] = run_row(
            row, data, workdir / row["name"], _size(row, args), args, plan, ref, src, base_dir,
            separate,
        )  # fmt: skip
        logs[row["name"]] = read_train_log(workdir / row["name"] / "train.log")
    multi = plan.refs is not None
    results = []
    for row in rows:
        s, log = scores[row["name"]], logs[row["name"]]
        is_base = baselines[row["name"]]["name"] == row["name"]
        common = dict(
            name=row["name"], row=row["row"], params=log.params, catalog_params=row.get("params"),
            ups=log.ups, wps=log.wps, is_baseline=is_base,
        )  # fmt: skip
        if multi:
            base_avg = scores[baselines[row["name"]]["name"]]["average"]
            sets = {k: v["score"] for k, v in s["sets"].items()}
            delta = None if is_base else s["average"] - base_avg
            results.append(RowResult(bleu=s["average"], delta=delta, sets=sets, **common))
            continue
        boot = s.get("bootstrap")
        results.append(
            RowResult(
                bleu=s["sacrebleu"]["score"],
                tok_bleu=s["tokenized_bleu"]["score"],
                delta=boot["delta"] if boot else None,
                marker=boot["marker"] if boot else "",
                p_value=boot["p_value"] if boot else None,
                **common,
            )
        )
    first = scores[ordered[0]["name"]]
    recipe = "tiny (smoke test, not comparable to the paper)" if args.tiny else "paper sizes"
    batch = plan.task.tokens_per_update or "8 x 4096 (recipe)"
    notes = [f"task: {plan.task.label} ({plan.task.name}); subset: {plan.subset}"]
    notes += plan.notes
    if multi:
        notes += [
            f"data: `{data}`; references: `{plan.refs}` ({len(first['sets'])} sets, "
            "4 references each, lower-cased)",
            "significance: no test for the 4-reference average; single-reference (ref0) "
            "paired bootstrap per set in the JSON",
            f"SacreBLEU signature: `{first['signature']}`",
        ]
    else:
        notes += [
            f"data: `{data}`; references: {first.get('references')}",
            f"SacreBLEU signature: `{first['sacrebleu']['signature']}`",
        ]
    notes += [
        f"recipe: {recipe}; tokens per update: {batch}"
        + ("; separate vocabularies (decoder embeddings shared)" if separate else "")
        + f"; updates: {', '.join(f'{n}={logs[n].num_updates}' for n in logs)}",
        f"wall time: {time.time() - start:.0f} s",
        f"command: `scripts/reproduce.sh {shlex.join(sys.argv[1:])}`",
    ]
    title = f"{args.paper} {args.table}, {plan.task.label}"
    legend = LEGEND_MULTI_REF if multi else LEGEND
    return _write_page(args, plan, results_markdown(title, results, notes, legend), results, scores)


def _write_page(args, plan: Plan, markdown: str, results: list, scores: dict) -> Path:
    out_dir = Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / f"{plan.stem}.md"
    page.write_text(markdown)
    payload = {"task": plan.task.name, "rows": [r.__dict__ for r in results], "scores": scores}
    (out_dir / f"{plan.stem}.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    print(page.read_text())
    return page


# ---- GLUE -------------------------------------------------------------------------------------


def _glue_options(args: argparse.Namespace) -> dict:
    return dict(
        tasks=tuple(args.glue_tasks), grid=args.glue_grid, tiny=args.tiny, cpu=args.cpu,
        gpus=args.gpus, extra=args.extra,
    )  # fmt: skip


def run_glue(plan: Plan, args: argparse.Namespace) -> Path:
    """Pre-train and fine-tune every row (Pande et al. Table 4); returns the results page."""
    from localnmt.runs.glue_runs import plan_row, row_scores
    from localnmt.runs.report import GlueResult, glue_markdown
    from localnmt.runs.train_log import read_train_log

    assert plan.data is not None
    workdir = Path(args.workdir) / plan.stem
    baselines = {r["name"]: pick_baseline(plan.rows, r, args.baseline) for r in plan.rows}
    start = time.time()
    scores: dict[str, dict] = {}
    params: dict[str, int | None] = {}
    ordered = _ordered(plan.rows, baselines)
    for i, row in enumerate(ordered, 1):
        print(f"[{i}/{len(ordered)}] {row['name']} ({row['row']})", flush=True)
        glue = plan_row(row, plan.data, workdir / row["name"], **_glue_options(args))
        for step in glue.steps:
            if step.done.exists():
                continue
            print(f"  {step.name}: $", shlex.join(step.cmd), flush=True)
            step.log.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            with open(step.log, "w") as out:
                subprocess.run(step.cmd, check=True, stdout=out, stderr=subprocess.STDOUT)
            step.done.write_text(f"{time.time() - t0:.1f}\n")
        scores[row["name"]] = row_scores(glue)
        params[row["name"]] = read_train_log(glue.steps[0].log).params
    tasks = list(args.glue_tasks)
    results = [
        GlueResult(
            name=r["name"],
            row=r["row"],
            accuracy={t: scores[r["name"]].get(t, {}).get("accuracy") for t in tasks},
            params=params[r["name"]],
            is_baseline=baselines[r["name"]]["name"] == r["name"],
        )
        for r in plan.rows
    ]
    setting = "grid batch {32, 128} x lr {1e-4, 2e-4}" if args.glue_grid else "batch 32, lr 1e-4"
    if args.tiny:
        setting = "batch 8, 3 updates"
    recipe = "tiny (smoke test, not comparable to the paper)" if args.tiny else "paper sizes"
    notes = [
        f"task: {plan.task.label}; data: `{plan.data}` (pretrain/ and one folder per task)",
        f"pre-training: scripts/roberta_pretrain.sh; fine-tuning: scripts/glue_finetune.sh, "
        f"{setting}; recipe: {recipe}",
        f"wall time: {time.time() - start:.0f} s",
        f"command: `scripts/reproduce.sh {shlex.join(sys.argv[1:])}`",
    ]
    title = f"{args.paper} {args.table}, {plan.task.label}"
    return _write_page(args, plan, glue_markdown(title, results, tasks, notes), results, scores)


# ---- entry point ------------------------------------------------------------------------------


def reproduce(args: argparse.Namespace) -> list[Path] | None:
    """Run every row of the table's selected task(s); returns the results pages (None for
    --dry-run)."""
    rows = select_rows(load_catalog(args.catalog_json), args.paper, args.table)
    if not rows:
        raise SystemExit(f"no catalog rows for {args.paper} {args.table}")
    groups = group_by_task(rows)
    chosen = choose_tasks(groups, args.task, f"{args.paper} {args.table}")
    single = [f"--{k.replace('_', '-')}" for k in ("data", "ref", "src", "refs_dir", "pair")
              if getattr(args, k)]  # fmt: skip
    if len(chosen) > 1 and single:
        raise SystemExit(
            f"{', '.join(single)} name(s) the data of one task; with --task all each task "
            "reads <data-root>/<task>/ (or run one --task at a time)"
        )
    plans = [plan_task(t, groups[t], args, check=not args.dry_run) for t in chosen]
    if args.dry_run:
        for plan in plans:
            dry_run(plan, args)
        return None
    return [
        run_translation(plan, args) if plan.task.is_translation else run_glue(plan, args)
        for plan in plans
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (everything after ``--`` goes to fairseq-train)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
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
    p.add_argument("--refs-dir", help="NIST references (default: <data>/../refs)")
    p.add_argument("--catalog-json", type=Path, help="instead of python -m localnmt.catalog")
    p.add_argument("--baseline", help="catalog name of the baseline row")
    p.add_argument("--workdir", default="runs/reproduce")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--max-update", type=int)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--layers", type=int, help="encoder/decoder layers (tiny/cpu)")
    p.add_argument("--gpus", type=int)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--fp16", dest="precision", action="store_const", const="--fp16")
    p.add_argument("--bf16", dest="precision", action="store_const", const="--bf16")
    p.add_argument("--average", type=int, help="checkpoints to average (default: recipe's)")
    p.add_argument("--bpe", default="subword_nmt", choices=["subword_nmt", "sentencepiece", "none"])
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
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
        help="fine-tune with batch {32,128} x lr {1e-4,2e-4}, keep the best (the paper's)",
    )
    args = p.parse_args(argv)
    args.extra = extra
    if args.gpus is None and not args.cpu:
        import torch

        args.cpu = not torch.cuda.is_available()
    return args


def main(argv: list[str] | None = None) -> None:
    """CLI entry point."""
    reproduce(parse_args(argv))


if __name__ == "__main__":
    main()
