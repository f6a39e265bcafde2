"""Running: train one row (a :func:`localnmt.runs.train_run.train_run` step), evaluate it (a
step keyed by the trained run and the scoring options), and every row of one task."""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import time
from pathlib import Path

from localnmt.catalog.tasks import Task
from localnmt.data.metadata import post_processing
from localnmt.data.steps import StepRunner
from localnmt.runs.reproduce.plan import Plan, References, ordered, prepare_data, row_size
from localnmt.runs.reproduce.plan import separate_vocab as has_separate_vocab
from localnmt.runs.rows import pick_baseline
from localnmt.runs.train import TrainSpec


def row_spec(
    row: dict,
    data: str,
    run_dir: Path,
    size: str,
    args: argparse.Namespace,
    task: Task | None = None,
    separate_vocab: bool = False,
) -> TrainSpec:
    """The ``localnmt-train`` settings of one row: its arch and recipe, its ``args``, at
    paper sizes its paper's ``train_args``, then ``--`` extras of the command line."""
    paper_recipe = row.get("train_args", []) if size in ("base", "big") else []
    return TrainSpec(
        data=str(data), save_dir=str(run_dir / "checkpoints"), arch=row["arch"], size=size,
        max_tokens=args.max_tokens, max_update=args.max_update, layers=args.layers,
        tokens_per_update=task.tokens_per_update if task is not None else None,
        separate_vocab=separate_vocab, gpus=args.gpus, cpu=args.cpu, precision=args.precision,
        extra=[*row.get("args", []), *paper_recipe, *args.extra],
    )  # fmt: skip


def pick_checkpoint(ckpt_dir: Path, size: str, average: int | None, log=print) -> Path:
    """Average the last N checkpoints when there are enough, else ``checkpoint_last.pt``.
    The average is made again at every evaluation (a step that reruns only when its training
    or its settings changed), never read back from an earlier one."""
    from localnmt.runs.average_checkpoints import last_n_checkpoints, write_average
    from localnmt.runs.recipes import RECIPES

    n = RECIPES[size].average_last if average is None else average
    by_update = RECIPES[size].save_interval_updates > 0
    if n > 1:
        try:
            paths = last_n_checkpoints(ckpt_dir, n, by_update=by_update)
        except ValueError as err:
            log(f"  not averaging: {err}")
        else:
            log(f"  averaging {', '.join(p.name for p in paths)}")
            return write_average(paths, ckpt_dir / f"checkpoint_avg{n}.pt")
    return ckpt_dir / "checkpoint_last.pt"


def _file_hash(path: Path | None) -> str | None:
    if path is None or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def run_row(
    spec: TrainSpec,
    run_dir: Path,
    args: argparse.Namespace,
    plan: Plan,
    refs: References,
    base_dir: Path | None,
) -> dict:
    """Train (unless an identical run is done) and evaluate (unless done with the same
    checkpoint and scoring options) one row; returns its scores."""
    from localnmt.paths import default_user_dir
    from localnmt.runs.train_run import train_run

    run_dir.mkdir(parents=True, exist_ok=True)
    runner = StepRunner(run_dir, log=lambda m: print(f"  {m}", flush=True))
    print("  $ localnmt-train", shlex.join(spec.to_argv()), flush=True)
    trained = train_run(
        run_dir, Path(spec.data), spec.arch, spec.extra, size=spec.size,
        max_update=spec.max_update, max_tokens=spec.max_tokens, layers=spec.layers,
        tokens_per_update=spec.tokens_per_update, separate_vocab=spec.separate_vocab,
        gpus=spec.gpus, cpu=spec.cpu, precision=spec.precision, user_dir=spec.user_dir,
        runner=runner, log=lambda m: print(m, flush=True),
    )  # fmt: skip
    eval_dir = run_dir / "eval"
    baseline_hyp = base_dir / "eval" / "hyp.txt" if base_dir else None
    params = {
        "train": trained.fingerprint, "average": args.average, "subset": plan.subset,
        "post_processing": list(post_processing(Path(spec.data), args.bpe)),
        "beam": args.beam, "lenpen": args.lenpen,
        "ref": _file_hash(refs.ref), "src": _file_hash(refs.src),
        "nist_refs": str(plan.refs) if plan.refs else None, "baseline": _file_hash(baseline_hyp),
    }  # fmt: skip
    if args.rescore:
        (runner.marker_dir / "evaluate.json").unlink(missing_ok=True)

    def evaluate() -> None:
        ckpt = pick_checkpoint(trained.checkpoint_dir, spec.size, args.average)
        print(f"  evaluating {ckpt.name}", flush=True)
        options = dict(bpe=args.bpe, beam=args.beam, lenpen=args.lenpen,
                       user_dir=default_user_dir())  # fmt: skip
        if plan.refs is not None:
            from localnmt.runs.nist_eval import evaluate_nist

            evaluate_nist(Path(spec.data), ckpt, eval_dir, plan.refs,
                          baseline_dir=base_dir / "eval" if base_dir else None,
                          **options)  # fmt: skip
            return
        from localnmt.runs.evaluate import evaluate_checkpoint

        evaluate_checkpoint(spec.data, ckpt, eval_dir, ref=refs.ref, src=refs.src,
                            baseline_hyp=baseline_hyp, subset=plan.subset,
                            **options)  # fmt: skip

    runner.run("evaluate", evaluate, outputs=[eval_dir / "scores.json"], params=params)
    return json.loads((eval_dir / "scores.json").read_text(encoding="utf-8"))


