"""The quickstart's comparison: ``report.json`` (machine-readable), ``report.md`` and
``report.png`` (BLEU with its 95 % interval per system; validation loss against minutes)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from localnmt.machine import describe_machine

# A system "learned something" when its BLEU and its validation loss say so.
MIN_BLEU = 1.0


@dataclass
class SystemResult:
    """One row of the comparison (the fields of ``report.json``'s ``systems``)."""

    name: str
    row: str
    arch: str
    args: list[str]
    bleu: float
    ci: list[float]
    p_value: float | None
    updates: int
    updates_per_s: float | None
    params: int | None
    curve: list[dict] = field(default_factory=list)

    @property
    def learned(self) -> bool:
        """BLEU of at least ``MIN_BLEU`` and a validation loss that went down."""
        losses = [p["valid_loss"] for p in self.curve]
        return self.bleu >= MIN_BLEU and len(losses) >= 2 and losses[-1] < losses[0]

    def to_dict(self) -> dict:
        """Plain dict for JSON, with ``learned``."""
        return {**asdict(self), "learned": self.learned}


def write_json(workdir: Path, systems: list[SystemResult], meta: dict[str, Any]) -> Path:
    """``report.json``: ``{"systems": [...], "machine": ..., "budget_minutes": ..., ...}``."""
    path = workdir / "report.json"
    report = {"systems": [s.to_dict() for s in systems], **meta}
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _params(n: int | None) -> str:
    return f"{n / 1e6:.2f}M" if n else "-"


def _delta(system: SystemResult, baseline: SystemResult) -> str:
    """The BLEU difference as the table shows the scores (2 decimals), the paired test's
    p-value, and its stars only for a difference the table shows: two systems that both show
    12.34 differ by 0.00, whatever the test says about their unrounded scores."""
    if system is baseline:
        return "-"
    delta = round(system.bleu - baseline.bleu, 2)
    shown = f"{delta:+.2f}" if delta else "0.00"
    if system.p_value is None:
        return shown
    p = system.p_value
    stars = "" if not delta else " **" if p < 0.01 else " *" if p < 0.05 else ""
    return f"{shown} (p={p:.3f}){stars}"


def write_markdown(workdir: Path, systems: list[SystemResult], meta: dict[str, Any]) -> Path:
    """``report.md``: what the numbers are and are not, the table, the caveats."""
    base = systems[0]
    lines = [
        f"# localnmt quickstart: {meta['corpus']}",
        "",
        f"A small-scale comparison: each system is trained for the same wall-clock budget "
        f"({meta['minutes_per_system']:.1f} min of {meta['budget_minutes']:g}) on "
        f"{meta['corpus_description']}, with a {meta['sizing']}. It shows the methods running "
        "side by side and how they learn in equal time on this machine; it is **not** a "
        "reproduction of the papers' WMT results (base/big models trained for days on "
        "millions of sentence pairs; see `scripts/reproduce.sh`). Faster systems make more "
        "updates in the same time.",
        "",
        "| System | SacreBLEU | 95% CI | Δ vs baseline | #Params | Updates | Updates/s "
        "| Valid loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in systems:
        loss = f"{s.curve[-1]['valid_loss']:.2f}" if s.curve else "-"
        bleu = f"{s.bleu:.2f}" if s.learned else f"({s.bleu:.2f})"
        lines.append(
            f"| {s.row} (`{s.name}`) | {bleu} | {s.ci[0]:.2f}–{s.ci[1]:.2f} | {_delta(s, base)} "
            f"| {_params(s.params)} | {s.updates} | {s.updates_per_s or 0:.2f} | {loss} |"
        )
    lines += [
        "",
        f"SacreBLEU on the {meta['test_sentences']} test sentences against the raw references "
        f"(`{meta['signature']}`). 95 % CI: sacrebleu's bootstrap resampling "
        f"({meta['bootstrap_samples']} resamples); Δ: paired bootstrap test against the "
        "baseline (* p < 0.05, ** p < 0.01).",
    ]
    failed = [s for s in systems if not s.learned]
    if failed:
        names = ", ".join(f"{s.row} ({s.bleu:.2f})" for s in failed)
        lines += ["", f"**Did not learn in this budget** (BLEU < {MIN_BLEU:g} or validation "
                  f"loss not falling; shown in brackets, not a result): {names}. Give it more "
                  "time (`--budget-minutes`) or a faster machine."]  # fmt: skip
    lines += [
        "",
        f"Machine: {describe_machine(meta['machine'])} at the start, load "
        f"{meta['load_average_end'][0] if meta.get('load_average_end') else '?'} at the end. "
        f"Whole run: {meta['elapsed_minutes']:.1f} min.",
        "",
        "![BLEU with 95% intervals; validation loss against minutes](report.png)",
        "",
    ]
    path = workdir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_plot(workdir: Path, systems: list[SystemResult], meta: dict[str, Any]) -> Path:
    """``report.png``: BLEU bars with 95 % intervals; validation loss against minutes."""
    from localnmt.plotting import pyplot

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = [f"C{i}" for i in range(len(systems))]
    xs = range(len(systems))
    bleus = [s.bleu for s in systems]
    low = [s.bleu - s.ci[0] for s in systems]
    high = [s.ci[1] - s.bleu for s in systems]
    ax1.bar(xs, bleus, color=colors, yerr=[[max(v, 0) for v in low], [max(v, 0) for v in high]],
            capsize=6)  # fmt: skip
    for x, s in zip(xs, systems):
        ax1.annotate(f"{s.bleu:.1f}", (x, s.ci[1]), textcoords="offset points", xytext=(0, 4),
                     ha="center", fontsize=9)  # fmt: skip
    ax1.set_xticks(list(xs), [s.row for s in systems], rotation=15, ha="right", fontsize=9)
    ax1.set_ylabel("SacreBLEU (test), 95% bootstrap interval")
    ax1.set_ylim(0, max(max(s.ci[1] for s in systems) * 1.15, 1.0))
    ax1.set_title("Test BLEU")
    for color, s in zip(colors, systems):
        if s.curve:
            ax2.plot([p["minutes"] for p in s.curve], [p["valid_loss"] for p in s.curve],
                     marker="o", color=color, label=s.row)  # fmt: skip
    ax2.set_xlabel("training wall-clock minutes")
    ax2.set_ylabel("validation loss (bits/token)")
    ax2.set_title("Learning curves")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"{meta['corpus']}: equal budgets of {meta['minutes_per_system']:.1f} min per "
                 f"system ({describe_machine(meta['machine'])})", fontsize=9)  # fmt: skip
    fig.tight_layout()
    path = workdir / "report.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
