"""Outputs of a benchmark run: JSON (everything), a markdown table of ratios to the
baselines, and a PNG (attention time and memory vs T; training ratio vs length)."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.machine_info import describe

#: Lengths that count as "WMT lengths" for the training and beam-search targets.
WMT_MAX_LENGTH = 64


def training_target(params_delta: int) -> float:
    """Report-only targets: parametric methods ≥ 0.95 of baseline throughput; parameter-free
    (and plain) ≥ 1.0."""
    return 0.95 if params_delta > 0 else 1.0


def memory_exponent(lengths: list[int], peaks: list[float]) -> float | None:
    """Least-squares slope of log(peak) vs log(T): ~1 linear in T, ~2 quadratic."""
    pairs = [(math.log(t), math.log(p)) for t, p in zip(lengths, peaks) if p and p > 0]
    if len(pairs) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pairs)
    my = statistics.fmean(y for _, y in pairs)
    var = sum((x - mx) ** 2 for x, _ in pairs)
    if var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pairs) / var


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value / 2**20:.1f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def _by_row(records: list[dict], key: str = "row") -> dict[str, dict[int, dict]]:
    grouped: dict[str, dict[int, dict]] = defaultdict(dict)
    for rec in records:
        grouped[rec[key]][rec["length"]] = rec
    return grouped


def _meets(values: list[float], target: float) -> str:
    if not values:
        return "–"
    return "yes" if statistics.median(values) >= target else "NO"


def _clock_text(cfg: dict[str, Any], result: dict[str, Any]) -> str:
    if result["machine"].get("device", "cpu").startswith("cuda"):
        return "times from CUDA events"
    if cfg.get("clock") == "cpu":
        return "times in process CPU seconds (other processes' share of the machine not counted)"
    return "times in wall seconds"


def _second(cfg: dict[str, Any], result: dict[str, Any]) -> str:
    """The unit of the absolute speeds: CPU seconds add up every thread's time."""
    cuda = result["machine"].get("device", "cpu").startswith("cuda")
    return "CPU s" if cfg.get("clock") == "cpu" and not cuda else "s"


def markdown(result: dict[str, Any]) -> str:
    """The ratio tables (candidate ÷ baseline; > 1 is faster for speeds)."""
    cfg = result["config"]
    lines = [
        "# localnmt benchmarks",
        "",
        f"Machine: {describe(result['machine'])}.",
        f"Precision {cfg['dtype']}; median of {cfg['repeats']} A/B interleaved repeats after "
        f"{cfg['warmup']} warm-up rounds; {_clock_text(cfg, result)}; "
        f"peak memory = {result['memory_method']}.",
    ]
    machine = result["machine"]
    cores = machine.get("cores") or 1
    loads = {
        when: machine[key][0]
        for when, key in (("start", "load_average"), ("end", "load_average_end"))
        if machine.get(key)
    }
    busy = {when: load for when, load in loads.items() if load > 0.5 * cores}
    if busy:
        said = ", ".join(f"{load:.1f} at the {when}" for when, load in busy.items())
        lines.append(
            f"**Caveat:** 1-minute load average {said} on {cores} cores: other work shared "
            "the machine; ratios are less reliable than usual."
        )
    lines += _training_md(result) + _generation_md(result) + _attention_md(result)
    if result.get("band"):
        lines += ["", "## Band kernel vs dense SDPA (bench/band_attention.py)", ""]
        lines.append(result["band"]["markdown"].rstrip())
    if result.get("errors"):
        lines += ["", "## Errors", ""]
        lines += [f"- {e['section']} {e['what']}: {e['error']}" for e in result["errors"]]
    return "\n".join(lines) + "\n"


