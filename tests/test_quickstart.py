"""Quickstart pieces that need no training: system selection and the report."""

from pathlib import Path

from localnmt.quickstart import FALLBACK_BASELINE, pick_systems, write_report
from localnmt.runs.train_log import TrainLog

CATALOG = [
    {"name": "base", "row": "Base", "arch": "localnmt_base", "args": []},
    {"name": "m1", "row": "M1", "arch": "x", "args": ["--a"]},
]


def test_pick_systems_skips_missing(capsys) -> None:
    assert [r["name"] for r in pick_systems(["base", "nope", "m1"], CATALOG)] == ["base", "m1"]
    assert "skipping nope" in capsys.readouterr().out
    assert pick_systems(["missing-base"], CATALOG) == [FALLBACK_BASELINE]


def _scores(bleu: float, delta: float | None = None) -> dict:
    out = {
        "sentences": 3,
        "sacrebleu": {"score": bleu, "signature": "nrefs:1|tok:13a"},
        "tokenized_bleu": {"score": bleu + 1},
    }
    if delta is not None:
        out["bootstrap"] = {"delta": delta, "marker": "↑"}
    return out


def test_report_and_plot(tmp_path: Path) -> None:
    systems = CATALOG
    results = {"base": _scores(10.0), "m1": _scores(11.5, 1.5)}
    logs = {
        "base": TrainLog(
            params=1_234_567, ups=2.0, wps=900, num_updates=40, valid=[(20, 9.0), (40, 8.0)]
        ),
        "m1": TrainLog(params=1_300_000, ups=1.5, wps=700, num_updates=30, valid=[(30, 8.5)]),
    }
    report = write_report(tmp_path, systems, results, logs).read_text()
    assert "| Base (`base`) | 10.00 | - | 11.00 | 1.2M | 40 | 2.00 | 900 |" in report
    assert "| M1 (`m1`) | 11.50 | +1.50 ↑ | 12.50 | 1.3M | 30 | 1.50 | 700 |" in report
    assert (tmp_path / "report.png").stat().st_size > 1000
