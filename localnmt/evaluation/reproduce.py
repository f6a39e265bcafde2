"""Reproduce one table of a paper: train each catalog row, evaluate, write a results page.

    python -m localnmt.evaluation.reproduce yang2019 "Table 1" --tiny
    python -m localnmt.evaluation.reproduce yang2018 "Table 4" --data data-bin/wmt14_en_de \
        --ref raw/newstest2014.de --gpus 8 --fp16

Each row runs ``scripts/train.sh --arch <row.arch> --size <row.size|tiny> -- <row.args>``,
averages the last checkpoints (recipe default), then ``evaluate``; the baseline of each row
(same size, vanilla Transformer) is evaluated first and used for Δ and the bootstrap test.
Finished steps are reused: ``train.done`` and ``eval/scores.json`` in ``<workdir>/<row>/``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from localnmt.evaluation.average_checkpoints import average_checkpoints, last_n_checkpoints
from localnmt.evaluation.evaluate import evaluate_checkpoint
from localnmt.evaluation.generate import default_user_dir, infer_langs
from localnmt.evaluation.recipes import RECIPES
from localnmt.evaluation.report import RowResult, results_markdown
from localnmt.evaluation.rows import load_catalog, pick_baseline, select_rows, table_key
from localnmt.evaluation.train_log import read_train_log

REPO_ROOT = Path(__file__).resolve().parents[2]
TRAIN_SH = REPO_ROOT / "scripts" / "train.sh"


def train_command(
    row: dict, data: str, run_dir: Path, size: str, args: argparse.Namespace
) -> list[str]:
    """The train.sh command line of one row."""
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
    if args.cpu:
        cmd.append("--cpu")
    user_dir = default_user_dir()  # decided once here, so train.sh need not probe again
    cmd += ["--user-dir", user_dir] if user_dir else ["--no-user-dir"]
    if args.precision:
        cmd.append(args.precision)
    return cmd + ["--", *row.get("args", []), *args.extra]


def pick_checkpoint(ckpt_dir: Path, size: str, average: int | None, log=print) -> Path:
    """Average the last N checkpoints when there are enough, else ``checkpoint_last.pt``."""
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


def prepare_data(args: argparse.Namespace, workdir: Path) -> tuple[str, Path | None, Path | None]:
    """Data-bin, raw test references and sources (default: the gettext corpus)."""
    if args.data:
        data = Path(args.data)
    else:
        from localnmt.data.gettext_corpus import prepare_gettext_pair

        max_train = args.max_train or (5000 if args.tiny else None)
        data = prepare_gettext_pair(
            args.pair,
            workdir / "data" / args.pair,
            bpe_merges=args.bpe_merges or (2000 if args.tiny else 8000),
            max_train=max_train,
        )
    src, tgt = infer_langs(data)
    raw = data.parent / "raw"
    ref = (
        Path(args.ref)
        if args.ref
        else (raw / f"test.{tgt}" if (raw / f"test.{tgt}").exists() else None)
    )
    source = (
        Path(args.src)
        if args.src
        else (raw / f"test.{src}" if (raw / f"test.{src}").exists() else None)
    )
    return str(data), ref, source


def run_row(
    row: dict,
    data: str,
    run_dir: Path,
    size: str,
    args: argparse.Namespace,
    ref: Path | None,
    src: Path | None,
    baseline_hyp: Path | None,
) -> dict:
    """Train (unless done) and evaluate (unless done) one row; returns its scores."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "train.done").exists():
        cmd = train_command(row, data, run_dir, size, args)
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
    return evaluate_checkpoint(
        data,
        ckpt,
        run_dir / "eval",
        ref=ref,
        src=src,
        baseline_hyp=baseline_hyp,
        bpe=args.bpe,
        beam=args.beam,
        lenpen=args.lenpen,
        user_dir=default_user_dir(),
    )