def run_translation(plan: Plan, args: argparse.Namespace) -> Path:
    """Train and evaluate every row of one task; returns the results page."""
    from localnmt.runs.reproduce.page import translation_page
    from localnmt.runs.train_log import read_train_log

    baselines = {r["name"]: pick_baseline(plan.rows, r, args.baseline) for r in plan.rows}
    workdir = Path(args.workdir) / plan.stem
    data, refs = prepare_data(args, plan)
    separate = has_separate_vocab(data)
    scores: dict[str, dict] = {}
    logs = {}
    start = time.time()
    rows = ordered(plan.rows, baselines)
    for i, row in enumerate(rows, 1):
        base = baselines[row["name"]]
        print(f"[{i}/{len(rows)}] {row['name']} ({row['row']})", flush=True)
        run_dir = workdir / row["name"]
        base_dir = None if base["name"] == row["name"] else workdir / base["name"]
        spec = row_spec(row, str(data), run_dir, row_size(row, args), args, plan.task, separate)
        scores[row["name"]] = run_row(spec, run_dir, args, plan, refs, base_dir)
        logs[row["name"]] = read_train_log(run_dir / "train.log")
    return translation_page(
        args, plan, baselines, scores, logs, data=data, refs=refs, separate=separate,
        first=rows[0]["name"], seconds=time.time() - start,
    )  # fmt: skip


def glue_options(args: argparse.Namespace) -> dict:
    """Options of :func:`localnmt.runs.glue_runs.plan_row` from the command line."""
    return dict(
        tasks=tuple(args.glue_tasks), grid=args.glue_grid, tiny=args.tiny, cpu=args.cpu,
        gpus=args.gpus, extra=args.extra,
    )  # fmt: skip


def glue_step_key(step, run_dir: Path) -> str:
    """The step's marker name, one per output folder: ``pretrain``, ``SST-2`` or, with the
    grid, ``SST-2_bsz32_lr1e-4``."""
    return step.log.parent.relative_to(run_dir).as_posix().replace("/", "_")


def portable_command(cmd: list[str], root: Path) -> list[str]:
    """``cmd`` with every path under ``root`` written relative to it: the key of a GLUE step,
    so that a moved workdir is still recognised (its checkpoints resumed, not set aside)."""
    out = []
    for arg in cmd:
        path = Path(arg)
        if path.is_absolute() and path.is_relative_to(root):
            arg = path.relative_to(root).as_posix()
        out.append(arg)
    return out


def run_glue(plan: Plan, args: argparse.Namespace) -> Path:
    """Pre-train and fine-tune every row (Pande et al. Table 4); returns the results page.
    Each command is a step keyed by its command line (a changed setting reruns it and the
    steps after it)."""
    from localnmt.data.steps import fingerprint
    from localnmt.runs.glue_runs import plan_row, row_scores
    from localnmt.runs.reproduce.page import glue_page
    from localnmt.runs.train import run_logged
    from localnmt.runs.train_log import read_train_log
    from localnmt.runs.train_run import claim_checkpoints

    assert plan.data is not None
    workdir = Path(args.workdir) / plan.stem
    baselines = {r["name"]: pick_baseline(plan.rows, r, args.baseline) for r in plan.rows}
    start = time.time()
    scores: dict[str, dict] = {}
    params: dict[str, int | None] = {}
    rows = ordered(plan.rows, baselines)
    for i, row in enumerate(rows, 1):
        print(f"[{i}/{len(rows)}] {row['name']} ({row['row']})", flush=True)
        run_dir = workdir / row["name"]
        glue = plan_row(row, plan.data, run_dir, **glue_options(args))
        runner = StepRunner(run_dir, log=lambda m: print(f"  {m}", flush=True))
        for step in glue.steps:
            key = glue_step_key(step, run_dir)
            cmd = portable_command(step.cmd, Path(args.workdir).resolve())

            def run(step=step, key=key, run_dir=run_dir, cmd=cmd) -> None:
                # pre-training's first phase resumes any checkpoint_last.pt in its save dir:
                # those of other settings are moved aside first
                claim_checkpoints(step.save_dir, run_dir, run_dir / f"{key}.started.json",
                                  fingerprint(cmd), cmd, log=print)  # fmt: skip
                print(f"  {step.name}: $", shlex.join(step.cmd), flush=True)
                if run_logged(step.cmd, step.log, echo=False) != 0:
                    raise RuntimeError(f"{step.name} failed; see {step.log}")

            deps = () if key == "pretrain" else ("pretrain",)
            runner.run(key, run, outputs=[step.output], params=cmd, deps=deps)
        scores[row["name"]] = row_scores(glue)
        params[row["name"]] = read_train_log(glue.steps[0].log).params
    return glue_page(args, plan, baselines, scores, params, seconds=time.time() - start)
