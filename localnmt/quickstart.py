"""Offline quickstart: gettext En-De corpus -> baseline + locality methods -> BLEU report + plot.

    python -m localnmt.quickstart [--workdir runs/quickstart] [--budget-minutes 16]

Builds the English-German corpus from the gettext catalogs on this machine, trains each system
in ``SYSTEMS`` (catalog names; missing ones are skipped with a message) as a shrunk
``localnmt_base`` (256 dims, 3+3 layers) for an equal share of the wall-clock budget, translates
the test set with beam search, scores it with SacreBLEU and writes ``report.md`` and
``report.png``. Uses the GPU (fp16) when torch sees one. A second run reuses the corpus,
finished trainings (``train.done``) and finished evaluations (``eval/scores.json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

# Catalog names, the baseline first. Add a method here once its catalog row lands.
SYSTEMS: list[str] = [
    "vaswani2017/table-3/transformer-base/base",
    "yang2018/table-4/localness/base",
    "yang2019/table-2/csans-base/base",
    "zhang2021/table-2/our-method/base",
]
# Used when the baseline's catalog row is missing.
FALLBACK_BASELINE = {
    "name": "baseline",
    "row": "Transformer (baseline)",
    "arch": "localnmt_base",
    "args": [],
}
_PROGRESS = ("train_inner", "| valid |", "done training", "Stopping training")


def log(msg: str) -> None:
    """Progress line with a timestamp."""
    print(f"[quickstart {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pick_systems(names: list[str], catalog: list[dict]) -> list[dict]:
    """Catalog rows for ``names`` in order; missing names are reported and skipped."""
    by_name = {row["name"]: row for row in catalog}
    systems = []
    for i, name in enumerate(names):
        if name in by_name:
            systems.append(by_name[name])
        elif i == 0:
            log(f"baseline {name} not in the catalog: using {FALLBACK_BASELINE['arch']}")
            systems.append(FALLBACK_BASELINE)
        else:
            log(f"skipping {name}: not in the catalog (yet)")
    return systems


def train_system(row: dict, data: Path, run_dir: Path, minutes: float, args) -> None:
    """Train one system for ``minutes`` of wall clock (or ``--max-update``), streaming progress."""
    import torch

    from localnmt.runs.generate import default_user_dir
    from localnmt.runs.recipes import train_args

    stamp = training_stamp(row, data, args.max_update)
    done = run_dir / "train.done"
    if done.exists():
        if done.read_text().strip() == stamp:
            log(f"{row['name']}: training already finished, reusing it")
            return
        kept = run_dir.with_name(f"{run_dir.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
        log(f"{row['name']}: finished run was for other data or settings; kept it as {kept}")
        run_dir.rename(kept)
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "localnmt.runs.fairseq_entry",
        "train",
        str(data),
        "--arch",
        row["arch"],
        "--save-dir",
        str(run_dir / "checkpoints"),
        *train_args("cpu", max_update=args.max_update),
        "--stop-time-hours",
        f"{minutes / 60:.4f}",
        "--no-epoch-checkpoints",
    ]
    user_dir = default_user_dir()
    if user_dir:
        cmd += ["--user-dir", user_dir]
    cmd += ["--fp16"] if torch.cuda.is_available() else ["--cpu"]
    cmd += list(row.get("args", []))
    log(f"{row['name']}: training for up to {minutes:.1f} min")
    with open(run_dir / "train.log", "w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if any(key in line for key in _PROGRESS):
                print("   ", line.rstrip().split(" | ", 3)[-1][:150], flush=True)
        if proc.wait() != 0:
            raise SystemExit(f"training {row['name']} failed, see {run_dir / 'train.log'}")
    done.write_text(stamp + "\n")


def training_stamp(row: dict, data: Path, max_update: int | None) -> str:
    """What a finished training depends on: the dictionary it was trained with, arch and args."""
    import hashlib

    digest = hashlib.sha256()
    for dict_file in sorted(data.glob("dict.*.txt")):
        digest.update(dict_file.read_bytes())
    digest.update(json.dumps([row["arch"], list(row.get("args", [])), max_update]).encode())
    return digest.hexdigest()[:16]


def evaluate_system(
    row: dict, data: Path, run_dir: Path, raw: Path, baseline_hyp: Path | None
) -> dict:
    """Translate and score the test set (reused when ``eval/scores.json`` exists)."""
    from localnmt.runs.evaluate import evaluate_checkpoint
    from localnmt.runs.generate import default_user_dir, infer_langs

    scores = run_dir / "eval" / "scores.json"
    if scores.exists():
        log(f"{row['name']}: translations already scored, reusing them")
        return json.loads(scores.read_text())
    src, tgt = infer_langs(data)
    log(f"{row['name']}: translating the test set (beam 4)")
    return evaluate_checkpoint(
        data,
        run_dir / "checkpoints" / "checkpoint_last.pt",
        run_dir / "eval",
        ref=raw / f"test.{tgt}" if (raw / f"test.{tgt}").exists() else None,
        src=raw / f"test.{src}" if (raw / f"test.{src}").exists() else None,
        baseline_hyp=baseline_hyp,
        user_dir=default_user_dir(),
    )


def write_report(workdir: Path, systems: list[dict], results: dict, logs: dict) -> Path:
    """``report.md`` (BLEU, Δ, #params, speed) and ``report.png`` (BLEU bars, valid loss)."""
    from localnmt.plotting import pyplot

    plt = pyplot()

    from localnmt.runs.report import millions

    lines = [
        "# localnmt quickstart (gettext En-De)",
        "",
        "| System | BLEU | Δ | tok. BLEU | #Params | Updates | Steps/s | Words/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in systems:
        s, tl = results[row["name"]], logs[row["name"]]
        boot = s.get("bootstrap")
        delta = f"{boot['delta']:+.2f} {boot['marker']}".strip() if boot else "-"
        lines.append(
            f"| {row['row']} (`{row['name']}`) | {s['sacrebleu']['score']:.2f} | {delta} "
            f"| {s['tokenized_bleu']['score']:.2f} | {millions(tl.params)} "
            f"| {tl.num_updates} | {tl.ups or 0:.2f} | {tl.wps or 0:.0f} |"
        )
    first = results[systems[0]["name"]]
    lines += [
        "",
        f"SacreBLEU signature: `{first['sacrebleu']['signature']}`; "
        f"{first['sentences']} test sentences. Δ: vs the baseline, paired bootstrap "
        "(↑/⇑ p<0.05/0.01). Equal wall-clock budget per system, so faster systems "
        "make more updates.",
        "",
        "![BLEU and validation loss](report.png)",
        "",
    ]
    report = workdir / "report.md"
    report.write_text("\n".join(lines))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [row["row"] for row in systems]
    ax1.bar(range(len(systems)), [results[r["name"]]["sacrebleu"]["score"] for r in systems])
    ax1.set_xticks(range(len(systems)), labels, rotation=20, ha="right", fontsize=8)
    ax1.set_ylabel("SacreBLEU")
    for row in systems:
        if logs[row["name"]].valid:
            updates, losses = zip(*logs[row["name"]].valid)
            ax2.plot(updates, losses, marker="o", label=row["row"])
    ax2.set_xlabel("updates")
    ax2.set_ylabel("validation loss")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(workdir / "report.png", dpi=100)
    plt.close(fig)
    return report


def main(argv: list[str] | None = None) -> None:
    """Run the quickstart."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workdir", type=Path, default=Path("runs/quickstart"))
    p.add_argument(
        "--budget-minutes",
        type=float,
        default=16.0,
        help="total training wall clock, split equally between systems",
    )
    p.add_argument("--max-update", type=int, default=20_000, help="per-system update cap")
    p.add_argument("--systems", help="comma-separated catalog names (default: SYSTEMS)")
    p.add_argument("--pair", default="en-de")
    p.add_argument("--bpe-merges", type=int, default=8000)
    p.add_argument("--max-train", type=int, help="cap on training sentence pairs")
    p.add_argument("--catalog-json", type=Path)
    args = p.parse_args(argv)

    from localnmt.data.gettext_corpus import prepare_gettext_pair
    from localnmt.runs.rows import load_catalog
    from localnmt.runs.train_log import read_train_log

    start = time.time()
    workdir = args.workdir.resolve()
    names = args.systems.split(",") if args.systems else SYSTEMS
    systems = pick_systems(names, load_catalog(args.catalog_json))
    log(f"step 1/3: corpus ({args.pair}) in {workdir / 'data'}")
    data = Path(
        prepare_gettext_pair(
            args.pair,
            workdir / "data",
            bpe_merges=args.bpe_merges,
            max_train=args.max_train,
            log=log,
        )
    )
    minutes = args.budget_minutes / len(systems)
    log(f"step 2/3: training {len(systems)} systems, {minutes:.1f} min each")
    results, logs = {}, {}
    for i, row in enumerate(systems):
        run_dir = workdir / "runs" / row["name"].replace("/", "__")
        train_system(row, data, run_dir, minutes, args)
        base_dir = workdir / "runs" / systems[0]["name"].replace("/", "__")
        results[row["name"]] = evaluate_system(
            row,
            data,
            run_dir,
            data.parent / "raw",
            None if i == 0 else base_dir / "eval" / "hyp.txt",
        )
        logs[row["name"]] = read_train_log(run_dir / "train.log")
        log(f"{row['name']}: BLEU {results[row['name']]['sacrebleu']['score']:.2f}")
    log("step 3/3: report")
    report = write_report(workdir, systems, results, logs)
    print(report.read_text())
    log(f"done in {(time.time() - start) / 60:.1f} min: {report} and {workdir / 'report.png'}")


if __name__ == "__main__":
    main()
