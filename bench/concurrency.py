"""``python -m bench.concurrency``: training throughput alone and with a second training beside
it, per method, launched the way the project launches them.

A shared machine is where researchers train: on a 2-core CPU two small trainings started at the
same time used to make 7 updates each in 45 s where one alone made 359 (OpenMP threads spinning
while they wait). For each method this runs, ``--repeats`` times and interleaved, one training
alone and two at once, each for ``--seconds`` of training (fairseq's ``--stop-time-hours``),
and reports each run's updates and the *share*: a run's updates beside another over the solo
run's updates (0.5 is a fair half of the machine). The trainings are the quickstart's CPU
sizing on a synthetic corpus (or ``--data``), started by :func:`localnmt.runs.launch.run_logged`,
so what the project sets for its children (``localnmt.processes``) is what is measured.
``--policy`` measures the settings a user of plain ``fairseq-train`` could choose instead:
``project`` (what localnmt-train sets: idle threads sleep), ``spin`` (torch's default: idle
threads spin), ``one-thread`` (``OMP_NUM_THREADS=1``).

Writes ``concurrency.json`` and ``concurrency.md`` to ``--out`` (default
``bench/results/concurrency-<time>``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import threading
import time
from pathlib import Path

from bench.machine import describe, machine_info
from localnmt import processes
from localnmt.catalog import get_row
from localnmt.quickstart.sizing import sizings
from localnmt.quickstart.training import system_spec
from localnmt.runs.launch import launch_command, run_logged
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
}
#: what a family changes in the CPU sizing: Pande's rows mask 8 heads, the sizing has 4
FAMILY_ARGS = {
    "local_heads": ("--encoder-attention-heads", "8", "--decoder-attention-heads", "8"),
}
#: the environment of a training under each policy
POLICIES = {
    "project": lambda: processes.child_environment(),
    "spin": lambda: {k: v for k, v in os.environ.items()
                     if k not in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "OMP_NUM_THREADS")},
    "one-thread": lambda: {**processes.child_environment(), "OMP_NUM_THREADS": "1"},
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


def _command(name: str, data: Path, run_dir: Path, seconds: float) -> tuple[list[str], Path]:
    layout = RunLayout.under(run_dir)
    row = get_row(FAMILIES[name])
    spec = system_spec(row, sizings()["cpu"], data, layout, cpu=True, max_update=10**6)
    spec = spec.replace(extra=(*spec.extra, *FAMILY_ARGS.get(name, ()),
                               "--stop-time-hours", f"{seconds / 3600:.6f}",
                               "--disable-validation", "--no-save"))  # fmt: skip
    return launch_command(spec, 0), layout.train_log


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


def measure(name: str, data: Path, work: Path, seconds: float, repeats: int,
            policy: str) -> dict:  # fmt: skip
    """Solo and paired runs of one method, interleaved; each run's updates and the shares."""
    solo, pairs = [], []
    env = POLICIES[policy]()
    for r in range(repeats):
        base = work / f"{name}-{policy}-{r}"
        solo += run_together([_command(name, data, base / "solo", seconds)], env)
        pairs.append(run_together([_command(name, data, base / f"pair{i}", seconds)
                                   for i in (0, 1)], env))  # fmt: skip
        print(f"  {name} ({policy}) repeat {r + 1}: solo {solo[-1]}, pair {pairs[-1]}",
              flush=True)  # fmt: skip
    if not any(solo):
        raise SystemExit(f"python -m bench.concurrency: error: no {name} training ran; see "
                         f"{work / f'{name}-{policy}-0' / 'solo' / 'train.log'}")  # fmt: skip
    ref = statistics.median(u for u in solo if u)
    shares = [u / ref if u is not None and ref else 0.0 for pair in pairs for u in pair]
    return {"method": name, "row": FAMILIES[name], "policy": policy, "seconds": seconds,
            "solo_updates": solo, "pair_updates": pairs, "solo_median": ref,
            "shares": [round(s, 3) for s in shares], "worst_share": round(min(shares), 3),
            "median_share": round(statistics.median(shares), 3)}  # fmt: skip


def markdown(results: list[dict], machine: dict) -> str:
    """The table of ``concurrency.md``."""
    lines = [
        f"Training alone and two at once, {results[0]['seconds']:g} s of training each "
        f"({len(results[0]['solo_updates'])} repeats, interleaved); {describe(machine)}.",
        "",
        "| method | policy | updates alone (median) | updates, two at once (each run) "
        "| share: worst / median |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        pairs = ", ".join("/".join(str(u) for u in p) for p in r["pair_updates"])
        lines.append(f"| {r['method']} | {r['policy']} | {r['solo_median']:g} | {pairs} "
                     f"| {r['worst_share']:.2f} / {r['median_share']:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--methods", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    p.add_argument("--policies", nargs="+", default=["project"], choices=list(POLICIES))
    p.add_argument("--seconds", type=float, default=30.0, help="training seconds per run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--data", type=Path, help="a data-bin (default: a synthetic corpus)")
    p.add_argument("--out", type=Path, help="output folder")
    args = p.parse_args(argv)
    out = args.out or RESULTS / f"concurrency-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    data = args.data or synthetic_corpus(out / "corpus")
    machine = machine_info_cpu()
    results = []
    for policy in args.policies:
        for method in args.methods:
            results.append(measure(method, data, out / "runs", args.seconds, args.repeats,
                                   policy))  # fmt: skip
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
