"""The quickstart's comparison: ``report.json`` (machine-readable), ``report.md`` and
``report.png`` (BLEU with its 95 % interval per system; learning curves).

The run's :class:`~localnmt.quickstart.run_record.QuickstartRun` says what the systems had in
common: equal updates (every system trained its allotment's ``updates_per_system``, the
papers' convention; each row gives the minutes it took) or equal time (``minutes_per_system``
of training each; faster systems make more updates)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from localnmt.evaluation.learned import MIN_BLEU
from localnmt.evaluation.learned import learned as learned_from
from localnmt.evaluation.results import TrainingRecord
from localnmt.quickstart.run_record import Allotment, Corpus, QuickstartRun
from localnmt.runs.timed_validation import CurvePoint


def learned(bleu: float, curve: list[CurvePoint]) -> bool:
    """A run learned something (:func:`localnmt.evaluation.learned.learned`): BLEU of at
    least ``MIN_BLEU`` and a validation loss that went down."""
    return learned_from(bleu, [p.valid_loss for p in curve])


@dataclass
class SeedRun:
    """One trained run of a system (one seed)."""

    seed: int
    bleu: float
    updates: int
    minutes: float  # of training (the trainer's cumulative training time)
    updates_per_s: float | None
    params: int | None
    curve: list[CurvePoint] = field(default_factory=list)
    #: the scored checkpoint's training (``scores.json``'s ``training``: its updates, its
    #: run's max_update, whether the run finished)
    training: TrainingRecord | None = None


@dataclass
class SystemResult:
    """One row of the comparison (the fields of ``report.json``'s ``systems``): over its
    runs, the mean BLEU (``bleu_sd``: their standard deviation, None for one run), the mean
    updates and minutes of training, and every run in ``seeds``."""

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
    curve: list[CurvePoint] = field(default_factory=list)
    bleu_sd: float | None = None
    minutes: float | None = None
    seeds: list[SeedRun] = field(default_factory=list)

    @property
    def learned(self) -> bool:
        """Every run learned something (:func:`learned`)."""
        runs = self.seeds or [SeedRun(1, self.bleu, self.updates, 0.0, None, None, self.curve)]
        return all(learned(r.bleu, r.curve) for r in runs)

    @property
    def unfinished(self) -> list[SeedRun]:
        """The runs whose scored checkpoint comes from a run that did not finish."""
        return [r for r in self.seeds if r.training is not None and r.training.finished is False]

    def to_dict(self) -> dict:
        """Plain dict for JSON, with ``learned``; curve points as ``curve.jsonl`` writes them."""
        plain = asdict(self)
        plain["curve"] = [p.to_json() for p in self.curve]
        for seed, run in zip(plain["seeds"], self.seeds):
            seed["curve"] = [p.to_json() for p in run.curve]
        return {**plain, "learned": self.learned}


def write_json(workdir: Path, systems: list[SystemResult], run: QuickstartRun) -> Path:
    """``report.json``: ``{"systems": [...], "machine": ..., "budget_minutes": ..., ...}``
    (:meth:`QuickstartRun.to_json`)."""
    path = workdir / "report.json"
    report = {"systems": [s.to_dict() for s in systems], **run.to_json()}
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


def _allotment(run: QuickstartRun) -> Allotment:
    if run.allotment is None:
        raise ValueError("the quickstart run has no allotment yet")
    return run.allotment


def _what_was_equal(run: QuickstartRun) -> str:
    seeds = run.seeds
    runs = f", {seeds} runs (seeds 1-{seeds}) each" if seeds > 1 else ""
    allotment = _allotment(run)
    if run.by_updates:
        calibration = allotment.calibration
        how = "as asked"
        if calibration:
            how = (f"{allotment.minutes_per_system:.1f} min of budget per system, from each "
                   f"system's measured speed and validations; baseline "
                   f"{calibration.costs[0].updates_per_s:.2f} updates/s")  # fmt: skip
        if allotment.replan:
            how += (f"; planned again after {allotment.replan.part_updates} updates from the "
                    "runs' own speeds, baseline "
                    f"{allotment.replan.costs[0].updates_per_s:.2f} updates/s")  # fmt: skip
        return (f"each system is trained for the same number of updates, "
                f"{allotment.updates_per_system} ({how}){runs}")  # fmt: skip
    return (f"each system is trained for the same wall-clock budget "
            f"({allotment.minutes_per_system:.1f} min of {run.budget_minutes:g}){runs}; "
            "faster systems make more updates in the same time")  # fmt: skip


def _corpus(run: QuickstartRun) -> Corpus:
    if run.corpus is None:
        raise ValueError("the quickstart run has no corpus yet")
    return run.corpus


def write_markdown(workdir: Path, systems: list[SystemResult], run: QuickstartRun) -> Path:
    """``report.md``: what the numbers are and are not, the table, the caveats."""
    base = systems[0]
    seeds = run.seeds
    corpus = _corpus(run)
    lines = [
        f"# localnmt quickstart: {corpus.name}",
        "",
        f"A small-scale comparison: {_what_was_equal(run)}, on {corpus.description}, "
        f"with a {run.sizing}. It shows the methods running side by side and how they learn "
        "in a short run on this machine; it is **not** a reproduction of the papers' WMT "
        "results (base/big models trained for days on millions of sentence pairs; see "
        "`scripts/reproduce.sh`).",
        "",
        f"| System | SacreBLEU{' (mean ± sd)' if seeds > 1 else ''} | 95% CI | Δ vs baseline "
        "| #Params | Updates | Minutes | Updates/s | Valid loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in systems:
        loss = f"{s.curve[-1].valid_loss:.2f}" if s.curve else "-"
        score = f"{s.bleu:.2f}" + (f" ± {s.bleu_sd:.2f}" if s.bleu_sd is not None else "")
        bleu = score if s.learned else f"({score})"
        minutes = f"{s.minutes:.1f}" if s.minutes is not None else "-"
        unfinished = "".join(
            f" (seed {r.seed} unfinished: {r.training.updates} of "
            f"{r.training.max_update} updates)" for r in s.unfinished if r.training)  # fmt: skip
        lines.append(
            f"| {s.row} (`{s.name}`){unfinished} | {bleu} | {s.ci[0]:.2f}–{s.ci[1]:.2f} "
            f"| {_delta(s, base)} "
            f"| {_params(s.params)} | {s.updates} | {minutes} | {s.updates_per_s or 0:.2f} "
            f"| {loss} |"
        )
    pooled = (f" over the {seeds} runs' outputs together (seed k of a system paired with seed "
              "k of the baseline)" if seeds > 1 else "")  # fmt: skip
    lines += [
        "",
        f"SacreBLEU on the {run.test_sentences} test sentences against the raw references "
        f"(`{run.signature}`). 95 % CI: sacrebleu's bootstrap resampling "
        f"({run.bootstrap_samples} resamples){pooled}; Δ: paired bootstrap test against "
        "the baseline (* p < 0.05, ** p < 0.01). Minutes: the trainer's clock from its start "
        "to its last update, validations included; Updates/s: its training speed (fairseq's "
        "median over the logged intervals).",
    ]
    if seeds > 1:
        lines += ["", "Per seed (BLEU / updates / minutes): " + "; ".join(
            f"{s.row}: " + ", ".join(f"{r.bleu:.2f}/{r.updates}/{r.minutes:.1f}" for r in s.seeds)
            for s in systems) + "."]  # fmt: skip
    failed = [s for s in systems if not s.learned]
    if failed:
        names = ", ".join(f"{s.row} ({s.bleu:.2f})" for s in failed)
        lines += ["", f"**Did not learn in this budget** (BLEU < {MIN_BLEU:g} or validation "
                  f"loss not falling in a run; shown in brackets, not a result): {names}. Give "
                  "it more time (`--budget-minutes`) or a faster machine."]  # fmt: skip
    used = _allotment(run).budget_used_minutes
    if used is not None:
        over = 100 * (used / run.budget_minutes - 1)
        lines += ["", f"Calibration and training took {used:.1f} min of the "
                  f"{run.budget_minutes:g}-minute budget ({over:+.1f} %)."]  # fmt: skip
    lines += [
        "",
        f"Machine: {run.machine.describe()} at the start, load "
        f"{run.load_average_end[0] if run.load_average_end else '?'} at the end. "
        f"Whole run: {run.elapsed_minutes:.1f} min.",
        "",
        "![BLEU with 95% intervals; learning curves](report.png)",
        "",
    ]
    path = workdir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_plot(workdir: Path, systems: list[SystemResult], run: QuickstartRun) -> Path:
    """``report.png``: BLEU bars with 95 % intervals; validation loss against updates (equal
    updates) or minutes (equal time), every run of every system."""
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
    by_updates = run.by_updates
    x_key = "updates" if by_updates else "minutes"
    for color, s in zip(colors, systems):
        runs = s.seeds or [SeedRun(1, s.bleu, s.updates, 0, None, None, s.curve)]
        for i, seed in enumerate(runs):
            if seed.curve:
                xs = [getattr(p, x_key) for p in seed.curve]
                losses = [p.valid_loss for p in seed.curve]
                ax2.plot(xs, losses,
                         marker="o", color=color, alpha=1.0 if i == 0 else 0.45,
                         label=s.row if i == 0 else None)  # fmt: skip
    ax2.set_xlabel("updates" if by_updates else "training wall-clock minutes")
    ax2.set_ylabel("validation loss (bits/token)")
    ax2.set_title("Learning curves")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    allotment = _allotment(run)
    equal = (f"{allotment.updates_per_system} updates" if by_updates
             else f"{allotment.minutes_per_system:.1f} min")  # fmt: skip
    machine = run.machine.describe()
    fig.suptitle(f"{_corpus(run).name}: {equal} per system ({machine})", fontsize=9)
    fig.tight_layout()
    path = workdir / "report.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