def _training_md(result: dict[str, Any]) -> list[str]:
    records = result.get("train", [])
    if not records:
        return []
    lengths = sorted({r["length"] for r in records})
    grouped = _by_row(records)
    cfg = result["config"]
    lines = [
        "",
        "## Training throughput (target tokens/s, ÷ fairseq Transformer of the same size)",
        "",
        f"Forward, backward and Adam step on synthetic batches of about {cfg['max_tokens']} "
        f"target tokens; {cfg['embed_dim'] or 'native'} dims / {cfg['ffn_dim'] or 'native'} FFN, "
        f"each row's own layer and head counts; vocabulary {cfg['vocab']}. Target: ≥ 0.95 for "
        f"rows with extra parameters, ≥ 1.0 otherwise (median over T ≤ {WMT_MAX_LENGTH}). "
        "params: this build (size overrides applied); paper: the count the paper prints.",
        "",
    ]
    header = ["row", "arch", "params (M)", "paper (M)", "Δparams", *(f"T={t}" for t in lengths)]
    header += ["target", "met"]
    rows = []
    for name, by_len in grouped.items():
        first = next(iter(by_len.values()))
        target = training_target(first["params_delta"])
        wmt = [r["throughput_ratio"] for t, r in by_len.items() if t <= WMT_MAX_LENGTH]
        rows.append(
            [name, first["arch"], f"{first['params'] / 1e6:.2f}"]
            + [_fmt(first.get("paper_params_m")), f"{first['params_delta']:+,}"]
            + [_fmt(by_len[t]["throughput_ratio"]) if t in by_len else "–" for t in lengths]
            + [f"{target:.2f}", _meets(wmt, target)]
        )
    lines += _table(header, rows)
    base = (
        [f"fairseq baseline tokens/{_second(cfg, result)}", "", "", "", ""]
        + [
            _fmt(
                statistics.median(r["baseline_tokens_per_s"] for r in records if r["length"] == t),
                0,
            )
            for t in lengths
        ]
        + ["", ""]
    )
    lines.append("| " + " | ".join(base) + " |")
    if any("memory_ratio" in r for r in records):
        lines += ["", "Peak memory of one training step (÷ baseline; baseline MiB last line):", ""]
        rows = [
            [name, next(iter(by_len.values()))["arch"]]
            + [_fmt(by_len[t].get("memory_ratio")) if t in by_len else "–" for t in lengths]
            for name, by_len in grouped.items()
        ]
        rows.append(
            ["fairseq baseline MiB", ""]
            + [
                _mb(
                    statistics.median(
                        r.get("baseline_peak_bytes", 0) for r in records if r["length"] == t
                    )
                )
                for t in lengths
            ]
        )
        lines += _table(["row", "arch", *(f"T={t}" for t in lengths)], rows)
    return lines


def _generation_md(result: dict[str, Any]) -> list[str]:
    records = result.get("generate", [])
    if not records:
        return []
    lengths = sorted({r["length"] for r in records})
    grouped = _by_row(records)
    cfg = result["config"]
    lines = [
        "",
        f"## Beam search (sentences/s, beam {cfg['beam']}, ÷ fairseq Transformer)",
        "",
        f"fairseq SequenceGenerator, {cfg['gen_batch']} source sentences of T tokens, exactly T "
        f"decoder steps (EOS masked until T). Target ≥ 0.95 (median over T ≤ {WMT_MAX_LENGTH}).",
        "",
    ]
    header = ["row", "arch", *(f"T={t}" for t in lengths), "met"]
    rows = []
    for name, by_len in grouped.items():
        first = next(iter(by_len.values()))
        wmt = [r["speed_ratio"] for t, r in by_len.items() if t <= WMT_MAX_LENGTH]
        rows.append(
            [name, first["arch"]]
            + [_fmt(by_len[t]["speed_ratio"]) if t in by_len else "–" for t in lengths]
            + [_meets(wmt, 0.95)]
        )
    rows.append(
        [f"fairseq baseline sentences/{_second(cfg, result)}", ""]
        + [
            _fmt(
                statistics.median(
                    r["baseline_sentences_per_s"] for r in records if r["length"] == t
                )
            )
            for t in lengths
        ]
        + [""]
    )
    return lines + _table(header, rows)


def _attention_md(result: dict[str, Any]) -> list[str]:
    records = [r for r in result.get("attention", []) if r.get("status") == "ok"]
    skipped = [r for r in result.get("attention", []) if r.get("status") != "ok"]
    if not records and not skipped:
        return []
    cfg = result["config"]
    lengths = sorted({r["length"] for r in result["attention"]})
    grouped: dict[tuple, dict[int, dict]] = defaultdict(dict)
    for r in result["attention"]:
        grouped[(r["method"], r["kernel"])][r["length"]] = r
    lines = [
        "",
        "## One attention layer, forward + backward (time ÷ plain layer; < 1 is faster)",
        "",
        f"B={cfg['attn_batch']}, H={cfg['attn_heads']}, d={cfg['attn_head_dim']}; plain = "
        "LocalAttention without modifier (fused dense attention). `path` = what the pipeline ran "
        "(dense reference or the kernel chosen). Speed-up = plain time ÷ method time at T=512 "
        "(windowed target ≥ 1.3); mem exp = slope of log peak memory vs log T (1 = linear).",
        "",
    ]
    header = ["method", "kernel", "path", "Δparams", *(f"T={t}" for t in lengths)]
    header += ["speed-up T=512", "mem exp"]
    rows = []
    for (method, kernel), by_len in grouped.items():
        ok = {t: r for t, r in by_len.items() if r.get("status") == "ok"}
        first = next(iter(by_len.values()))
        cells = []
        for t in lengths:
            r = by_len.get(t)
            if r is None:
                cells.append("–")
            elif r.get("status") != "ok":
                cells.append(r["status"].split(":")[0])
            else:
                cells.append(_fmt(r["time_ratio"]))
        at512 = ok.get(512)
        speedup = _fmt(1.0 / at512["time_ratio"]) if at512 else "–"
        exp_lengths = sorted(t for t in ok if "candidate_peak_bytes" in ok[t])
        exponent = memory_exponent(
            exp_lengths, [ok[t]["candidate_peak_bytes"] for t in exp_lengths]
        )
        rows.append(
            [method, kernel, first.get("path", "–"), f"{first.get('params_delta', 0):+,}"]
            + cells
            + [speedup, _fmt(exponent)]
        )
    plain_exp_lengths = sorted(
        t for t in lengths if any(r["length"] == t and "plain_peak_bytes" in r for r in records)
    )
    plain_peaks = [
        statistics.median(
            r["plain_peak_bytes"] for r in records if r["length"] == t and "plain_peak_bytes" in r
        )
        for t in plain_exp_lengths
    ]
    plain_times = {
        t: statistics.median(r["plain_s"] for r in records if r["length"] == t)
        for t in lengths
        if any(r["length"] == t for r in records)
    }
    rows.append(
        ["plain (ms)", "", "", ""]
        + [_fmt(plain_times[t] * 1000, 1) if t in plain_times else "–" for t in lengths]
        + ["", _fmt(memory_exponent(plain_exp_lengths, plain_peaks))]
    )
    lines += _table(header, rows)
    if any("memory_ratio" in r for r in records):
        lines += ["", "Peak memory (÷ plain layer; plain MiB last line):", ""]
        mem_rows = []
        for (method, kernel), by_len in grouped.items():
            mem_rows.append(
                [method, kernel]
                + [_fmt(by_len[t].get("memory_ratio")) if t in by_len else "–" for t in lengths]
            )
        mem_rows.append(
            ["plain MiB", ""]
            + [_mb(dict(zip(plain_exp_lengths, plain_peaks)).get(t)) for t in lengths]
        )
        lines += _table(["method", "kernel", *(f"T={t}" for t in lengths)], mem_rows)
    return lines


