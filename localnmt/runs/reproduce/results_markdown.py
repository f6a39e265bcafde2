"""Markdown tables of a results page, in the papers' layout (BLEU rows; GLUE rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from localnmt.evaluation.results import TrainingRecord


@dataclass
class RowResult:
    """Everything one table row shows."""

    name: str
    row: str
    bleu: float | None
    tok_bleu: float | None = None
    delta: float | None = None
    marker: str = ""
    p_value: float | None = None
    params: int | None = None
    catalog_params: int | None = None
    ups: float | None = None
    wps: float | None = None
    is_baseline: bool = False
    #: per test set BLEU when the row's BLEU averages several (NIST MT03-MT08)
    sets: dict[str, float] | None = None
    #: how far the scored checkpoint was trained (``scores.json``'s ``training``)
    training: TrainingRecord | None = None

    def to_json(self) -> dict:
        """The row as the results JSON keeps it (field order; ``training`` as scores.json)."""
        row = dict(self.__dict__)
        row["training"] = self.training.to_json() if self.training else None
        return row

    @property
    def label(self) -> str:
        """The row's name, marked when its checkpoint's run did not finish."""
        t = self.training
        if t is not None and t.finished is False:
            return f"{self.row} (unfinished: {t.updates} of {t.max_update} updates)"
        return self.row


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def millions(n: int | None) -> str:
    """``88_000_000`` -> ``88.0M``; small models keep their exact count."""
    if n is None:
        return "n/a"
    return f"{n / 1e6:.1f}M" if n >= 100_000 else f"{n:,}"


def results_table(results: Sequence[RowResult]) -> str:
    """Model | #Params | Speed | Words/s | BLEU (+marker) | tok. BLEU | Δ | p."""
    show_catalog = any(r.catalog_params for r in results)
    set_names = list(dict.fromkeys(k for r in results for k in (r.sets or {})))
    head = ["Model", "#Params"] + (["#Params (paper size)"] if show_catalog else [])
    head += ["Speed (steps/s)", "Words/s", *(n.upper() for n in set_names)]
    head += ["BLEU" + (" (avg)" if set_names else ""), "tok. BLEU", "Δ", "p"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        bleu = _num(r.bleu, ".2f") + (f" {r.marker}" if r.marker else "")
        delta = "-" if r.is_baseline or r.delta is None else f"{r.delta:+.2f}"
        cells = [r.label, millions(r.params)]
        if show_catalog:
            cells.append(millions(r.catalog_params))
        cells += [_num(r.ups, ".2f"), _num(r.wps, ".0f")]
        cells += [_num((r.sets or {}).get(n), ".2f") for n in set_names]
        cells += [
            bleu,
            _num(r.tok_bleu, ".2f"),
            delta,
            "-" if r.is_baseline or r.p_value is None else f"{r.p_value:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


LEGEND = (
    "BLEU: SacreBLEU on detokenised output; tok. BLEU: multi-bleu style on Moses-"
    "tokenised text (German compounds split). Δ and p: against the table's baseline "
    "(paired bootstrap, 1000 samples); ↑/⇑: significantly better at p<0.05/0.01, "
    "↓/⇓ worse. Speed: median training updates/s and target words/s from the log."
)
LEGEND_MULTI_REF = (
    "MT03…MT08: case-insensitive 4-reference SacreBLEU per NIST test set; BLEU (avg): their "
    "unweighted mean, as the paper reports it. Δ: difference of the averages against the "
    "table's baseline, without a significance test (p: n/a; the single-reference paired "
    "bootstrap of each set against ref0 is in the JSON, scores.<row>.single_ref.<set>.bootstrap)."
    " Speed: median training updates/s and target words/s from the log."
)


def results_markdown(
    title: str, results: Sequence[RowResult], notes: Sequence[str], legend: str = LEGEND
) -> str:
    """A full results page: title, table, legend and run notes."""
    parts = [f"# {title}", "", results_table(results), "", legend, ""]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"


@dataclass
class GlueResult:
    """One row of a GLUE table (Pande et al. Table 4): dev accuracy per task."""

    name: str
    row: str
    accuracy: dict[str, float | None]
    params: int | None = None
    is_baseline: bool = False

    def to_json(self) -> dict:
        """The row as the results JSON keeps it (field order)."""
        return dict(self.__dict__)

    @property
    def average(self) -> float | None:
        """Mean accuracy over the tasks, None when one is missing."""
        values = list(self.accuracy.values())
        if not values or any(v is None for v in values):
            return None
        return sum(values) / len(values)  # type: ignore[arg-type]


def glue_table(results: Sequence[GlueResult], tasks: Sequence[str]) -> str:
    """Model | #Params | one column per task | Avg | Δ avg (against the reference row)."""
    head = ["Model", "#Params", *tasks, "Avg", "Δ avg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = next((r for r in results if r.is_baseline), None)
    for r in results:
        delta = (
            "-"
            if r.is_baseline or base is None or base.average is None or r.average is None
            else f"{r.average - base.average:+.2f}"
        )
        cells = [r.row, millions(r.params), *(_num(r.accuracy.get(t), ".2f") for t in tasks)]
        cells += [_num(r.average, ".2f"), delta]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def glue_markdown(
    title: str, results: Sequence[GlueResult], tasks: Sequence[str], notes: Sequence[str]
) -> str:
    """A GLUE results page."""
    legend = (
        "Dev accuracy (%) after fine-tuning the pre-trained model on each task (MNLI: "
        "matched; mismatched in the JSON); the best over the fine-tuning settings run. "
        "Δ avg: mean accuracy against the reference (plain BERT-base) row."
    )
    parts = [f"# {title}", "", glue_table(results, tasks), "", legend, ""]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"