def reproduce(args: argparse.Namespace) -> Path | None:
    """Run every row of the table; returns the results page (None for --dry-run)."""
    rows = select_rows(load_catalog(args.catalog_json), args.paper, args.table)
    if not rows:
        raise SystemExit(f"no catalog rows for {args.paper} {args.table}")
    baselines = {r["name"]: pick_baseline(rows, r, args.baseline) for r in rows}
    base_names = {b["name"] for b in baselines.values()}
    ordered = [r for r in rows if r["name"] in base_names] + [
        r for r in rows if r["name"] not in base_names
    ]
    stem = f"{args.paper}_table{table_key(args.table)}"
    workdir = Path(args.workdir) / stem
    if args.dry_run:
        data = args.data or "<data-bin>"
        for row in ordered:
            size = "tiny" if args.tiny else row.get("size", "base")
            cmd = train_command(row, data, workdir / row["name"], size, args)
            print(f"# {row['row']} (baseline: {baselines[row['name']]['row']})")
            print(shlex.join(cmd))
        return None
    data, ref, src = prepare_data(args, Path(args.workdir))
    scores: dict[str, dict] = {}
    logs = {}
    start = time.time()
    for i, row in enumerate(ordered, 1):
        size = "tiny" if args.tiny else row.get("size", "base")
        base = baselines[row["name"]]
        print(f"[{i}/{len(ordered)}] {row['name']} ({row['row']})", flush=True)
        base_hyp = (
            None if base["name"] == row["name"] else workdir / base["name"] / "eval" / "hyp.txt"
        )
        scores[row["name"]] = run_row(
            row, data, workdir / row["name"], size, args, ref, src, base_hyp
        )
        logs[row["name"]] = read_train_log(workdir / row["name"] / "train.log")
    results = []
    for row in rows:
        s, log = scores[row["name"]], logs[row["name"]]
        boot = s.get("bootstrap")
        results.append(
            RowResult(
                name=row["name"],
                row=row["row"],
                bleu=s["sacrebleu"]["score"],
                tok_bleu=s["tokenized_bleu"]["score"],
                delta=boot["delta"] if boot else None,
                marker=boot["marker"] if boot else "",
                p_value=boot["p_value"] if boot else None,
                params=log.params,
                catalog_params=row.get("params"),
                ups=log.ups,
                wps=log.wps,
                is_baseline=baselines[row["name"]]["name"] == row["name"],
            )
        )
    first = scores[ordered[0]["name"]]
    recipe = "tiny (smoke test, not comparable to the paper)" if args.tiny else "paper sizes"
    notes = [
        f"data: `{data}`; references: {first.get('references')}",
        f"recipe: {recipe}; updates: {', '.join(f'{n}={logs[n].num_updates}' for n in logs)}",
        f"SacreBLEU signature: `{first['sacrebleu']['signature']}`",
        f"wall time: {time.time() - start:.0f} s",
        f"command: `scripts/reproduce.sh {shlex.join(sys.argv[1:])}`",
    ]
    out_dir = Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / f"{stem}.md"
    page.write_text(results_markdown(f"{args.paper} {args.table}", results, notes))
    (out_dir / f"{stem}.json").write_text(
        json.dumps(
            {"rows": [r.__dict__ for r in results], "scores": scores}, indent=2, ensure_ascii=False
        )
    )
    print(page.read_text())
    return page


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (everything after ``--`` goes to fairseq-train)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("paper")
    p.add_argument("table", help='e.g. "Table 2"')
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the commands only")
    mode.add_argument("--tiny", action="store_true", help="tiny dims, few updates (smoke test)")
    p.add_argument("--data", help="fairseq data-bin (default: gettext corpus of --pair)")
    p.add_argument("--pair", default="en-de")
    p.add_argument("--max-train", type=int)
    p.add_argument("--bpe-merges", type=int)
    p.add_argument("--ref", help="raw test references (default: <data>/../raw/test.<tgt>)")
    p.add_argument("--src", help="raw test sources (default: <data>/../raw/test.<src>)")
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