def plot(result: dict[str, Any], path: Path) -> Path | None:
    """Attention time and memory vs T (log-log), and training throughput ratio vs length."""
    from localnmt.plotting import pyplot

    plt = pyplot()

    attention = [r for r in result.get("attention", []) if r.get("status") == "ok"]
    training = result.get("train", [])
    if not attention and not training:
        return None
    panels = (2 if attention else 0) + (1 if training else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5), squeeze=False)
    axes = list(axes[0])
    series: dict[str, list[dict]] = defaultdict(list)
    if attention:
        for r in attention:
            series[f"{r['method']} [{r['kernel']}]"].append(r)
        plain: dict[int, list[dict]] = defaultdict(list)
        for r in attention:
            plain[r["length"]].append(r)
        time_ax, mem_ax = axes[0], axes[1]
        for label, recs in series.items():
            recs.sort(key=lambda r: r["length"])
            ts = [r["length"] for r in recs]
            time_ax.plot(ts, [r["candidate_s"] * 1000 for r in recs], marker="o", label=label)
            if all("candidate_peak_bytes" in r for r in recs):
                mem_ax.plot(
                    ts, [r["candidate_peak_bytes"] / 2**20 for r in recs], marker="o", label=label
                )
        ts = sorted(plain)
        time_ax.plot(
            ts,
            [statistics.median(r["plain_s"] for r in plain[t]) * 1000 for t in ts],
            "k--",
            marker="s",
            label="plain (dense)",
        )
        if all("plain_peak_bytes" in r for t in ts for r in plain[t]):
            mem_ax.plot(
                ts,
                [statistics.median(r["plain_peak_bytes"] for r in plain[t]) / 2**20 for t in ts],
                "k--",
                marker="s",
                label="plain (dense)",
            )
        for ax, ylabel in ((time_ax, "fwd+bwd time (ms)"), (mem_ax, "peak memory (MiB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("T")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
        handles, labels = time_ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
        time_ax.set_title("one attention layer")
        mem_ax.set_title("one attention layer")
    if training:
        ax = axes[-1]
        grouped = _by_row(training)
        for name, by_len in grouped.items():
            ts = sorted(by_len)
            ax.plot(ts, [by_len[t]["throughput_ratio"] for t in ts], marker="o", label=name)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.95, color="k", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sentence length T")
        ax.set_ylabel("training tokens/s ÷ fairseq")
        ax.set_title("training throughput ratio")
        ax.legend(fontsize=6)
        ax.grid(True, alpha=0.3)
    fig.suptitle(describe(result["machine"]), fontsize=8)
    rows_of_legend = math.ceil(len(series) / 3) + 1 if attention else 0
    fig.tight_layout(rect=(0, 0.04 * rows_of_legend, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_all(result: dict[str, Any], out: Path) -> dict[str, Path]:
    """``bench.json``, ``bench.md`` and ``bench.png`` (when there is something to plot)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bench.json", "markdown": out / "bench.md"}
    paths["json"].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths["markdown"].write_text(markdown(result))
    png = plot(result, out / "bench.png")
    if png is not None:
        paths["png"] = png
    return paths
