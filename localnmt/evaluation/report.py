"""Markdown tables of results in the papers' layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
    head = ["Model", "#Params"] + (["#Params (paper size)"] if show_catalog else [])
    head += ["Speed (steps/s)", "Words/s", "BLEU", "tok. BLEU", "Δ", "p"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        bleu = _num(r.bleu, ".2f") + (f" {r.marker}" if r.marker else "")
        delta = "-" if r.is_baseline or r.delta is None else f"{r.delta:+.2f}"
        cells = [r.row, millions(r.params)]
        if show_catalog:
            cells.append(millions(r.catalog_params))
        cells += [
            _num(r.ups, ".2f"),
            _num(r.wps, ".0f"),
            bleu,
            _num(r.tok_bleu, ".2f"),
            delta,
            "-" if r.is_baseline or r.p_value is None else f"{r.p_value:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def results_markdown(title: str, results: Sequence[RowResult], notes: Sequence[str]) -> str:
    """A full results page: title, table, legend and run notes."""
    legend = (
        "BLEU: SacreBLEU on detokenised output; tok. BLEU: multi-bleu style on Moses-"
        "tokenised text (German compounds split). Δ and p: against the table's baseline "
        "(paired bootstrap, 1000 samples); ↑/⇑: significantly better at p<0.05/0.01, "
        "↓/⇓ worse. Speed: median training updates/s and target words/s from the log."
    )
    parts = [f"# {title}", "", results_table(results), "", legend, ""]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"
