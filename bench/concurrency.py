"""``python -m bench.concurrency``: training throughput alone and with a second training beside
it, per method family and per way of launching it, against plain ``fairseq-train``.

A shared machine is where researchers train: on a 2-core CPU two small trainings started at the
same time used to make 7 updates each in 45 s where one alone made 359 (OpenMP threads spinning
while they wait). For each method, ``--repeats`` times and interleaved, each launcher in
``--launchers`` trains alone and two at once, each run for ``--seconds`` of training
(fairseq's ``--stop-time-hours``). The report gives each run's updates, the *share* (a run's
updates beside another over its launcher's solo median; 0.5 is a fair half of the machine),
the worst share also over plain ``fairseq-train``'s solo median, and each launcher's solo
updates over plain ``fairseq-train``'s in the same repeat (worst and median). The trainings
are the quickstart's CPU sizing on a synthetic corpus (or ``--data``). Launchers:

- ``localnmt``: :func:`localnmt.runs.launch.run_logged` with torch's default threads, what
  ``localnmt-train`` and the quickstart do (the cores shared by :mod:`localnmt.core_share`);
- ``fairseq-train``: plain ``fairseq-train`` (``python -m fairseq_cli.train``), torch's
  default threads: the reference;
- ``passive``: plain ``fairseq-train`` with ``OMP_WAIT_POLICY=PASSIVE KMP_BLOCKTIME=0``;
- ``one-thread``: plain ``fairseq-train`` with ``OMP_NUM_THREADS=1``.

Writes ``concurrency.json`` and ``concurrency.md`` to ``--out`` (default
``bench/results/concurrency-<time>``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

from bench.machine_info import describe, machine_info
from localnmt import processes
from localnmt.catalog import get_row
from localnmt.quickstart.sizing import sizings
from localnmt.quickstart.training import system_spec
from localnmt.runs.launch import ENTRY, launch_command, run_logged
from localnmt.runs.layout import RunLayout
from localnmt.runs.train_log import read_train_log

#: one catalog row per method family
FAMILIES = {
    "baseline": "vaswani2017/table-3/transformer-base/base",
    "localness": "yang2018/table-4/localness/base",
    "rel_pos": "shaw2018/table-1/relative-k-16/base",
    "gmm": "zhang2021/table-2/our-method/base",
    "csan_1d": "yang2019/table-1/1d-csans/base",
    "csan_2d": "yang2019/table-1/2d-csans/base",
    "block": "yang2019/table-1/block/base",
    "local_heads": "pande2021/table-1/2locheads-all6-b/base",
    "bi_direct": "yang2019/table-1/bi-direct/base",
    "neighbor": "yang2019/table-1/neighbor/base",
    "local_hard": "yang2019/table-1/local-hard/base",
    "tied_qk": "pande2021/table-3/half-tied-k/base",
    "hardcoded_gaussian": "zhang2021/table-2/hard-code-gaussian/base",
}
#: what a family changes in the CPU sizing: Pande's rows mask 8 heads, the sizing has 4
FAMILY_ARGS = {
    "local_heads": ("--encoder-attention-heads", "8", "--decoder-attention-heads", "8"),
    "tied_qk": ("--encoder-attention-heads", "8", "--decoder-attention-heads", "8"),
}
#: the thread settings of the environment (importing ``bench`` sets OMP_WAIT_POLICY)
THREAD_VARS = ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")
REFERENCE = "fairseq-train"


def torch_defaults() -> dict[str, str]:
    """This process's environment without any thread setting: torch's defaults."""
    return {k: v for k, v in os.environ.items() if k not in THREAD_VARS}


#: each launcher: (runs through localnmt's entry point, the environment of its trainings)
LAUNCHERS = {
    "localnmt": (True, lambda: processes.child_environment(base=torch_defaults())),
    REFERENCE: (False, torch_defaults),
    "passive": (False, lambda: {**torch_defaults(), "OMP_WAIT_POLICY": "PASSIVE",
                                "KMP_BLOCKTIME": "0"}),
    "one-thread": (False, lambda: {**torch_defaults(), "OMP_NUM_THREADS": "1"}),
}  # fmt: skip
RESULTS = Path(__file__).resolve().parent / "results"


def synthetic_corpus(folder: Path, sentences: int = 20_000, vocab: int = 6000) -> Path:
    """A data-bin of random sentences with UI-string lengths (4-30 words, Zipf-like words) and
    a vocabulary the size of the quickstart's BPE: the model's output layer has real size."""
    from localnmt.testing import preprocess

    if (folder / "data-bin" / "dict.src.txt").exists():
        return folder / "data-bin"
    rng = random.Random(7)
    words = [f"w{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]
    raw = folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", sentences), ("valid", 200), ("test", 200)):
        lines = [" ".join(rng.choices(words, weights, k=rng.randint(4, 30))) for _ in range(n)]
        for side in ("src", "tgt"):
            (raw / f"{split}.{side}").write_text("\n".join(lines) + "\n")
    return preprocess(raw, folder / "data-bin")


def _command(name: str, data: Path, run_dir: Path, seconds: float,
             launcher: str) -> tuple[list[str], Path]:  # fmt: skip
    layout = RunLayout.under(run_dir)
    row = get_row(FAMILIES[name])
    spec = system_spec(row, sizings()["cpu"], data, layout, cpu=True, max_update=10**6)
    spec = spec.replace(extra=(*spec.extra, *FAMILY_ARGS.get(name, ()),
                               "--stop-time-hours", f"{seconds / 3600:.6f}",
                               "--disable-validation", "--no-save"))  # fmt: skip
    cmd = launch_command(spec, 0)
    if not LAUNCHERS[launcher][0]:  # the same arguments to plain fairseq-train
        cmd = [sys.executable, "-m", "fairseq_cli.train", *cmd[len(ENTRY) + 1 :]]
    return cmd, layout.train_log


def _train(cmd: list[str], log: Path, env: dict, out: dict) -> None:
    status = run_logged(cmd, log, echo=False, env=env)
    out["updates"] = read_train_log(log).num_updates if status == 0 else None


def run_together(cmds: list[tuple[list[str], Path]], env: dict) -> list[int | None]:
    """Start every training at once; the updates each made."""
    outs: list[dict] = [{} for _ in cmds]
    threads = [threading.Thread(target=_train, args=(c, log, env, o))
               for (c, log), o in zip(cmds, outs)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [o.get("updates") for o in outs]


def run_alone(cmd: tuple[list[str], Path], env: dict) -> tuple[int | None, dict]:
    """One training alone: its updates, and its minor page faults and seconds in the kernel
    (``getrusage`` of the children waited for meanwhile: this training alone)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    (updates,) = run_together([cmd], env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return updates, {"page_faults": after.ru_minflt - before.ru_minflt,
                     "system_s": round(after.ru_stime - before.ru_stime, 2)}  # fmt: skip


def measure(name: str, data: Path, work: Path, seconds: float, repeats: int,
            launchers: list[str], paired: list[str]) -> list[dict]:  # fmt: skip
    """Solo runs of one method under each launcher and paired runs under each of ``paired``,
    interleaved (every launcher in each repeat); each run's updates, the shares and the ratios
    to plain fairseq-train, and each solo run's page faults and kernel seconds."""
    solo: dict[str, list] = {k: [] for k in launchers}
    pairs: dict[str, list] = {k: [] for k in launchers}
    costs: dict[str, list] = {k: [] for k in launchers}
    for r in range(repeats):
        for launcher in launchers:
            env = LAUNCHERS[launcher][1]()
            base = work / f"{name}-{launcher}-{r}"
            updates, cost = run_alone(_command(name, data, base / "solo", seconds, launcher), env)
            solo[launcher].append(updates)
            costs[launcher].append(cost)
            if launcher in paired:
                pairs[launcher].append(run_together(
                    [_command(name, data, base / f"pair{i}", seconds, launcher) for i in (0, 1)],
                    env))  # fmt: skip
            pair = pairs[launcher][-1] if launcher in paired else "-"
            print(f"  {name} ({launcher}) repeat {r + 1}: solo {solo[launcher][-1]}, "
                  f"pair {pair}", flush=True)  # fmt: skip
    results = []
    for launcher in launchers:
        if not any(solo[launcher]):
            raise SystemExit(f"python -m bench.concurrency: error: no {name} training ran; see "
                             f"{work / f'{name}-{launcher}-0' / 'solo' / 'train.log'}")  # fmt: skip
        results.append(summary(name, launcher, seconds, solo, pairs, costs))
    return results


def summary(name: str, launcher: str, seconds: float, solo: dict, pairs: dict,
            costs: dict | None = None) -> dict:  # fmt: skip
    """One launcher's row: its runs, shares of its own solo median and of fairseq-train's
    (where it ran in pairs), its solo runs over fairseq-train's of the same repeat, its
    slowest solo run over fairseq-train's median solo, and (``costs``) each solo run's page
    faults and kernel seconds with their medians."""
    ref = statistics.median(u for u in solo[launcher] if u)
    row = {"method": name, "row": FAMILIES[name], "launcher": launcher, "seconds": seconds,
           "solo_updates": solo[launcher], "pair_updates": pairs[launcher],
           "solo_median": ref}  # fmt: skip
    if costs and costs.get(launcher):
        runs = costs[launcher]
        row.update(solo_costs=runs,
                   median_page_faults=statistics.median(c["page_faults"] for c in runs),
                   median_system_s=statistics.median(c["system_s"] for c in runs))  # fmt: skip
    updates = [u or 0 for pair in pairs[launcher] for u in pair]
    if updates:
        shares = [u / ref for u in updates]
        row.update(shares=[round(s, 3) for s in shares], worst_share=round(min(shares), 3),
                   median_share=round(statistics.median(shares), 3))  # fmt: skip
    if REFERENCE in solo and any(solo[REFERENCE]):
        plain = statistics.median(u for u in solo[REFERENCE] if u)
        alone = [(u or 0) / p for u, p in zip(solo[launcher], solo[REFERENCE]) if p]
        row.update(alone_vs_plain=[round(a, 3) for a in alone],
                   worst_alone_vs_plain=round(min(alone), 3),
                   median_alone_vs_plain=round(statistics.median(alone), 3),
                   slowest_alone_vs_plain_median=round(min(u or 0 for u in solo[launcher])
                                                       / plain, 3))  # fmt: skip
        if updates:
            row["worst_share_of_plain"] = round(min(updates) / plain, 3)
    return row


def markdown(results: list[dict], machine: dict) -> str:
    """The table of ``concurrency.md``."""
    lines = [
        f"Training alone and two at once, {results[0]['seconds']:g} s of training each "
        f"({len(results[0]['solo_updates'])} repeats, interleaved); {describe(machine)}.",
        "",
        "| method | launcher | updates alone | alone / fairseq-train: worst, median "
        "| slowest alone / fairseq-train's median "
        "| updates, two at once (each run) | share of own solo: worst / median "
        "| worst share of fairseq-train's solo "
        "| alone: page faults (millions), kernel s (medians) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        alone = ", ".join(str(u) for u in r["solo_updates"])
        pairs = ", ".join("/".join(str(u) for u in p) for p in r["pair_updates"]) or "–"
        vs = (f"{r['worst_alone_vs_plain']:.2f}, {r['median_alone_vs_plain']:.2f}"
              if "alone_vs_plain" in r else "–")  # fmt: skip
        slowest = (f"{r['slowest_alone_vs_plain_median']:.2f}"
                   if "slowest_alone_vs_plain_median" in r else "–")  # fmt: skip
        of_plain = f"{r['worst_share_of_plain']:.2f}" if "worst_share_of_plain" in r else "–"
        share = f"{r['worst_share']:.2f} / {r['median_share']:.2f}" if "shares" in r else "–"
        kernel = (f"{r['median_page_faults'] / 1e6:.2f}, {r['median_system_s']:.1f}"
                  if "median_page_faults" in r else "–")  # fmt: skip
        lines.append(f"| {r['method']} | {r['launcher']} | {alone} | {vs} | {slowest} "
                     f"| {pairs} | {share} | {of_plain} | {kernel} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--methods", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    p.add_argument("--launchers", nargs="+", default=["localnmt", REFERENCE],
                   choices=list(LAUNCHERS))  # fmt: skip
    p.add_argument("--paired", nargs="+", choices=list(LAUNCHERS),
                   help="launchers that also train two at once (default: every one)")  # fmt: skip
    p.add_argument("--seconds", type=float, default=30.0, help="training seconds per run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--data", type=Path, help="a data-bin (default: a synthetic corpus)")
    p.add_argument("--out", type=Path, help="output folder")
    args = p.parse_args(argv)
    stray = sorted(set(args.paired or ()) - set(args.launchers))
    if stray:
        p.error(f"--paired {' '.join(stray)}: not among --launchers {' '.join(args.launchers)}")
    out = args.out or RESULTS / f"concurrency-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    data = args.data or synthetic_corpus(out / "corpus")
    machine = machine_info_cpu()
    results = []
    for method in args.methods:
        results += measure(method, data, out / "runs", args.seconds, args.repeats,
                           args.launchers, args.paired or args.launchers)  # fmt: skip
        machine["load_average_end"] = list(os.getloadavg())
        (out / "concurrency.json").write_text(  # kept after every method
            json.dumps({"machine": machine, "results": results}, indent=2) + "\n"
        )
    text = markdown(results, machine)
    (out / "concurrency.md").write_text(text)
    print(text)
    return 0


def machine_info_cpu() -> dict:
    import torch

    return machine_info(torch.device("cpu"))


if __name__ == "__main__":
    raise SystemExit(main())
